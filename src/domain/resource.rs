//! The execution-resource record (one per run that has compute, never shown to a frontend),
//! its state machine, and the units of lifecycle work the store hands the coordinator.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::claim::Lease;
use super::interaction::{Suspension, SuspensionReason};
use super::job::Job;
use super::run::Run;
use super::sandbox::{
    CheckpointRef, ProviderError, ReleaseDisposition, ResolvedSandboxSpec, SandboxRef,
};
use super::{JobId, RunId, SuspensionId};
use sagents_text_enum::text_enum;

/// The `error.code` of a bind that keeps failing while a human waits: it needs an operator.
pub const BIND_NEEDS_ATTENTION: &str = "bind.needs_attention";

text_enum! {
    /// Where a run's compute stands. Never shown to a frontend.
    pub enum ResourceState as "execution resource state" {
        Provisioning => "provisioning",
        Active => "active",
        ReleaseBlocked => "release_blocked",
        ReleaseRequested => "release_requested",
        ReleaseFailed => "release_failed",
        Released => "released",
        RestoreRequested => "restore_requested",
        /// A release still unconfirmed after its attempt budget: retried slowly, listed for
        /// operators.
        NeedsAttention => "needs_attention",
    }
}

/// What happened to the compute, as the coordinator observes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceEvent {
    /// The provider answered a provision, attach or restore with a ready sandbox.
    Ready,
    /// A provision or restore attempt failed and will be retried.
    BindFailed,
    /// The run suspended and something still needs the sandbox (jobs, children, detach).
    SuspendBlocked,
    /// The run suspended (or ended) and nothing holds the sandbox: release it.
    ReleaseDue,
    /// A consistent receipt confirmed the release.
    ReleaseConfirmed,
    /// A release attempt failed (error, timeout, inconsistent receipt); retried later.
    ReleaseAttemptFailed,
    /// The run resumes and its compute is gone: bring it back.
    RestoreDue,
    /// The run resumes while its sandbox is still alive (blocked or detached): re-attach.
    Attach,
    /// The run ended before a provision or restore was ever attempted: nothing to release.
    Abandon,
    /// The run resumes while its release failed definitely (the provider answered and the
    /// sandbox is running as before): the release is dropped and the sandbox kept.
    ReleaseAbandoned,
    /// A failed release has used its attempt budget: an operator should look.
    AttentionNeeded,
    /// The record says released but the provider still lists the sandbox with compute: the
    /// release is issued again (a terminate under a `reconcile` key).
    Reopened,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an execution resource in state `{from}` cannot take `{event:?}`")]
pub struct ResourceTransitionError {
    pub from: ResourceState,
    pub event: ResourceEvent,
}

impl ResourceState {
    /// Whether compute may exist for the run in this state (a leak if the run has ended).
    pub fn may_hold_compute(self) -> bool {
        !matches!(self, ResourceState::Released)
    }

    pub fn next(self, event: ResourceEvent) -> Result<ResourceState, ResourceTransitionError> {
        use ResourceEvent as E;
        use ResourceState as S;
        let next = match (self, event) {
            (S::Provisioning | S::RestoreRequested, E::Ready) => S::Active,
            (S::Provisioning, E::BindFailed) => S::Provisioning,
            (S::RestoreRequested, E::BindFailed) => S::RestoreRequested,
            (S::Provisioning | S::RestoreRequested, E::Abandon) => S::Released,
            (S::Active, E::SuspendBlocked) => S::ReleaseBlocked,
            (S::Active | S::ReleaseBlocked, E::ReleaseDue) => S::ReleaseRequested,
            // A forced terminate (after a terminal provider error) or the end of the run
            // re-issues the release under a new key.
            (S::ReleaseRequested | S::ReleaseFailed | S::NeedsAttention, E::ReleaseDue) => {
                S::ReleaseRequested
            }
            (S::ReleaseRequested | S::ReleaseFailed | S::NeedsAttention, E::ReleaseConfirmed) => {
                S::Released
            }
            (S::ReleaseRequested | S::ReleaseFailed, E::ReleaseAttemptFailed) => S::ReleaseFailed,
            (S::NeedsAttention, E::ReleaseAttemptFailed) => S::NeedsAttention,
            (S::ReleaseFailed, E::AttentionNeeded) => S::NeedsAttention,
            (S::ReleaseBlocked | S::Active, E::Attach) => S::Active,
            (S::ReleaseFailed | S::NeedsAttention, E::ReleaseAbandoned) => S::Active,
            (S::Released, E::RestoreDue) => S::RestoreRequested,
            (S::Released, E::Reopened) => S::ReleaseRequested,
            (from, event) => return Err(ResourceTransitionError { from, event }),
        };
        Ok(next)
    }
}

text_enum! {
    /// Why a release is issued; each purpose gets its own key so a forced or final terminate
    /// is never answered with the receipt of an earlier, different release.
    pub enum ReleasePurpose as "release purpose" {
        /// The release that follows a suspension.
        Suspend => "suspend",
        /// A forced terminate after the provider reported the sandbox broken.
        ForcedTerminate => "forced_terminate",
        /// The run ended: no sandbox outlives its run.
        RunEnded => "run_ended",
        /// The reconciler found compute that a released record said was gone; the sandbox's
        /// checkpoint, if any, is kept.
        Reconcile => "reconcile",
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ExecutionResourceRecord {
    pub run_id: RunId,
    /// 0 before the first bind, 1 at first bind, +1 on every attach, restore or re-provision.
    pub generation: i64,
    pub provider_id: String,
    /// The provider's own generation of the compute; grants name it.
    pub provider_generation: Option<i64>,
    pub sandbox_ref: Option<SandboxRef>,
    pub sandbox_spec: ResolvedSandboxSpec,
    pub run_resolved_spec_hash: String,
    pub state: ResourceState,
    pub disposition: Option<ReleaseDisposition>,
    pub sandbox_checkpoint: Option<CheckpointRef>,
    /// A terminal provider error destroyed the sandbox checkpoint; resume fails with
    /// `sandbox.snapshot_lost`.
    pub checkpoint_lost: bool,
    pub suspension_id: Option<SuspensionId>,
    pub suspension_reason: Option<SuspensionReason>,
    pub blocking_job_ids: Vec<JobId>,
    pub blocking_child_run_ids: Vec<RunId>,
    pub release_idempotency_key: Option<String>,
    pub release_purpose: Option<ReleasePurpose>,
    pub release_requested_at: Option<DateTime<Utc>>,
    pub released_at: Option<DateTime<Utc>>,
    pub compute_released: bool,
    /// Key of the provision or restore under way; set before the provider is called, so a
    /// run that ends meanwhile knows compute may exist.
    pub bind_idempotency_key: Option<String>,
    pub retry_count: i64,
    pub next_retry_at: Option<DateTime<Utc>>,
    /// When the coordinator should next look at this record (`None`: nothing to do).
    pub due_at: Option<DateTime<Utc>>,
    pub error: Option<ProviderError>,
    /// Compare-and-set version, bumped by every write.
    pub version: i64,
    pub updated_at: DateTime<Utc>,
}

impl ExecutionResourceRecord {
    /// The record as it is created with its run: nothing bound yet, due at once.
    pub fn provisioning(
        run_id: RunId,
        spec: ResolvedSandboxSpec,
        run_resolved_spec_hash: String,
        now: DateTime<Utc>,
    ) -> Self {
        ExecutionResourceRecord {
            run_id,
            generation: 0,
            provider_id: spec.provider_id.clone(),
            provider_generation: None,
            sandbox_ref: None,
            sandbox_spec: spec,
            run_resolved_spec_hash,
            state: ResourceState::Provisioning,
            disposition: None,
            sandbox_checkpoint: None,
            checkpoint_lost: false,
            suspension_id: None,
            suspension_reason: None,
            blocking_job_ids: vec![],
            blocking_child_run_ids: vec![],
            release_idempotency_key: None,
            release_purpose: None,
            release_requested_at: None,
            released_at: None,
            compute_released: false,
            bind_idempotency_key: None,
            retry_count: 0,
            next_retry_at: None,
            due_at: Some(now),
            error: None,
            version: 1,
            updated_at: now,
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use ResourceEvent as E;
    use ResourceState as S;

    const EVENTS: [ResourceEvent; 12] = [
        E::Ready,
        E::BindFailed,
        E::SuspendBlocked,
        E::ReleaseDue,
        E::ReleaseConfirmed,
        E::ReleaseAttemptFailed,
        E::RestoreDue,
        E::Attach,
        E::Abandon,
        E::ReleaseAbandoned,
        E::AttentionNeeded,
        E::Reopened,
    ];

    const ALLOWED: [(S, E, S); 25] = [
        (S::Provisioning, E::Ready, S::Active),
        (S::RestoreRequested, E::Ready, S::Active),
        (S::Provisioning, E::BindFailed, S::Provisioning),
        (S::RestoreRequested, E::BindFailed, S::RestoreRequested),
        (S::Provisioning, E::Abandon, S::Released),
        (S::RestoreRequested, E::Abandon, S::Released),
        (S::Active, E::SuspendBlocked, S::ReleaseBlocked),
        (S::Active, E::ReleaseDue, S::ReleaseRequested),
        (S::ReleaseBlocked, E::ReleaseDue, S::ReleaseRequested),
        (S::ReleaseRequested, E::ReleaseDue, S::ReleaseRequested),
        (S::ReleaseFailed, E::ReleaseDue, S::ReleaseRequested),
        (S::ReleaseRequested, E::ReleaseConfirmed, S::Released),
        (S::ReleaseFailed, E::ReleaseConfirmed, S::Released),
        (
            S::ReleaseRequested,
            E::ReleaseAttemptFailed,
            S::ReleaseFailed,
        ),
        (S::ReleaseFailed, E::ReleaseAttemptFailed, S::ReleaseFailed),
        (S::ReleaseBlocked, E::Attach, S::Active),
        (S::Active, E::Attach, S::Active),
        (S::Released, E::RestoreDue, S::RestoreRequested),
        (S::ReleaseFailed, E::ReleaseAbandoned, S::Active),
        (S::ReleaseFailed, E::AttentionNeeded, S::NeedsAttention),
        (
            S::NeedsAttention,
            E::ReleaseAttemptFailed,
            S::NeedsAttention,
        ),
        (S::NeedsAttention, E::ReleaseConfirmed, S::Released),
        (S::NeedsAttention, E::ReleaseDue, S::ReleaseRequested),
        (S::NeedsAttention, E::ReleaseAbandoned, S::Active),
        (S::Released, E::Reopened, S::ReleaseRequested),
    ];

    #[test]
    fn every_allowed_transition() {
        for (from, event, to) in ALLOWED {
            assert_eq!(from.next(event), Ok(to), "{from} {event:?}");
        }
    }

    #[test]
    fn every_other_transition_is_forbidden() {
        for &from in ResourceState::ALL {
            for event in EVENTS {
                let allowed = ALLOWED.iter().any(|(f, e, _)| *f == from && *e == event);
                if !allowed {
                    assert_eq!(
                        from.next(event),
                        Err(ResourceTransitionError { from, event }),
                        "{from} {event:?} must be refused"
                    );
                }
            }
        }
    }

    #[test]
    fn released_compute_cannot_be_released_or_attached_again() {
        assert!(S::Released.next(E::ReleaseConfirmed).is_err());
        assert!(S::Released.next(E::Attach).is_err());
        assert!(S::Released.next(E::ReleaseDue).is_err());
        assert!(!S::Released.may_hold_compute());
        assert!(S::ReleaseBlocked.may_hold_compute());
        assert!(S::NeedsAttention.may_hold_compute());
    }
}
