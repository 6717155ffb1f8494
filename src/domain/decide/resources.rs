//! What a change of an execution-resource record wakes (rules 4 and 10): a descendant's
//! compute released lets its ancestors' blocked records go.

use crate::domain::resource::ResourceState;

/// A record written in `to` may wake its ancestors: they are locked with it before the write.
pub fn may_wake_ancestors(to: ResourceState) -> bool {
    to == ResourceState::Released
}

/// A record that became released (from any other state) wakes its ancestors.
pub fn wakes_ancestors(from: ResourceState, to: ResourceState) -> bool {
    may_wake_ancestors(to) && from != ResourceState::Released
}

#[cfg(test)]
mod tests {
    use super::*;

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
