//! The store's handle: its pools, clock, notification hub, metrics and group commit.

use std::sync::Arc;

use sqlx::AnyPool;

use super::group::queue::GroupCommit;
use crate::clock::Clock;
use crate::metrics::Metrics;
use crate::notify::ChangeHub;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Cheap to clone; every clone shares the pools.
#[derive(Clone)]
pub struct Store {
    pub(in crate::store) inner: Arc<Inner>,
}

pub(in crate::store) struct Inner {
    pub backend: Backend,
    pub url: String,
    /// SQLite: a single connection, so writers never contend; PostgreSQL: the pool shared by
    /// requests and workers.
    pub write: AnyPool,
    /// SQLite: several read connections (WAL readers); PostgreSQL: the same pool as `write`.
    pub read: AnyPool,
    /// The group commit's transactions. SQLite: `write`; PostgreSQL: one connection per group
    /// writer, so each statement text is prepared on a few connections and reused there.
    pub grouped: AnyPool,
    pub clock: Arc<dyn Clock>,
    pub hub: Arc<ChangeHub>,
    pub metrics: Arc<Metrics>,
    pub group: GroupCommit<Store>,
    /// Seals provider tokens at rest; set once after connecting (unset: stored as given).
    pub sealer: std::sync::OnceLock<crate::config::Sealer>,
}

impl Store {
    pub fn backend(&self) -> Backend {
        self.inner.backend
    }

    pub fn url(&self) -> &str {
        &self.inner.url
    }

    pub fn hub(&self) -> &Arc<ChangeHub> {
        &self.inner.hub
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.inner.clock.now()
    }
}
