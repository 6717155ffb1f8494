use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use sqlx::any::AnyPoolOptions;
use sqlx::AnyConnection;
use sqlx::{Executor, Row};

use super::error::StoreError;
use super::error::StoreResult;
use super::group::queue::GroupCommit;
use super::handle::{Backend, Inner, Store};
use crate::clock::Clock;
use crate::domain::validate::ValidationError;
use crate::metrics::Metrics;
use crate::notify::ChangeHub;

const SQLITE_READERS: u32 = 4;
const POSTGRES_CONNECTIONS: u32 = 16;
/// How long a request waits for a PostgreSQL connection before it is answered 503: while the
/// server is down every wait lasts this long (sqlx's default is 30 s).
const POSTGRES_ACQUIRE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// Groups of writes one replica may write at once on PostgreSQL. Fewer writers make larger
/// groups: 2 gave a third more replies per second than 4, at a lower p99.
const GROUP_WRITERS: usize = 2;

/// A pool of up to `connections` on `url`, each with the service's session settings.
async fn postgres_pool(url: &str, connections: u32) -> StoreResult<sqlx::AnyPool> {
    Ok(AnyPoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(POSTGRES_ACQUIRE_TIMEOUT)
        .after_connect(|conn, _| Box::pin(postgres_settings(conn)))
        .connect(url)
        .await?)
}

/// A local file's connections need no recycling, so its pools run no maintenance task: that
/// task's sweep of idle connections can spin without yielding when it reads the idle count
/// in the middle of a release, and then holds a thread (and a runtime's shutdown) for good.
fn sqlite_pool_options() -> AnyPoolOptions {
    AnyPoolOptions::new().idle_timeout(None).max_lifetime(None)
}

impl Store {
    /// Opens the pools for `url` (`sqlite://path` — the file and its folder are created if
    /// missing, WAL, synchronous=NORMAL, busy_timeout, foreign keys — or `postgres://…`).
    /// Does not migrate.
    pub async fn connect(
        url: &str,
        clock: Arc<dyn Clock>,
        hub: Arc<ChangeHub>,
        metrics: Arc<Metrics>,
    ) -> StoreResult<Store> {
        sqlx::any::install_default_drivers();
        let (backend, write, read, grouped) = match backend_of(url)? {
            Backend::Sqlite => {
                let (path, url) = sqlite_target(url)?;
                create_private(&path, url.contains("mode=rwc"))
                    .await
                    .map_err(|e| StoreError::Unavailable(format!("{}: {e}", path.display())))?;
                let write = sqlite_pool_options()
                    .max_connections(1)
                    .after_connect(|conn, _| Box::pin(sqlite_writer_pragmas(conn)))
                    .connect(&url)
                    .await?;
                let read = sqlite_pool_options()
                    .max_connections(SQLITE_READERS)
                    .after_connect(|conn, _| Box::pin(sqlite_reader_pragmas(conn)))
                    .connect(&url)
                    .await?;
                // This process is the only writer: every commit updates the cache.
                hub.cache.set_trust(None);
                (Backend::Sqlite, write.clone(), read, write)
            }
            Backend::Postgres => {
                let pool = postgres_pool(url, POSTGRES_CONNECTIONS).await?;
                let grouped = postgres_pool(url, GROUP_WRITERS as u32).await?;
                (Backend::Postgres, pool.clone(), pool, grouped)
            }
        };
        Ok(Store {
            inner: Arc::new(Inner {
                backend,
                url: url.to_owned(),
                write,
                read,
                grouped,
                clock,
                hub,
                metrics,
                group: GroupCommit::with_writers(backend.group_writers(GROUP_WRITERS)),
                sealer: std::sync::OnceLock::new(),
            }),
        })
    }

    /// Applies the embedded migrations of this backend (`migrations/sqlite` or `migrations/postgres`).
    pub async fn migrate(&self) -> StoreResult<()> {
        self.inner.backend.migrator().run(&self.inner.write).await?;
        Ok(())
    }

    /// Ok when the database answers and every embedded migration is applied.
    pub async fn check_ready(&self) -> StoreResult<()> {
        let applied: HashSet<i64> =
            match sqlx::query("SELECT version FROM _sqlx_migrations WHERE success = TRUE")
                .fetch_all(&self.inner.read)
                .await
            {
                Ok(rows) => rows
                    .iter()
                    .map(|r| r.try_get::<i64, _>("version"))
                    .collect::<Result<_, _>>()?,
                Err(sqlx::Error::Database(e)) => {
                    return Err(StoreError::Unavailable(format!(
                        "migrations are not applied: {}",
                        e.message()
                    )))
                }
                Err(e) => return Err(e.into()),
            };
        let missing: Vec<String> = self
            .inner
            .backend
            .migrator()
            .iter()
            .filter(|m| !applied.contains(&m.version))
            .map(|m| m.version.to_string())
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(StoreError::Unavailable(format!(
                "migrations not applied: {}",
                missing.join(", ")
            )))
        }
    }

    pub async fn close(&self) {
        self.inner.write.close().await;
        self.inner.read.close().await;
        self.inner.grouped.close().await;
    }
}

fn invalid_url(message: &str) -> StoreError {
    StoreError::Invalid(ValidationError::new("database_url", message))
}

fn backend_of(url: &str) -> StoreResult<Backend> {
    if url.starts_with("sqlite:") {
        Ok(Backend::Sqlite)
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Backend::Postgres)
    } else {
        Err(invalid_url("must start with `sqlite://` or `postgres://`"))
    }
}

/// A database file that does not exist yet is created `0600` in folders created `0700`, so
/// that tokens' hashes and stored responses are the owner's alone; existing ones are kept.
async fn create_private(path: &std::path::Path, create_file: bool) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true).mode(0o700);
        let dir = dir.to_owned();
        tokio::task::spawn_blocking(move || builder.create(&dir))
            .await
            .map_err(std::io::Error::other)??;
    }
    if !create_file {
        return Ok(());
    }
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
    match created {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

/// The database file and the URL to open it with (`mode=rwc` unless a mode is given).
fn sqlite_target(url: &str) -> StoreResult<(PathBuf, String)> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    let (path, params) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    let in_memory = path.is_empty()
        || path == ":memory:"
        || params.is_some_and(|q| q.split('&').any(|kv| kv == "mode=memory"));
    if in_memory {
        return Err(invalid_url(
            "an in-memory SQLite database is not supported; name a file",
        ));
    }
    let has_mode = params.is_some_and(|q| q.split('&').any(|kv| kv.starts_with("mode=")));
    let url = match (params, has_mode) {
        (_, true) => url.to_owned(),
        (Some(_), false) => format!("{url}&mode=rwc"),
        (None, false) => format!("{url}?mode=rwc"),
    };
    Ok((PathBuf::from(percent_decode(path)), url))
}

fn percent_decode(s: &str) -> String {
    let hex = |b: &u8| (*b as char).to_digit(16);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| Some(bytes.get(i + 1).and_then(hex)? * 16 + bytes.get(i + 2).and_then(hex)?))
            .flatten();
        match escaped {
            Some(byte) => {
                out.push(byte as u8);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn sqlite_writer_pragmas(conn: &mut AnyConnection) -> Result<(), sqlx::Error> {
    conn.execute("PRAGMA journal_mode = WAL").await?;
    conn.execute("PRAGMA synchronous = NORMAL").await?;
    conn.execute("PRAGMA busy_timeout = 5000").await?;
    conn.execute("PRAGMA foreign_keys = ON").await?;
    Ok(())
}

/// No JIT: every statement here is short, but on a young database's statistics the planned
/// cost of a claim's descendant walk crosses `jit_above_cost`, and compiling it took 290 ms
/// for a query that ran in 0.06 ms.
async fn postgres_settings(conn: &mut AnyConnection) -> Result<(), sqlx::Error> {
    conn.execute("SET jit = off").await?;
    Ok(())
}

async fn sqlite_reader_pragmas(conn: &mut AnyConnection) -> Result<(), sqlx::Error> {
    conn.execute("PRAGMA busy_timeout = 5000").await?;
    conn.execute("PRAGMA foreign_keys = ON").await?;
    conn.execute("PRAGMA query_only = ON").await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_new_database_is_the_owners_alone() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("a/b/sagents.db");
        let store = Store::connect(
            &format!("sqlite://{}", path.display()),
            Arc::new(crate::clock::SystemClock),
            ChangeHub::new(),
            Arc::new(Metrics::default()),
        )
        .await
        .unwrap();
        store.migrate().await.unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&root.path().join("a")), 0o700);
        assert_eq!(mode(&root.path().join("a/b")), 0o700);
        assert_eq!(mode(&path), 0o600);
        let wal = root.path().join("a/b/sagents.db-wal");
        if wal.exists() {
            assert_eq!(mode(&wal), 0o600);
        }
        store.close().await;
    }

    #[test]
    fn sqlite_urls_create_the_file_unless_told_otherwise() {
        let (path, url) = sqlite_target("sqlite://data/sagents.db").unwrap();
        assert_eq!(path, PathBuf::from("data/sagents.db"));
        assert_eq!(url, "sqlite://data/sagents.db?mode=rwc");
        let (path, url) = sqlite_target("sqlite:///tmp/a%20b.db?cache=private").unwrap();
        assert_eq!(path, PathBuf::from("/tmp/a b.db"));
        assert_eq!(url, "sqlite:///tmp/a%20b.db?cache=private&mode=rwc");
        let (path, url) = sqlite_target("sqlite://x.db?mode=ro").unwrap();
        assert_eq!(path, PathBuf::from("x.db"));
        assert_eq!(url, "sqlite://x.db?mode=ro");
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%41%zz"), "A%zz");
    }

    #[test]
    fn unsupported_urls_name_the_setting() {
        for url in [
            "sqlite::memory:",
            "sqlite://?mode=memory",
            "mysql://x",
            "data.db",
        ] {
            let err = backend_of(url).and_then(|_| sqlite_target(url).map(|_| ()));
            match err {
                Err(StoreError::Invalid(e)) => assert_eq!(e.field, "database_url", "{url}"),
                other => panic!("{url}: {other:?}"),
            }
        }
        assert_eq!(
            backend_of("postgresql://u@h/db").unwrap(),
            Backend::Postgres
        );
    }
}
