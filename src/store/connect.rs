use std::sync::Arc;

use super::{Store, StoreResult};
use crate::clock::Clock;
use crate::metrics::Metrics;
use crate::notify::ChangeHub;

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
        todo!()
    }

    /// Applies the embedded migrations of this backend (`migrations/sqlite` or `migrations/postgres`).
    pub async fn migrate(&self) -> StoreResult<()> {
        todo!()
    }

    /// Ok when the database answers and every embedded migration is applied.
    pub async fn check_ready(&self) -> StoreResult<()> {
        todo!()
    }

    pub async fn close(&self) {
        todo!()
    }
}
