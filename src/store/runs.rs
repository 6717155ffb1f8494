use super::{Store, StoreResult};
use crate::domain::commands::CreateRun;
use crate::domain::run::Run;
use crate::domain::{RunId, SessionId};

impl Store {
    /// Creates a `queued` run (the spec is already validated by the caller). The session must
    /// be visible to `tenant` (`NotFound("session")`); a `parent_run_id` must be a run of the
    /// same session (`Invalid` on `parent_run_id`). Bumps the session revision, logs
    /// `run.created`, publishes the session change and new work.
    pub async fn create_run(
        &self,
        tenant: &str,
        session_id: &SessionId,
        cmd: &CreateRun,
    ) -> StoreResult<Run> {
        todo!()
    }

    pub async fn get_run(&self, tenant: Option<&str>, run_id: &RunId) -> StoreResult<Run> {
        todo!()
    }

    /// Frontend cancel: any non-terminal run → `cancelled` (a terminal one → `Conflict`
    /// `run.terminal`). Its pending interactions become `cancelled`, its open suspension
    /// `cancelled`, its lease is dropped. Revision bump, event, publish.
    pub async fn cancel_run(
        &self,
        tenant: Option<&str>,
        session_id: &SessionId,
        run_id: &RunId,
    ) -> StoreResult<Run> {
        todo!()
    }

    /// Explicit resume of a `suspended` run whose suspension has no pending interaction
    /// (`Conflict` `interaction.pending` if it has one, `run.not_suspended` if not suspended):
    /// suspension → `resolving`, run → `resuming`. Revision bump, event, publish session + work.
    pub async fn resume_run(
        &self,
        tenant: Option<&str>,
        session_id: &SessionId,
        run_id: &RunId,
        resolved_by: &str,
    ) -> StoreResult<Run> {
        todo!()
    }
}
