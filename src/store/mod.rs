//! One Store API over SQLite and PostgreSQL.
//!
//! Every use case is one method and one transaction. Both backends run the same SQL through
//! sqlx's `Any` driver (`$n` placeholders, BIGINT epoch-millisecond timestamps, JSON as TEXT);
//! the few dialect differences (claiming, the fencing-token source, notifications,
//! transaction start) live in `dialect.rs`.

mod connect;
mod dialect;
mod error;
mod events;
mod idempotency;
mod interactions;
mod jobs;
mod leases;
mod providers;
mod rows;
mod runops;
mod runs;
mod sessions;
mod settings;
mod suspensions;
mod tokens;
mod tx;

use std::sync::Arc;

use sqlx::AnyPool;

use crate::clock::Clock;
use crate::metrics::Metrics;
use crate::notify::ChangeHub;

pub use error::StoreError;
pub use events::SessionEvent;
pub use idempotency::IdempotencyBegin;
pub use interactions::ReplyOutcome;
pub use providers::ProviderRecord;

pub type StoreResult<T> = Result<T, StoreError>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Cheap to clone; every clone shares the pools.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Backend,
    url: String,
    /// SQLite: a single connection, so writers never contend; PostgreSQL: the one pool.
    write: AnyPool,
    /// SQLite: several read connections (WAL readers); PostgreSQL: the same pool as `write`.
    read: AnyPool,
    clock: Arc<dyn Clock>,
    hub: Arc<ChangeHub>,
    metrics: Arc<Metrics>,
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
