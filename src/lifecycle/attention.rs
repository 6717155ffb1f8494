//! What an operator may do with a `needs_attention` record: retry it now (the cause was
//! fixed), or declare its compute gone (checked by hand at the provider). Either decision is
//! written under the run's lease, so it never races a coordinator.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::outcome::{in_progress, retry_at, Next, OutcomeResult};
use super::rules::{self, Cadence};
use crate::domain::resource::{ExecutionResourceRecord, ResourceEvent, ResourceState};
use crate::domain::sandbox::{ProviderError, ReleaseDisposition};
use crate::domain::RunId;
use crate::store::{Store, StoreError};

mod bind;
pub use bind::{
    bind_needs_attention, escalate_bind, give_up, BIND_ABANDONED, BIND_ATTENTION_MIN_FAILING,
    BIND_IN_PROGRESS_ATTENTION_AFTER, BIND_NEEDS_ATTENTION,
};

/// When a failing release stops being routine: after `attempt_budget` failed attempts the
/// record needs an operator and is retried only every `retry_every`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionPolicy {
    pub attempt_budget: u32,
    pub retry_every: std::time::Duration,
}

impl Default for AttentionPolicy {
    fn default() -> Self {
        AttentionPolicy {
            attempt_budget: 10,
            retry_every: std::time::Duration::from_secs(900),
        }
    }
}

/// A release needs attention only after failing this long, however many attempts it made.
pub const ATTENTION_MIN_FAILING: chrono::Duration = chrono::Duration::minutes(10);

/// A release the provider still reports in progress after this long needs an operator too
/// (it is still asked on the provider's wait).
pub const IN_PROGRESS_ATTENTION_AFTER: chrono::Duration = chrono::Duration::minutes(30);

/// A release still failing after its budget (and at least [`ATTENTION_MIN_FAILING`]) enters
/// `needs_attention`; once there, every retry waits `retry_every` instead of the backoff,
/// unless the run resumes: its human never waits on the operators' cadence. An operation
/// still in progress is no failure, until it has run [`IN_PROGRESS_ATTENTION_AFTER`]. Other
/// records are returned unchanged.
pub fn escalate(
    mut record: ExecutionResourceRecord,
    policy: AttentionPolicy,
    now: DateTime<Utc>,
    jitter: f64,
    cadence: Cadence,
) -> OutcomeResult<ExecutionResourceRecord> {
    if in_progress(&record) {
        let running = now - record.release_requested_at.unwrap_or(now);
        if running >= IN_PROGRESS_ATTENTION_AFTER {
            if record.state == ResourceState::ReleaseRequested {
                record.state = record.state.next(ResourceEvent::ReleaseAttemptFailed)?;
            }
            if record.state == ResourceState::ReleaseFailed {
                record.state = record.state.next(ResourceEvent::AttentionNeeded)?;
            }
        }
        return Ok(record);
    }
    let budget = i64::from(policy.attempt_budget.max(1));
    // Quick retries (a resume waiting) use the attempts up long before the backoff would.
    let failing_since = record.release_requested_at.unwrap_or(now);
    let long_enough = now - failing_since >= ATTENTION_MIN_FAILING;
    if record.state == ResourceState::ReleaseFailed && record.retry_count >= budget && long_enough {
        record.state = record.state.next(ResourceEvent::AttentionNeeded)?;
    }
    if record.state == ResourceState::NeedsAttention && !cadence.is_resume() {
        record.next_retry_at = Some(retry_at(
            now,
            rules::with_jitter(policy.retry_every, jitter),
        ));
    }
    Ok(record)
}

/// The `error.code` of a record an operator declared released.
pub const RESOLVED_BY_OPERATOR: &str = "release.resolved_by_operator";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AttentionAction {
    /// Retry the release at once, with its key, as the coordinator would.
    RetryNow,
    /// The operator verified that the sandbox is gone: the record is `released` on that
    /// word, with `compute_released` false (no receipt said so).
    MarkReleased,
    /// For a bind (provision, restore or attach) that keeps failing while a human waits
    /// (`bind.needs_attention`): the run fails with `sandbox.bind_abandoned` and its record
    /// ends without compute (a sandbox that may exist is terminated).
    GiveUp,
}

#[derive(Debug, thiserror::Error)]
pub enum AttentionError {
    #[error("the execution resource is `{0}`, not `needs_attention`")]
    NotInAttention(ResourceState),
    #[error("the execution resource (`{0}`) has no bind that needs attention")]
    NoBindInAttention(ResourceState),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Transition(#[from] crate::domain::resource::ResourceTransitionError),
}

/// Due at once; the coordinator then calls the provider without waiting for the slow retry.
pub fn retry_now(
    mut record: ExecutionResourceRecord,
    now: DateTime<Utc>,
) -> ExecutionResourceRecord {
    record.next_retry_at = Some(now);
    record.due_at = Some(now);
    record
}

/// Released on the operator's word. A snapshot that was never confirmed is lost: a resume
/// then fails with `sandbox.snapshot_lost` instead of restoring from nothing.
pub fn mark_released(
    mut record: ExecutionResourceRecord,
    reason: &str,
    now: DateTime<Utc>,
) -> OutcomeResult<ExecutionResourceRecord> {
    record.state = record.state.next(ResourceEvent::ReleaseConfirmed)?;
    record.checkpoint_lost |= record.disposition == Some(ReleaseDisposition::SnapshotAndTerminate);
    record.sandbox_checkpoint = None;
    record.compute_released = false;
    record.released_at = Some(now);
    record.retry_count = 0;
    record.next_retry_at = None;
    record.error = Some(ProviderError {
        code: RESOLVED_BY_OPERATOR.into(),
        category: "operator".into(),
        message: reason.into(),
        retryable: false,
    });
    // The coordinator looks once more and settles what the run needs next.
    record.due_at = Some(now);
    Ok(record)
}

/// Applies an operator's decision to the run's `needs_attention` record and returns the
/// record as stored.
pub async fn resolve(
    store: &Store,
    run_id: &RunId,
    action: AttentionAction,
    reason: &str,
    operator: &str,
) -> Result<ExecutionResourceRecord, AttentionError> {
    let lease = store
        .lease_run(run_id, operator, chrono::Duration::seconds(30))
        .await?;
    let result = async {
        let record = store.get_resource(run_id).await?;
        let now = store.now();
        let next = match action {
            AttentionAction::GiveUp if !bind_needs_attention(&record) => {
                return Err(AttentionError::NoBindInAttention(record.state));
            }
            AttentionAction::GiveUp => give_up(record, reason, now)?,
            _ if record.state != ResourceState::NeedsAttention => {
                return Err(AttentionError::NotInAttention(record.state));
            }
            AttentionAction::RetryNow => Next::plain(retry_now(record, now)),
            AttentionAction::MarkReleased => Next::plain(mark_released(record, reason, now)?),
        };
        let saved = store
            .save_resource(run_id, lease.fencing_token, &next.record, next.effect)
            .await?;
        tracing::warn!(run_id = %run_id, ?action, %reason, %operator, "operator resolved attention");
        Ok(saved)
    }
    .await;
    if let Err(e) = store.release_lease(run_id, &lease).await {
        tracing::warn!(run_id = %run_id, error = %e, "could not hand the operator lease back");
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::resource::ReleasePurpose;
    use crate::domain::sandbox::{ResolvedSandboxSpec, WorkspaceMode};

    fn attention(disposition: ReleaseDisposition) -> ExecutionResourceRecord {
        let spec = ResolvedSandboxSpec::example("local", WorkspaceMode::Isolated);
        let mut r =
            ExecutionResourceRecord::provisioning(RunId::new(), spec, "h".into(), Utc::now());
        r.state = ResourceState::NeedsAttention;
        r.disposition = Some(disposition);
        r.release_purpose = Some(ReleasePurpose::Suspend);
        r.retry_count = 12;
        r
    }

    #[test]
    fn marked_released_on_the_operators_word_never_claims_a_receipt() {
        let now = Utc::now();
        let r = mark_released(
            attention(ReleaseDisposition::Terminate),
            "gone at the host",
            now,
        )
        .unwrap();
        assert_eq!(r.state, ResourceState::Released);
        assert!(!r.compute_released);
        assert!(!r.checkpoint_lost);
        assert_eq!(
            r.error.as_ref().map(|e| e.code.as_str()),
            Some(RESOLVED_BY_OPERATOR)
        );
        assert_eq!(r.retry_count, 0);
        assert_eq!(r.due_at, Some(now));
    }

    #[test]
    fn an_unconfirmed_snapshot_is_lost_when_marked_released() {
        let r = mark_released(
            attention(ReleaseDisposition::SnapshotAndTerminate),
            "x",
            Utc::now(),
        )
        .unwrap();
        assert!(r.checkpoint_lost);
        assert!(r.sandbox_checkpoint.is_none());
    }

    #[test]
    fn only_a_record_in_attention_or_release_can_be_marked_released() {
        let mut r = attention(ReleaseDisposition::Terminate);
        r.state = ResourceState::Active;
        assert!(mark_released(r, "x", Utc::now()).is_err());
    }

    fn failing(retry_count: i64) -> ExecutionResourceRecord {
        let mut r = attention(ReleaseDisposition::SnapshotAndTerminate);
        r.state = ResourceState::ReleaseFailed;
        r.retry_count = retry_count;
        r.release_requested_at = Some(Utc::now() - chrono::Duration::hours(1));
        r.error = Some(ProviderError {
            code: "sandbox.snapshot_failed".into(),
            category: "internal".into(),
            message: "the sandbox runs again".into(),
            retryable: true,
        });
        r
    }

    #[test]
    fn the_budget_decides_when_a_failing_release_needs_attention() {
        let policy = AttentionPolicy {
            attempt_budget: 3,
            retry_every: std::time::Duration::from_secs(600),
        };
        let now = Utc::now();
        let below = escalate(failing(2), policy, now, 0.0, Cadence::Release).unwrap();
        assert_eq!(below.state, ResourceState::ReleaseFailed);
        assert_eq!(
            below.next_retry_at, None,
            "below the budget the backoff stands"
        );
        let at = escalate(failing(3), policy, now, 0.0, Cadence::Release).unwrap();
        assert_eq!(at.state, ResourceState::NeedsAttention);
        assert_eq!(
            at.next_retry_at,
            Some(crate::clock::truncate_ms(
                now + chrono::Duration::seconds(600)
            ))
        );
        let again = escalate(at.clone(), policy, now, 1.0, Cadence::Release).unwrap();
        assert_eq!(again.state, ResourceState::NeedsAttention);
        assert_eq!(
            again.next_retry_at,
            Some(crate::clock::truncate_ms(
                now + chrono::Duration::seconds(660)
            ))
        );
        let mut quick = failing(3);
        quick.release_requested_at = Some(now - chrono::Duration::seconds(20));
        assert_eq!(
            escalate(quick, policy, now, 0.0, Cadence::Release)
                .unwrap()
                .state,
            ResourceState::ReleaseFailed,
            "attempts spent in seconds, while a resume waits, are not yet a case for an operator"
        );
        let mut active = failing(50);
        active.state = ResourceState::Active;
        assert_eq!(
            escalate(active.clone(), policy, now, 0.0, Cadence::Release).unwrap(),
            active
        );
    }

    #[test]
    fn attention_never_delays_a_resume_and_in_progress_is_no_failure() {
        let policy = AttentionPolicy::default();
        let now = Utc::now();
        let resume = Cadence::Resume { since: now };
        let mut r = failing(12);
        r.next_retry_at = Some(now + chrono::Duration::seconds(2));
        let marked = escalate(r.clone(), policy, now, 0.0, resume).unwrap();
        assert_eq!(
            marked.state,
            ResourceState::NeedsAttention,
            "operators see it"
        );
        assert_eq!(
            marked.next_retry_at, r.next_retry_at,
            "the resume cadence's retry stands"
        );
        let again = escalate(marked.clone(), policy, now, 0.0, resume).unwrap();
        assert_eq!(again, marked);

        let mut waiting = failing(12);
        waiting.error = Some(ProviderError {
            code: crate::providers::codes::OPERATION_IN_PROGRESS.into(),
            category: "in_progress".into(),
            message: "still archiving".into(),
            retryable: true,
        });
        waiting.next_retry_at = Some(now + chrono::Duration::seconds(3));
        waiting.release_requested_at = Some(now - chrono::Duration::minutes(29));
        assert_eq!(
            escalate(waiting.clone(), policy, now, 0.0, Cadence::Release).unwrap(),
            waiting,
            "an operation in progress (not for half an hour) moves nothing toward an operator"
        );
    }

    #[test]
    fn a_record_in_attention_is_planned_like_a_failed_release() {
        use crate::domain::run::RunState;
        use crate::lifecycle::plan::{plan, Action, PlanInput};
        let mut r = failing(10);
        r.state = ResourceState::NeedsAttention;
        let input = |run_state| PlanInput {
            run_state,
            record: &r,
            jobs: &[],
            descendants: &[],
            suspension_reason: None,
        };
        assert!(matches!(
            plan(&input(RunState::Suspended)),
            Action::Release { .. }
        ));
        assert_eq!(
            plan(&input(RunState::Resuming)),
            Action::AbandonRelease,
            "the human does not wait"
        );
        assert_eq!(
            plan(&input(RunState::Completed)),
            Action::Release {
                disposition: ReleaseDisposition::Terminate,
                purpose: ReleasePurpose::RunEnded,
            },
            "a run that ends is terminated whatever was asked"
        );
    }

    #[test]
    fn retry_now_makes_it_due_at_once_and_keeps_the_state() {
        let now = Utc::now();
        let r = retry_now(attention(ReleaseDisposition::Terminate), now);
        assert_eq!(r.state, ResourceState::NeedsAttention);
        assert_eq!((r.next_retry_at, r.due_at), (Some(now), Some(now)));
        assert_eq!(r.retry_count, 12);
    }
}
