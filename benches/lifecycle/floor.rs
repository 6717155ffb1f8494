//! The database floor measured in the same run: single-row UPDATE transactions on a
//! 100,000-row table. PostgreSQL: `pgbench -n -c 8 -j 2 -T <s>`; SQLite: one sqlx connection
//! (WAL, synchronous=NORMAL, as the store), one autocommitted UPDATE at a time.

use std::process::Command;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use sagents::store::Backend;

use crate::db::Db;

pub const ROWS: i64 = 100_000;

async fn create_table(db: &Db) {
    db.exec("CREATE TABLE t (id BIGINT PRIMARY KEY NOT NULL, v BIGINT NOT NULL)")
        .await;
    let fill = match db.backend {
        Backend::Sqlite => format!(
            "INSERT INTO t (id, v) WITH RECURSIVE g(n) AS \
             (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {ROWS}) SELECT n, 0 FROM g"
        ),
        Backend::Postgres => {
            format!("INSERT INTO t (id, v) SELECT n, 0 FROM generate_series(1, {ROWS}) AS g(n)")
        }
    };
    db.exec(&fill).await;
    if db.backend == Backend::Postgres {
        db.exec("VACUUM ANALYZE t").await;
    }
}

/// Update transactions per second, one figure per repetition.
pub async fn measure(db: &Db, reps: usize, seconds: u64) -> Vec<f64> {
    create_table(db).await;
    let mut out = Vec::with_capacity(reps);
    for _ in 0..reps {
        out.push(match db.backend {
            Backend::Sqlite => sqlite_rate(db, Duration::from_secs(seconds)).await,
            Backend::Postgres => pgbench(&db.url, seconds),
        });
    }
    out
}

async fn sqlite_rate(db: &Db, span: Duration) -> f64 {
    let mut conn = db.sql.acquire().await.expect("a connection");
    let mut rng = rand::rngs::StdRng::from_entropy();
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < span {
        let id: i64 = rng.gen_range(1..=ROWS);
        sqlx::query("UPDATE t SET v = v + 1 WHERE id = $1")
            .bind(id)
            .execute(&mut *conn)
            .await
            .expect("update");
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn pgbench(url: &str, seconds: u64) -> f64 {
    let dir = tempfile::tempdir().expect("a temp dir");
    let script = dir.path().join("update.sql");
    std::fs::write(
        &script,
        format!("\\set id random(1, {ROWS})\nUPDATE t SET v = v + 1 WHERE id = :id;\n"),
    )
    .expect("write the pgbench script");
    let bindir = crate::pg::pg_bindir().unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(bindir.join("pgbench"))
        .args(["-n", "-c", "8", "-j", "2", "-T", &seconds.to_string(), "-f"])
        .arg(&script)
        .arg(url)
        .output()
        .expect("run pgbench");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pgbench failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find_map(|l| l.trim().strip_prefix("tps = "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no tps in pgbench output: {text}"))
}
