//! The intent a step writes before its provider call (the release or bind it is about to
//! ask for), decided in one place for the step itself and for the claim that leases the run,
//! which writes the first step's intent in its own transaction (`Coordinator::claim`).

use chrono::{DateTime, Utc};

use super::{waiting_for_retry, Coordinator};
use crate::domain::interaction::SuspensionReason;
use crate::domain::resource::{ExecutionResourceRecord, LifecycleWork, ReleasePurpose};
use crate::domain::resource::{ResourceState, ResourceTransitionError};
use crate::domain::sandbox::ReleaseDisposition;
use crate::domain::SuspensionId;
use crate::lifecycle::outcome::{self, BindKind};
use crate::lifecycle::plan::{self, plan, Action, PlanInput};
use crate::store::StoreError;

impl Coordinator {
    /// Claims up to `max` due runs for `holder`, writing each one's first intent (the release
    /// or bind its first step is about to ask for) in the claim's own transaction.
    pub async fn claim(
        &self,
        holder: &str,
        max: u32,
        ttl: chrono::Duration,
    ) -> Result<Vec<LifecycleWork>, StoreError> {
        let mut from = Vec::new();
        let work = self
            .store
            .claim_lifecycle_work_with(holder, max, ttl, &mut |work, now| {
                let record = first(work, now)?;
                from.push((work.run.id.clone(), work.record.state));
                Some(record)
            })
            .await?;
        for (run_id, from) in from {
            let moved = work.iter().find(|w| w.run.id == run_id);
            if let Some(to) = moved.map(|w| w.record.state).filter(|to| *to != from) {
                tracing::info!(run_id = %run_id, %from, %to, "execution resource moved");
            }
        }
        Ok(work)
    }
}

/// The release intent to write before calling `release`: for a release that has not begun
/// (the record still holds compute), or one re-issued with another disposition or purpose
/// (the run ended meanwhile), under its own key. `None`: the release under way goes on.
pub(super) fn release(
    record: &ExecutionResourceRecord,
    disposition: ReleaseDisposition,
    purpose: ReleasePurpose,
    suspension: Option<(&SuspensionId, SuspensionReason)>,
    now: DateTime<Utc>,
) -> Option<Result<ExecutionResourceRecord, ResourceTransitionError>> {
    let started = matches!(
        record.state,
        ResourceState::Active | ResourceState::ReleaseBlocked
    );
    let reissued =
        record.disposition != Some(disposition) || record.release_purpose != Some(purpose);
    (started || reissued)
        .then(|| outcome::begin_release(record.clone(), disposition, purpose, suspension, now))
}

/// The bind intent to write before provisioning or restoring: `None` when there is none to
/// write (an attach, or the intent already stored).
pub(super) fn bind(
    record: &ExecutionResourceRecord,
    kind: BindKind,
) -> Option<Result<ExecutionResourceRecord, ResourceTransitionError>> {
    if kind == BindKind::Attach {
        return None;
    }
    match outcome::begin_bind(record.clone(), kind) {
        Ok(intent) if intent == *record => None,
        other => Some(other),
    }
}

/// The intent of the first step the coordinator will take on freshly leased `work`, with the
/// `due_at` the step's own write would give it; `None` when that step writes none first
/// (or would park on a refused transition, which it then does itself).
fn first(work: &LifecycleWork, now: DateTime<Utc>) -> Option<ExecutionResourceRecord> {
    let input = PlanInput {
        run_state: work.run.state,
        record: &work.record,
        jobs: &work.jobs,
        descendants: &work.descendants,
        suspension_reason: work.suspension.as_ref().map(|s| s.reason),
    };
    let record = &work.record;
    let intent = match plan(&input) {
        Action::Release {
            disposition,
            purpose,
        } => {
            let suspension = work.suspension.as_ref().map(|s| (&s.id, s.reason));
            release(record, disposition, purpose, suspension, now)
        }
        Action::Provision { .. } if !waiting_for_retry(record, now) => {
            bind(record, BindKind::Provision)
        }
        Action::Restore if !waiting_for_retry(record, now) => bind(record, BindKind::Restore),
        _ => None,
    };
    let mut intent = intent?.ok()?;
    let next = plan(&PlanInput {
        record: &intent,
        ..input
    });
    intent.due_at = plan::due_at(&intent, &next, now);
    Some(intent)
}
