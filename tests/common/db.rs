//! A fresh database per test, on either backend.

use std::sync::Arc;

use sagents::clock::Clock;
use sagents::metrics::Metrics;
use sagents::notify::ChangeHub;
pub use sagents::store::Backend;
use sagents::store::Store;

use super::pg::{self, PgDatabase};

/// Keeps a test database alive; dropping it cleans up.
pub enum TestDb {
    Sqlite(tempfile::TempDir),
    Postgres(PgDatabase),
}

/// The URL of a fresh database (PostgreSQL: already migrated; SQLite: an empty file).
pub async fn fresh_url(backend: Backend) -> (String, TestDb) {
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::Builder::new()
                .prefix("sagents-sqlite-")
                .tempdir()
                .expect("create a temp dir");
            let url = format!("sqlite://{}/sagents.db", dir.path().display());
            (url, TestDb::Sqlite(dir))
        }
        Backend::Postgres => {
            let (url, db) = pg::fresh_postgres_database().await;
            (url, TestDb::Postgres(db))
        }
    }
}

/// The URL of a database with no tables at all.
pub async fn blank_url(backend: Backend) -> (String, TestDb) {
    match backend {
        Backend::Sqlite => fresh_url(backend).await,
        Backend::Postgres => {
            let (url, db) = pg::blank_postgres_database().await;
            (url, TestDb::Postgres(db))
        }
    }
}

/// A connected, migrated store on a fresh database.
pub async fn store(backend: Backend, clock: Arc<dyn Clock>) -> (Store, TestDb) {
    store_with(
        backend,
        clock,
        ChangeHub::new(),
        Arc::new(Metrics::default()),
    )
    .await
}

pub async fn store_with(
    backend: Backend,
    clock: Arc<dyn Clock>,
    hub: Arc<ChangeHub>,
    metrics: Arc<Metrics>,
) -> (Store, TestDb) {
    let (url, db) = fresh_url(backend).await;
    let store = Store::connect(&url, clock, hub, metrics)
        .await
        .expect("connect to the test database");
    store.migrate().await.expect("migrate the test database");
    (store, db)
}

/// Every value of one BLOB/BYTEA or TEXT column, read straight from the database behind the
/// store (lossy UTF-8): for checking what is stored at rest.
pub async fn column_text(url: &str, table: &str, column: &str) -> Vec<String> {
    let rows: Vec<(Vec<u8>,)> = if url.starts_with("sqlite:") {
        let sql = format!("SELECT CAST({column} AS BLOB) FROM {table} WHERE {column} IS NOT NULL");
        let pool = sqlx::SqlitePool::connect(url).await.expect("open sqlite");
        let rows = sqlx::query_as(&sql).fetch_all(&pool).await.unwrap();
        pool.close().await;
        rows
    } else {
        let sql = format!("SELECT {column}::bytea FROM {table} WHERE {column} IS NOT NULL");
        let pool = sqlx::PgPool::connect(url).await.expect("open postgres");
        let rows = sqlx::query_as(&sql).fetch_all(&pool).await.unwrap();
        pool.close().await;
        rows
    };
    rows.into_iter()
        .map(|(b,)| String::from_utf8_lossy(&b).into_owned())
        .collect()
}

/// Runs `sql` straight on the database behind the store, as someone with access to it could.
pub async fn execute(url: &str, sql: &str) {
    if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(url).await.expect("open sqlite");
        sqlx::query(sql).execute(&pool).await.unwrap();
        pool.close().await;
    } else {
        let pool = sqlx::PgPool::connect(url).await.expect("open postgres");
        sqlx::query(sql).execute(&pool).await.unwrap();
        pool.close().await;
    }
}
