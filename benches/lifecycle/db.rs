//! Fresh databases for the bench: a connected, migrated store plus a raw connection pool for
//! the bench's own SQL (counts, bulk loads, the floor).

use std::sync::Arc;
use std::time::{Duration, Instant};

use sagents::clock::SystemClock;
use sagents::metrics::Metrics;
use sagents::notify::ChangeHub;
use sagents::store::{Backend, Store};
use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, Executor, Row};

use crate::pg;

pub fn name(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "SQLite",
        Backend::Postgres => "PostgreSQL",
    }
}

enum Guard {
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres(#[allow(dead_code)] pg::PgDatabase),
}

pub struct Db {
    pub backend: Backend,
    pub store: Store,
    pub sql: AnyPool,
    pub url: String,
    _guard: Guard,
}

/// The URL of a fresh database: SQLite, a file in a new temp dir; PostgreSQL, a migrated
/// clone on the bench's throwaway cluster.
async fn fresh_url(backend: Backend) -> (String, Guard) {
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::Builder::new()
                .prefix("sagents-lbench-")
                .tempdir()
                .expect("a temp dir");
            let url = format!("sqlite://{}/sagents.db?mode=rwc", dir.path().display());
            (url, Guard::Sqlite(dir))
        }
        Backend::Postgres => {
            let (url, db) = pg::fresh_postgres_database().await;
            (url, Guard::Postgres(db))
        }
    }
}

/// A raw pool on `url` (SQLite: one connection, WAL, synchronous=NORMAL, like the store's writer).
pub async fn raw_pool(backend: Backend, url: &str) -> AnyPool {
    sqlx::any::install_default_drivers();
    let mut options = AnyPoolOptions::new().max_connections(match backend {
        Backend::Sqlite => 1,
        Backend::Postgres => 2,
    });
    if backend == Backend::Sqlite {
        options = options.after_connect(|conn, _| {
            Box::pin(async move {
                conn.execute("PRAGMA journal_mode = WAL").await?;
                conn.execute("PRAGMA synchronous = NORMAL").await?;
                conn.execute("PRAGMA busy_timeout = 5000").await?;
                Ok(())
            })
        });
    }
    options.connect(url).await.expect("connect the raw pool")
}

pub async fn fresh(backend: Backend) -> Db {
    let (url, guard) = fresh_url(backend).await;
    let store = Store::connect(
        &url,
        Arc::new(SystemClock),
        ChangeHub::new(),
        Arc::new(Metrics::default()),
    )
    .await
    .expect("connect the store");
    store.migrate().await.expect("migrate");
    let sql = raw_pool(backend, &url).await;
    Db {
        backend,
        store,
        sql,
        url,
        _guard: guard,
    }
}

impl Db {
    pub async fn close(self) {
        self.store.close().await;
        self.sql.close().await;
    }

    pub async fn scalar(&self, query: &str) -> i64 {
        sqlx::query(query)
            .fetch_one(&self.sql)
            .await
            .and_then(|row| row.try_get::<i64, _>(0))
            .unwrap_or_else(|e| panic!("{query}: {e}"))
    }

    pub async fn exec(&self, query: &str) {
        sqlx::query(query)
            .execute(&self.sql)
            .await
            .unwrap_or_else(|e| panic!("{query}: {e}"));
    }

    /// Records in `state`.
    pub async fn count_state(&self, state: &str) -> i64 {
        self.scalar(&format!(
            "SELECT COUNT(*) FROM execution_resources WHERE state = '{state}'"
        ))
        .await
    }

    /// Polls every `every` until `count_state(state) >= n`; returns when it first saw it.
    /// Panics after `timeout` (a safety net, never the measurement).
    pub async fn until_count(
        &self,
        state: &str,
        n: i64,
        every: Duration,
        timeout: Duration,
    ) -> Instant {
        let deadline = Instant::now() + timeout;
        loop {
            let seen = self.count_state(state).await;
            if seen >= n {
                return Instant::now();
            }
            if Instant::now() > deadline {
                let failed = self.count_state("release_failed").await;
                panic!("only {seen} of {n} records reached `{state}` ({failed} release_failed)");
            }
            tokio::time::sleep(every).await;
        }
    }
}
