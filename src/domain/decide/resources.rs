//! What a change of an execution-resource record wakes (rules 4 and 10): a descendant's
//! compute released lets its ancestors' blocked records go.

use chrono::{DateTime, Utc};

use crate::domain::resource::{ExecutionResourceRecord, ResourceState};

/// A record written in `to` may wake its ancestors: they are locked with it before the write.
pub fn may_wake_ancestors(to: ResourceState) -> bool {
    to == ResourceState::Released
}

/// A record that became released (from any other state) wakes its ancestors.
pub fn wakes_ancestors(from: ResourceState, to: ResourceState) -> bool {
    may_wake_ancestors(to) && from != ResourceState::Released
}

/// What one confirmed release took: from its request to its confirmation, and its attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseTaken {
    pub released_at: DateTime<Utc>,
    pub latency_ms: i64,
    pub attempts: i64,
}

/// A record written as `to` over one in `from` confirms a requested release (a receipt, an
/// inspect's evidence or an operator's word): what that release took.
pub fn release_confirmed(
    from: ResourceState,
    to: &ExecutionResourceRecord,
) -> Option<ReleaseTaken> {
    use ResourceState as S;
    let requested = matches!(
        from,
        S::ReleaseRequested | S::ReleaseFailed | S::NeedsAttention
    );
    if !requested || to.state != S::Released {
        return None;
    }
    let (asked, done) = (to.release_requested_at?, to.released_at?);
    Some(ReleaseTaken {
        released_at: done,
        latency_ms: (done - asked).num_milliseconds().max(0),
        attempts: to.retry_count.saturating_add(1).max(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::decide::fixtures::hash;
    use crate::domain::sandbox::{ResolvedSandboxSpec, WorkspaceMode};
    use crate::domain::RunId;

    #[test]
    fn a_confirmed_release_is_measured_once() {
        let t = Utc::now();
        let spec = ResolvedSandboxSpec::example("local", WorkspaceMode::Isolated);
        let mut r = ExecutionResourceRecord::provisioning(RunId::new(), spec, hash('a'), t);
        r.state = ResourceState::Released;
        r.release_requested_at = Some(t);
        r.released_at = Some(t + chrono::Duration::milliseconds(2500));
        r.retry_count = 2;
        let taken = release_confirmed(ResourceState::ReleaseFailed, &r).unwrap();
        assert_eq!(taken.latency_ms, 2500);
        assert_eq!(taken.attempts, 3);
        assert_eq!(taken.released_at, t + chrono::Duration::milliseconds(2500));
        assert!(release_confirmed(ResourceState::Released, &r).is_none());
        assert!(release_confirmed(ResourceState::Provisioning, &r).is_none());
        r.release_requested_at = None;
        assert!(release_confirmed(ResourceState::ReleaseRequested, &r).is_none());
    }

    #[test]
    fn only_a_record_that_becomes_released_wakes_its_ancestors() {
        for &from in ResourceState::ALL {
            for &to in ResourceState::ALL {
                let wakes = to == ResourceState::Released && from != ResourceState::Released;
                assert_eq!(wakes_ancestors(from, to), wakes, "{from} → {to}");
                if wakes {
                    assert!(may_wake_ancestors(to));
                }
            }
        }
        assert!(!may_wake_ancestors(ResourceState::ReleaseRequested));
    }
}
