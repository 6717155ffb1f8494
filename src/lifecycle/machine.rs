//! The execution-resource state machine: one record per run that has compute.

use crate::text_enum;

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
            (S::ReleaseRequested | S::ReleaseFailed, E::ReleaseDue) => S::ReleaseRequested,
            (S::ReleaseRequested | S::ReleaseFailed, E::ReleaseConfirmed) => S::Released,
            (S::ReleaseRequested | S::ReleaseFailed, E::ReleaseAttemptFailed) => S::ReleaseFailed,
            (S::ReleaseBlocked | S::Active, E::Attach) => S::Active,
            (S::Released, E::RestoreDue) => S::RestoreRequested,
            (from, event) => return Err(ResourceTransitionError { from, event }),
        };
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ResourceEvent as E;
    use ResourceState as S;

    const EVENTS: [ResourceEvent; 9] = [
        E::Ready,
        E::BindFailed,
        E::SuspendBlocked,
        E::ReleaseDue,
        E::ReleaseConfirmed,
        E::ReleaseAttemptFailed,
        E::RestoreDue,
        E::Attach,
        E::Abandon,
    ];

    const ALLOWED: [(S, E, S); 18] = [
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
    }
}
