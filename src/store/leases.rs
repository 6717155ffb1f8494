use chrono::Duration;

use super::{Store, StoreResult};
use crate::domain::claim::Claim;
use crate::domain::commands::{CompleteRun, ConfirmResumed, FailRun, SuspendRun};
use crate::domain::run::Run;
use crate::domain::{LeaseId, RunId};

impl Store {
    /// Claims up to `max` runs of `tenant` (None: any tenant) that are ready and have no live
    /// lease: `queued` → `start` (state becomes `running`), `resuming` → `resume` (state stays
    /// `resuming`), a `running` run whose lease expired → taken over (`start`, or `resume`
    /// when it has a checkpoint). Each grant gets a new lease id and a fencing token from
    /// the monotonic source, expiring `ttl` from now. Only runs without a sandbox spec are
    /// ready for now. Oldest first. Counts claims and take-overs in the metrics.
    pub async fn claim_runs(
        &self,
        tenant: Option<&str>,
        worker_id: &str,
        max: u32,
        ttl: Duration,
    ) -> StoreResult<Vec<Claim>> {
        todo!()
    }

    /// Extends a live lease by `ttl` from now; `LeaseLost` if the token is stale or expired.
    pub async fn heartbeat(
        &self,
        tenant: Option<&str>,
        lease_id: &LeaseId,
        fencing_token: i64,
        ttl: Duration,
    ) -> StoreResult<chrono::DateTime<chrono::Utc>> {
        todo!()
    }

    /// Fenced: `running` → `suspended` with a new checkpoint (its sequence must be greater than
    /// the last one's: `Conflict` `checkpoint.sequence`; its hash must equal the run's:
    /// `Invalid` on `checkpoint.resolved_spec_hash`), an optional pending interaction and a
    /// `pending` suspension. Jobs with `cancel` become `killed`. The lease is handed back.
    pub async fn suspend_run(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        cmd: &SuspendRun,
    ) -> StoreResult<Run> {
        todo!()
    }

    /// Fenced: `resuming` → `running` after checking the hashes the runtime computed against
    /// the run, its latest checkpoint and its sandbox spec. On a mismatch the run is failed
    /// (`sandbox.policy_stale`), committed, and `PolicyStale` is returned.
    pub async fn confirm_resumed(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        cmd: &ConfirmResumed,
    ) -> StoreResult<Run> {
        todo!()
    }

    /// Fenced: `running` → `completed` with the output; the lease is released.
    pub async fn complete_run(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        cmd: &CompleteRun,
    ) -> StoreResult<Run> {
        todo!()
    }

    /// Fenced: a non-terminal run → `failed` with the error; the lease is released.
    pub async fn fail_run(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        cmd: &FailRun,
    ) -> StoreResult<Run> {
        todo!()
    }

    /// Drops every lease held by `holder` (graceful shutdown); returns how many.
    pub async fn release_leases_of(&self, holder: &str) -> StoreResult<u64> {
        todo!()
    }
}
