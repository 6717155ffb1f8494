use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Store, StoreResult};
use crate::domain::claim::Lease;
use crate::domain::interaction::Suspension;
use crate::domain::job::Job;
use crate::domain::run::Run;
use crate::domain::RunId;
use crate::lifecycle::machine::ResourceState;
use crate::lifecycle::record::ExecutionResourceRecord;

/// A run whose compute needs the coordinator, leased to it with a fresh fencing token.
#[derive(Debug, Clone)]
pub struct LifecycleWork {
    pub run: Run,
    pub tenant_id: String,
    pub lease: Lease,
    pub record: ExecutionResourceRecord,
    pub jobs: Vec<Job>,
    /// Every descendant run (any depth) that has a record, with its state.
    pub descendants: Vec<(RunId, ResourceState)>,
    /// The run's latest suspension, if any.
    pub suspension: Option<Suspension>,
}

/// A side effect on the run that goes with a record write, in the same transaction.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEffect {
    None,
    /// Fail the run (if not already terminal) with `{code, message}`: visible, so the session
    /// revision is bumped, its pending interaction cancelled and the event logged.
    Fail {
        code: String,
        message: String,
    },
}

/// The operator's view of the lifecycle (never changes anything a user sees).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LifecycleMetrics {
    /// Records `active`.
    pub active_sandboxes: i64,
    /// Records `release_blocked`.
    pub retained_sandboxes: i64,
    /// `release_blocked` + `release_requested` + `release_failed`.
    pub pending_releases: i64,
    /// Records `release_failed`.
    pub release_failure_count: i64,
    /// Sum of `retry_count` over all records.
    pub release_retry_count: i64,
    /// Age of the oldest `release_blocked` record (0 when none).
    pub max_blocked_age_seconds: f64,
    /// Mean of `released_at − release_requested_at` over released records (0 when none).
    pub average_release_latency_seconds: f64,
    /// Quantiles of the same latency over the most recent 10,000 releases.
    pub release_latency_p50_seconds: f64,
    pub release_latency_p95_seconds: f64,
    pub release_latency_p99_seconds: f64,
    /// Records in each state, by state name.
    pub records_by_state: std::collections::BTreeMap<String, i64>,
    pub generated_at: DateTime<Utc>,
}

impl Store {
    /// Claims up to `max` runs whose record is due (`due_at <= now`) and whose run has no live
    /// lease, leasing each to `holder` for `ttl` with a new fencing token (same source and
    /// counters as runtime claims). Oldest `due_at` first.
    pub async fn claim_lifecycle_work(
        &self,
        holder: &str,
        max: u32,
        ttl: Duration,
    ) -> StoreResult<Vec<LifecycleWork>> {
        todo!()
    }

    /// The earliest future `due_at` of any record, so an idle worker knows when to look again.
    pub async fn next_lifecycle_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        todo!()
    }

    /// Writes `record` (every mutable field) if the run's lease is still held with
    /// `fencing_token` and the stored `version` still equals `record.version`, bumping the
    /// version. `LeaseLost` (counted in `fenced_rejections`) or `Conflict`
    /// `resource.version_conflict` otherwise, writing nothing. Never touches the session
    /// revision or the run's visible fields, except through `effect`. Logs a lifecycle event
    /// when the state changes; when the record becomes `released`, every ancestor record
    /// that is `release_blocked` becomes due; publishes work when the record is due or
    /// became claimable by runtimes (`active` and not due).
    pub async fn save_resource(
        &self,
        run_id: &RunId,
        fencing_token: i64,
        record: &ExecutionResourceRecord,
        effect: RunEffect,
    ) -> StoreResult<ExecutionResourceRecord> {
        todo!()
    }

    /// Hands back a lease if `fencing_token` still holds it (no-op otherwise).
    pub async fn release_lease(&self, run_id: &RunId, fencing_token: i64) -> StoreResult<()> {
        todo!()
    }

    /// `NotFound("execution resource")` when the run has no record.
    pub async fn get_resource(&self, run_id: &RunId) -> StoreResult<ExecutionResourceRecord> {
        todo!()
    }

    pub async fn lifecycle_metrics(&self) -> StoreResult<LifecycleMetrics> {
        todo!()
    }
}
