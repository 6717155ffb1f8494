use super::{Store, StoreResult};
use crate::domain::commands::CreateJob;
use crate::domain::job::{Job, JobState};
use crate::domain::{JobId, RunId};

impl Store {
    /// Fenced: a `running` job for a run in `running` state (defaults: detach, sandbox).
    pub async fn create_job(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        cmd: &CreateJob,
    ) -> StoreResult<Job> {
        todo!()
    }

    /// Not fenced (jobs outlive leases). Forward moves only: `Conflict` `job.finished` /
    /// `job.invalid_transition` otherwise. Setting the current state again is a no-op.
    pub async fn update_job(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        job_id: &JobId,
        state: JobState,
    ) -> StoreResult<Job> {
        todo!()
    }

    pub async fn list_jobs(&self, tenant: Option<&str>, run_id: &RunId) -> StoreResult<Vec<Job>> {
        todo!()
    }
}
