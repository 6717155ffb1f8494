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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::commands::*;
    use crate::domain::job::JobState;
    use crate::domain::token::Role;
    use crate::domain::*;

    fn send<T: Send>(_: &T) {}

    /// Handlers run on a multi-threaded runtime: every use case must be a `Send` future.
    /// Checked at compile time; never called.
    #[allow(dead_code)]
    fn every_use_case_is_send(
        s: &Store,
        ids: (&SessionId, &RunId, &InteractionId, &JobId, &LeaseId),
        sessions: (&CreateSession, &ReplyInteraction),
        runs: (
            &CreateRun,
            &SuspendRun,
            &ConfirmResumed,
            &CompleteRun,
            &FailRun,
        ),
        job: &CreateJob,
        record: &crate::domain::resource::ExecutionResourceRecord,
    ) {
        let (ses, run, int, job_id, lease) = ids;
        let ttl = chrono::Duration::seconds(1);
        send(&s.create_session("t", sessions.0));
        send(&s.get_session(None, ses));
        send(&s.snapshot(None, ses));
        send(&s.session_revision(None, ses));
        send(&s.create_run("t", ses, runs.0));
        send(&s.get_run(None, run));
        send(&s.cancel_run(None, ses, run, "u"));
        send(&s.resume_run(None, ses, run, "u"));
        send(&s.claim_runs(None, "w", 1, ttl));
        send(&s.heartbeat(None, lease, 1, ttl));
        send(&s.suspend_run(None, run, runs.1));
        send(&s.confirm_resumed(None, run, runs.2));
        send(&s.complete_run(None, run, runs.3));
        send(&s.fail_run(None, run, runs.4));
        send(&s.release_leases_of("w"));
        send(&s.reply_interaction(None, ses, int, sessions.1, "u"));
        send(&s.expire_interactions());
        send(&s.create_job(None, run, job));
        send(&s.update_job(None, run, job_id, JobState::Completed));
        send(&s.list_jobs(None, run));
        send(&s.list_events(None, ses, 0, 1));
        send(&s.list_inbox("t", None, 1));
        send(&s.create_token(Role::Admin, None, None));
        send(&s.authenticate("h"));
        send(&s.idempotency_begin("s", "k", "h", ttl));
        send(&s.idempotency_finish("s", "k", 200, b""));
        send(&s.setting_or_init("k", "v"));
        send(&s.upsert_provider("p", "u", "t", &serde_json::Value::Null, "u"));
        send(&s.list_providers());
        send(&s.check_ready());
        send(&s.claim_lifecycle_work("c", 1, ttl));
        send(&s.next_lifecycle_due());
        send(&s.save_resource(run, 1, record, crate::domain::resource::RunEffect::None));
        let lease = crate::domain::claim::Lease {
            lease_id: lease.clone(),
            fencing_token: 1,
            expires_at: s.now(),
        };
        send(&s.release_lease(run, &lease));
        send(&s.get_resource(run));
        send(&s.lifecycle_metrics());
        send(&Store::connect(
            "sqlite://x",
            s.clock().clone(),
            s.hub().clone(),
            s.metrics().clone(),
        ));
    }
}
