//! A provider's answer outlives a wake-up: while the call was out, a reply or a finished job
//! may have made the record due (a hook bumps its version), yet the answer is still what
//! happened at the provider, and calling again would cost the human another round trip.

use super::{Coordinator, CoordinatorError, Next, Processed, Step, Work};
use crate::domain::resource::{ExecutionResourceRecord, RunEffect};
use crate::store::StoreError;

impl Coordinator {
    /// Writes a provider's answer. If a hook bumped the record meanwhile and changed nothing
    /// the answer depends on, the answer is written over the fresh version, due at once, and
    /// this work stops so that the next claim plans from the fresh run.
    pub(super) async fn commit_answer(
        &self,
        w: &mut Work,
        next: Next,
    ) -> Result<Step, CoordinatorError> {
        let answer = (next.effect == RunEffect::None).then(|| next.record.clone());
        let result = self.commit(w, next).await;
        let (Err(CoordinatorError::Store(StoreError::VersionConflict { .. })), Some(mut record)) =
            (&result, answer)
        else {
            return result;
        };
        let fresh = self.store.get_resource(&w.run.id).await?;
        if !only_woken(&w.record, &fresh) {
            return result;
        }
        record.version = fresh.version;
        record.due_at = Some(self.now());
        let saved = self
            .store
            .save_resource_and_release_lease(&w.run.id, w.token, &record)
            .await?;
        w.handed_back = true;
        tracing::info!(from = %w.record.state, to = %saved.state, "answer kept over a wake-up");
        w.record = saved;
        Ok(Step::Stop(Processed::Rebased))
    }
}

/// Whether `fresh` differs from what the call was planned from only in what a wake-up hook
/// writes: its version, due time and update time.
fn only_woken(planned: &ExecutionResourceRecord, fresh: &ExecutionResourceRecord) -> bool {
    let mut woken = fresh.clone();
    woken.version = planned.version;
    woken.due_at = planned.due_at;
    woken.updated_at = planned.updated_at;
    &woken == planned
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::resource::ResourceState;
    use crate::domain::sandbox::{ResolvedSandboxSpec, WorkspaceMode};
    use crate::domain::RunId;
    use chrono::{Duration, Utc};

    fn record() -> ExecutionResourceRecord {
        let spec = ResolvedSandboxSpec::example("local", WorkspaceMode::Isolated);
        ExecutionResourceRecord::provisioning(RunId::new(), spec, "h".into(), Utc::now())
    }

    #[test]
    fn only_a_wake_up_lets_an_answer_stand() {
        let planned = record();
        let mut woken = planned.clone();
        woken.version += 1;
        woken.due_at = Some(Utc::now() - Duration::seconds(1));
        woken.updated_at = Utc::now();
        assert!(only_woken(&planned, &woken));
        let mut moved = woken.clone();
        moved.state = ResourceState::Active;
        assert!(!only_woken(&planned, &moved));
        let mut blocked = woken;
        blocked.blocking_job_ids = vec![crate::domain::JobId::new()];
        assert!(!only_woken(&planned, &blocked));
    }
}
