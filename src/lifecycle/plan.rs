//! What the coordinator does next for a run, derived from the run's state and its record
//! alone (level-triggered): a restart needs no recovery beyond expired leases.

use chrono::{DateTime, Utc};

use super::outcome;
use super::rules::{self, Blockers, ResumePlan};
use crate::domain::interaction::SuspensionReason;
use crate::domain::job::Job;
use crate::domain::resource::ExecutionResourceRecord;
use crate::domain::resource::ReleasePurpose;
use crate::domain::resource::ResourceState;
use crate::domain::run::RunState;
use crate::domain::sandbox::ReleaseDisposition;
use crate::domain::RunId;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing to do now: clear `due_at`.
    Idle,
    /// Call the provider's provision (first bind, or a fresh sandbox for a terminated
    /// host-persistent workspace when `fresh_after_release`).
    Provision { fresh_after_release: bool },
    /// The run ended before any provision or restore was attempted: no compute exists.
    Abandon,
    /// Keep the sandbox (jobs, children or detach hold it): record the blockers.
    Block {
        disposition: ReleaseDisposition,
        blockers: Blockers,
    },
    /// Call the provider's release.
    Release {
        disposition: ReleaseDisposition,
        purpose: ReleasePurpose,
    },
    /// The sandbox is alive: attach to it for the resuming run.
    Attach,
    /// Restore from the sandbox checkpoint taken at release.
    Restore,
    /// The sandbox checkpoint is gone: fail the run with `sandbox.snapshot_lost`.
    FailSnapshotLost,
    /// The run resumes and its release failed definitely: keep the running sandbox.
    AbandonRelease,
}

pub struct PlanInput<'a> {
    pub run_state: RunState,
    pub record: &'a ExecutionResourceRecord,
    /// The run's jobs.
    pub jobs: &'a [Job],
    /// Every descendant run (any depth) that has a record, with its state.
    pub descendants: &'a [(RunId, ResourceState)],
    /// The reason of the run's latest suspension, if any.
    pub suspension_reason: Option<SuspensionReason>,
}

pub fn plan(input: &PlanInput<'_>) -> Action {
    use ResourceState as S;
    let record = input.record;
    let ended = input.run_state.is_terminal();
    let pausing = matches!(
        input.run_state,
        RunState::Suspended | RunState::SuspendRequested
    );
    let resuming = input.run_state == RunState::Resuming;
    let end_release = Action::Release {
        disposition: ReleaseDisposition::Terminate,
        purpose: ReleasePurpose::RunEnded,
    };
    match record.state {
        S::Provisioning if ended && record.bind_idempotency_key.is_none() => Action::Abandon,
        S::Provisioning => Action::Provision {
            fresh_after_release: false,
        },
        S::Active | S::ReleaseBlocked if ended => end_release,
        S::Active | S::ReleaseBlocked if pausing => {
            let reason = input
                .suspension_reason
                .unwrap_or(SuspensionReason::ManualPause);
            let disposition = rules::disposition(reason, &record.sandbox_spec);
            let blockers = rules::blockers(disposition, input.jobs, input.descendants);
            if blockers.is_blocked() {
                Action::Block {
                    disposition,
                    blockers,
                }
            } else {
                Action::Release {
                    disposition,
                    purpose: ReleasePurpose::Suspend,
                }
            }
        }
        S::Active | S::ReleaseBlocked if resuming => Action::Attach,
        S::Active | S::ReleaseBlocked => Action::Idle,
        // A run that ended mid-release is terminated whatever was asked before: a snapshot
        // that keeps failing, or a detach, must not keep its sandbox alive.
        S::ReleaseRequested | S::ReleaseFailed | S::NeedsAttention
            if ended && record.disposition != Some(ReleaseDisposition::Terminate) =>
        {
            end_release
        }
        // The provider called the sandbox broken and the snapshot with it: the human is told at
        // once, and the terminate goes on as the end of the run.
        S::ReleaseRequested | S::ReleaseFailed | S::NeedsAttention
            if resuming
                && record.release_purpose == Some(ReleasePurpose::ForcedTerminate)
                && record.checkpoint_lost =>
        {
            Action::FailSnapshotLost
        }
        S::ReleaseFailed | S::NeedsAttention
            if resuming
                && record.release_purpose.unwrap_or(ReleasePurpose::Suspend)
                    == ReleasePurpose::Suspend
                && resume_plan_of(record) == ResumePlan::AbandonRelease =>
        {
            Action::AbandonRelease
        }
        // A child's sandbox appeared after the release was asked for: keep the parent's.
        S::ReleaseFailed | S::NeedsAttention
            if pausing
                && record.release_purpose.unwrap_or(ReleasePurpose::Suspend)
                    == ReleasePurpose::Suspend
                && resume_plan_of(record) == ResumePlan::AbandonRelease
                && input.descendants.iter().any(|(_, s)| *s != S::Released) =>
        {
            Action::AbandonRelease
        }
        S::ReleaseRequested | S::ReleaseFailed | S::NeedsAttention => Action::Release {
            disposition: record.disposition.unwrap_or(ReleaseDisposition::Terminate),
            purpose: record.release_purpose.unwrap_or(ReleasePurpose::Suspend),
        },
        S::Released if resuming => match resume_plan_of(record) {
            ResumePlan::Restore => Action::Restore,
            ResumePlan::ProvisionFresh => Action::Provision {
                fresh_after_release: true,
            },
            ResumePlan::SnapshotLost => Action::FailSnapshotLost,
            _ => Action::Idle,
        },
        S::Released => Action::Idle,
        S::RestoreRequested if ended && record.bind_idempotency_key.is_none() => Action::Abandon,
        S::RestoreRequested if record.sandbox_checkpoint.is_some() && !record.checkpoint_lost => {
            Action::Restore
        }
        S::RestoreRequested => Action::Provision {
            fresh_after_release: true,
        },
    }
}

fn resume_plan_of(record: &ExecutionResourceRecord) -> ResumePlan {
    rules::resume_plan(
        record.state,
        record.disposition,
        record.sandbox_checkpoint.is_some(),
        record.checkpoint_lost,
        // No recorded error is no evidence of a running sandbox, nor is an operation under way.
        record.error.as_ref().is_none_or(|e| e.outcome_unknown()) || outcome::in_progress(record),
    )
}

/// When the coordinator should next look at `record`, given the plan's next action for it:
/// the one rule for `due_at`. A pending retry waits for its time, whatever the action (even
/// dropping a release asks the provider first); a record the plan has nothing to do for
/// (idle, blocked, or a sandbox just bound for a resuming run that the runtime now waits for)
/// is not due; anything else is due now.
pub fn due_at(
    record: &ExecutionResourceRecord,
    next: &Action,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    if let Some(at) = record.next_retry_at.filter(|at| *at > now) {
        return Some(at);
    }
    let bound = record.state == ResourceState::Active && record.bind_idempotency_key.is_none();
    match next {
        Action::Idle => None,
        Action::Block { .. } if record.state == ResourceState::ReleaseBlocked => None,
        Action::Attach if bound => None,
        _ => Some(now),
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
