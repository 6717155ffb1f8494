//! The lifecycle rules as pure functions: disposition, blocking, idempotency keys, backoff
//! and the resume plan.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::domain::interaction::SuspensionReason;
use crate::domain::job::{ExecutionAffinity, Job, PauseBehavior};
use crate::domain::resource::ReleasePurpose;
use crate::domain::resource::ResourceState;
use crate::domain::run::RunState;
use crate::domain::sandbox::{ReleaseDisposition, ResolvedSandboxSpec};
use crate::domain::{JobId, RunId, SuspensionId};

/// Only `policy_hold` is an unsafe pause; every other reason releases compute.
pub fn disposition(reason: SuspensionReason, spec: &ResolvedSandboxSpec) -> ReleaseDisposition {
    if reason.is_unsafe() {
        spec.unsafe_pause_behavior()
    } else {
        spec.safe_pause_behavior()
    }
}

/// What keeps a suspended run's sandbox alive.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Blockers {
    pub job_ids: Vec<JobId>,
    pub child_run_ids: Vec<RunId>,
    pub detach: bool,
}

impl Blockers {
    pub fn is_blocked(&self) -> bool {
        self.detach || !self.job_ids.is_empty() || !self.child_run_ids.is_empty()
    }
}

/// A job holds the sandbox while it runs inside it and was not asked to stop at a pause.
pub fn job_blocks_release(job: &Job) -> bool {
    job.execution_affinity == ExecutionAffinity::Sandbox
        && matches!(
            job.pause_behavior,
            PauseBehavior::Continue | PauseBehavior::Detach
        )
        && !job.state.is_finished()
}

/// `descendants`: every descendant run (any depth) that has a record, with that record's state.
pub fn blockers(
    disposition: ReleaseDisposition,
    jobs: &[Job],
    descendants: &[(RunId, ResourceState)],
) -> Blockers {
    Blockers {
        job_ids: jobs
            .iter()
            .filter(|j| job_blocks_release(j))
            .map(|j| j.id.clone())
            .collect(),
        child_run_ids: descendants
            .iter()
            .filter(|(_, state)| *state != ResourceState::Released)
            .map(|(id, _)| id.clone())
            .collect(),
        detach: disposition == ReleaseDisposition::Detach,
    }
}

/// Deterministic, so every retry of the same release (by any replica) reuses it.
pub fn release_idempotency_key(
    run_id: &RunId,
    generation: i64,
    suspension_id: Option<&SuspensionId>,
    purpose: ReleasePurpose,
) -> String {
    let sus = suspension_id.map_or("none", |s| s.as_str());
    let suffix = match purpose {
        ReleasePurpose::Suspend => "release",
        ReleasePurpose::ForcedTerminate => "forced-terminate",
        ReleasePurpose::RunEnded => "run-ended",
        ReleasePurpose::Reconcile => "reconcile",
    };
    format!("{run_id}:g{generation}:{sus}:{suffix}")
}

pub const BACKOFF_CAP: Duration = Duration::from_secs(300);

/// `min(300 s, 1 s × 2^(retry_count − 1))` for `retry_count ≥ 1`.
pub fn backoff(retry_count: u32) -> Duration {
    let exp = retry_count.saturating_sub(1).min(16);
    Duration::from_secs(1u64 << exp).min(BACKOFF_CAP)
}

pub const RESUME_BACKOFF_FLOOR: Duration = Duration::from_millis(250);
pub const RESUME_BACKOFF_CAP: Duration = Duration::from_secs(5);

/// While a human waits for a resume, a failed call waits as long as the human has waited
/// since the reply, from 0.25 s to 5 s: the tries come 0.25 s, 0.5 s, 1 s, 2 s, 4 s and 8 s
/// after the reply (the wait doubling with each attempt), then every 5 s, whatever the
/// record counted before the reply. A streak of failures that starts later, after a step
/// succeeded (its attempts counted from one again), starts again from 0.25 s:
/// [`resume_attempt_backoff`] bounds it.
pub fn resume_backoff(waited: Duration) -> Duration {
    waited.clamp(RESUME_BACKOFF_FLOOR, RESUME_BACKOFF_CAP)
}

/// `min(5 s, 0.25 s × 2^(attempts − 1))`: the wait of the `attempts`-th failure of one
/// streak while a human waits.
pub fn resume_attempt_backoff(attempts: u32) -> Duration {
    let exp = attempts.saturating_sub(1).min(16);
    (RESUME_BACKOFF_FLOOR * (1u32 << exp)).min(RESUME_BACKOFF_CAP)
}

/// How soon a failed provider call is tried again: the one rule for every retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cadence {
    /// Nobody waits on the call (the run is suspended or ended): [`backoff`] by attempt, and
    /// an operator's cadence once a release needs attention.
    Release,
    /// The run resumes: its human answered at `since` and waits.
    Resume { since: DateTime<Utc> },
    /// The run waits for its first sandbox since `since`: retried on the resume's quick
    /// cadence, but a refusal is a refusal (nobody has answered anything yet).
    Start { since: DateTime<Utc> },
}

impl Cadence {
    /// `run_updated_at` is when the run last changed status: for a resuming run, the reply.
    pub fn of(run_state: RunState, run_updated_at: DateTime<Utc>) -> Cadence {
        match run_state {
            RunState::Resuming => Cadence::Resume {
                since: run_updated_at,
            },
            RunState::Queued => Cadence::Start {
                since: run_updated_at,
            },
            _ => Cadence::Release,
        }
    }

    pub fn is_resume(self) -> bool {
        matches!(self, Cadence::Resume { .. })
    }

    /// The cap of this cadence's backoff; an operation in progress waits no longer.
    pub fn cap(self) -> Duration {
        match self {
            Cadence::Release => BACKOFF_CAP,
            Cadence::Resume { .. } | Cadence::Start { .. } => RESUME_BACKOFF_CAP,
        }
    }

    /// The wait after the `attempts`-th failed attempt at `now`, jittered by `jitter` in
    /// `[-1, 1]`; a resume's never beyond its cap.
    pub fn delay(self, attempts: u32, now: DateTime<Utc>, jitter: f64) -> Duration {
        match self {
            Cadence::Release => with_jitter(backoff(attempts), jitter),
            Cadence::Resume { since } | Cadence::Start { since } => {
                let waited = (now - since).to_std().unwrap_or_default();
                let streak = resume_attempt_backoff(attempts);
                with_jitter(resume_backoff(waited.min(streak)), jitter).min(RESUME_BACKOFF_CAP)
            }
        }
    }
}

/// Applies a jitter factor in `[-1, 1]` scaled to at most ±10 %.
pub fn with_jitter(delay: Duration, factor: f64) -> Duration {
    let factor = factor.clamp(-1.0, 1.0) * 0.1;
    delay.mul_f64(1.0 + factor)
}

/// How a resuming run gets its compute back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumePlan {
    /// The sandbox is alive (never released, blocked or detached): attach to it.
    Attach,
    /// A release is under way, or its last attempt's outcome is unknown: finish it (same key,
    /// at once) before restoring; compute whose state is unknown is never attached.
    FinishReleaseFirst,
    /// The last release attempt failed definitely (the provider answered; a recoverable error
    /// promises the sandbox runs again): drop the release and attach, without waiting.
    AbandonRelease,
    /// Restore from the sandbox checkpoint taken at release.
    Restore,
    /// The workspace lives on the host (terminate): provision fresh and re-mount it.
    ProvisionFresh,
    /// The checkpoint was lost to a terminal provider error: fail with `sandbox.snapshot_lost`.
    SnapshotLost,
    /// A restore is already under way: retry it with its key.
    ContinueRestore,
}

pub fn resume_plan(
    state: ResourceState,
    disposition: Option<ReleaseDisposition>,
    has_checkpoint: bool,
    checkpoint_lost: bool,
    release_outcome_unknown: bool,
) -> ResumePlan {
    match state {
        ResourceState::Active | ResourceState::ReleaseBlocked | ResourceState::Provisioning => {
            ResumePlan::Attach
        }
        ResourceState::ReleaseFailed | ResourceState::NeedsAttention
            if !release_outcome_unknown =>
        {
            ResumePlan::AbandonRelease
        }
        ResourceState::ReleaseRequested
        | ResourceState::ReleaseFailed
        | ResourceState::NeedsAttention => ResumePlan::FinishReleaseFirst,
        ResourceState::RestoreRequested => ResumePlan::ContinueRestore,
        ResourceState::Released if checkpoint_lost => ResumePlan::SnapshotLost,
        // A checkpoint kept through a later terminate (a reconcile) is restored from too.
        ResourceState::Released if has_checkpoint => ResumePlan::Restore,
        ResourceState::Released => match disposition {
            Some(ReleaseDisposition::SnapshotAndTerminate) => ResumePlan::SnapshotLost,
            _ => ResumePlan::ProvisionFresh,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::job::JobState;
    use crate::domain::sandbox::WorkspaceMode;

    fn spec(mode: WorkspaceMode) -> ResolvedSandboxSpec {
        ResolvedSandboxSpec::example("local", mode)
    }

    fn job(affinity: ExecutionAffinity, pause: PauseBehavior, state: JobState) -> Job {
        let now = Utc::now();
        Job {
            id: JobId::new(),
            run_id: RunId::new(),
            kind: "tool".into(),
            payload: serde_json::json!({}),
            pause_behavior: pause,
            execution_affinity: affinity,
            state,
            created_at: now,
            updated_at: now,
        }
    }

    #[test]
    fn disposition_by_reason_and_workspace() {
        let iso = spec(WorkspaceMode::Isolated);
        let active = spec(WorkspaceMode::ActiveWorkspace);
        assert_eq!(
            disposition(SuspensionReason::ApprovalRequired, &iso),
            ReleaseDisposition::SnapshotAndTerminate
        );
        assert_eq!(
            disposition(SuspensionReason::ManualPause, &active),
            ReleaseDisposition::Terminate
        );
        assert_eq!(
            disposition(SuspensionReason::PolicyHold, &iso),
            ReleaseDisposition::Detach
        );
        let mut custom = spec(WorkspaceMode::Isolated);
        custom.lifecycle.unsafe_pause_behavior = Some(ReleaseDisposition::Terminate);
        assert_eq!(
            disposition(SuspensionReason::PolicyHold, &custom),
            ReleaseDisposition::Terminate
        );
    }

    #[test]
    fn only_unfinished_sandbox_jobs_that_keep_running_block() {
        use ExecutionAffinity::*;
        use PauseBehavior::*;
        assert!(job_blocks_release(&job(
            Sandbox,
            Continue,
            JobState::Running
        )));
        assert!(job_blocks_release(&job(
            Sandbox,
            Detach,
            JobState::Orphaned
        )));
        assert!(!job_blocks_release(&job(
            Sandbox,
            Cancel,
            JobState::Running
        )));
        assert!(!job_blocks_release(&job(
            External,
            Continue,
            JobState::Running
        )));
        assert!(!job_blocks_release(&job(
            Sandbox,
            Continue,
            JobState::Completed
        )));
    }

    #[test]
    fn children_block_until_released_and_detach_always_blocks() {
        let done = RunId::new();
        let busy = RunId::new();
        let b = blockers(
            ReleaseDisposition::SnapshotAndTerminate,
            &[],
            &[
                (done, ResourceState::Released),
                (busy.clone(), ResourceState::ReleaseFailed),
            ],
        );
        assert_eq!(b.child_run_ids, vec![busy]);
        assert!(b.is_blocked());
        assert!(!blockers(ReleaseDisposition::Terminate, &[], &[]).is_blocked());
        assert!(blockers(ReleaseDisposition::Detach, &[], &[]).is_blocked());
    }

    #[test]
    fn idempotency_keys_are_deterministic_per_purpose() {
        let run = RunId::new();
        let sus = SuspensionId::new();
        let a = release_idempotency_key(&run, 2, Some(&sus), ReleasePurpose::Suspend);
        assert_eq!(
            a,
            release_idempotency_key(&run, 2, Some(&sus), ReleasePurpose::Suspend)
        );
        assert_ne!(
            a,
            release_idempotency_key(&run, 3, Some(&sus), ReleasePurpose::Suspend)
        );
        assert_ne!(
            a,
            release_idempotency_key(&run, 2, Some(&sus), ReleasePurpose::ForcedTerminate)
        );
        assert_ne!(
            a,
            release_idempotency_key(&run, 2, None, ReleasePurpose::Suspend)
        );
    }

    #[test]
    fn backoff_doubles_from_one_second_to_five_minutes() {
        let secs: Vec<u64> = (1..=12).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(backoff(u32::MAX), BACKOFF_CAP);
        assert_eq!(
            with_jitter(Duration::from_secs(100), 1.0),
            Duration::from_secs(110)
        );
        assert_eq!(
            with_jitter(Duration::from_secs(100), -5.0),
            Duration::from_secs(90)
        );
    }

    #[test]
    fn a_resume_retries_from_a_quarter_second_doubling_to_five() {
        let since = Utc::now();
        let resume = Cadence::Resume { since };
        let at = |ms: i64| since + chrono::Duration::milliseconds(ms);
        // Each try waits as long as the human has waited: the tries double apart.
        let mut t = 0;
        let mut waits = vec![];
        for attempt in 1..=8 {
            let wait = resume.delay(attempt, at(t), 0.0).as_millis();
            waits.push(wait);
            t += i64::try_from(wait).unwrap();
        }
        assert_eq!(waits, [250, 250, 500, 1000, 2000, 4000, 5000, 5000]);
        assert_eq!(
            resume.delay(9, at(3_600_000), 1.0),
            RESUME_BACKOFF_CAP,
            "jitter never passes the cap"
        );
        assert_eq!(
            resume.delay(9, at(3_600_000), -1.0),
            Duration::from_millis(4500)
        );
        assert_eq!(
            resume.delay(1, at(-5_000), 0.0),
            RESUME_BACKOFF_FLOOR,
            "a clock behind the reply waits the floor"
        );
        // A streak that starts long after the reply (its attempts counted afresh) starts
        // again from the floor.
        let late: Vec<u128> = (1..=7)
            .map(|n| resume.delay(n, at(60_000), 0.0).as_millis())
            .collect();
        assert_eq!(late, [250, 500, 1000, 2000, 4000, 5000, 5000]);
        assert_eq!(
            Cadence::Release.delay(3, at(0), 0.0),
            Duration::from_secs(4),
            "a suspended run keeps the release backoff"
        );
        assert_eq!(Cadence::of(RunState::Resuming, since), resume);
        assert_eq!(Cadence::of(RunState::Suspended, since), Cadence::Release);
        let start = Cadence::of(RunState::Queued, since);
        assert_eq!(start, Cadence::Start { since });
        assert!(
            !start.is_resume(),
            "a refused provision of a new run fails it"
        );
        let starting: Vec<u128> = (1..=7)
            .map(|n| start.delay(n, at(60_000), 0.0).as_millis())
            .collect();
        assert_eq!(starting, [250, 500, 1000, 2000, 4000, 5000, 5000]);
        assert_eq!(start.cap(), RESUME_BACKOFF_CAP);
        assert_eq!(Cadence::Release.cap(), BACKOFF_CAP);
    }

    #[test]
    fn resume_plans() {
        use ReleaseDisposition as D;
        use ResourceState as S;
        let plan = |s, d, ckpt, lost, unknown| resume_plan(s, d, ckpt, lost, unknown);
        let snap = Some(D::SnapshotAndTerminate);
        assert_eq!(
            plan(S::ReleaseBlocked, Some(D::Detach), false, false, false),
            ResumePlan::Attach
        );
        assert_eq!(
            plan(S::ReleaseFailed, snap, false, false, false),
            ResumePlan::AbandonRelease,
            "a definite failure left the sandbox running"
        );
        assert_eq!(
            plan(S::ReleaseFailed, snap, false, false, true),
            ResumePlan::FinishReleaseFirst,
            "an unknown outcome is settled by the release itself"
        );
        assert_eq!(
            plan(S::ReleaseRequested, snap, false, false, false),
            ResumePlan::FinishReleaseFirst
        );
        assert_eq!(
            plan(S::Released, snap, true, false, false),
            ResumePlan::Restore
        );
        assert_eq!(
            plan(S::Released, Some(D::Terminate), false, false, false),
            ResumePlan::ProvisionFresh
        );
        assert_eq!(
            plan(S::Released, snap, true, true, false),
            ResumePlan::SnapshotLost
        );
        assert_eq!(
            plan(S::Released, snap, false, false, false),
            ResumePlan::SnapshotLost
        );
        assert_eq!(
            plan(S::RestoreRequested, None, true, false, false),
            ResumePlan::ContinueRestore
        );
    }
}
