//! The labels a step and a failed call are logged and counted under.

use crate::lifecycle::outcome::{self, FailureClass};
use crate::lifecycle::plan::Action;
use crate::providers::client::ProviderCallError;

pub(super) fn action_name(action: &Action) -> &'static str {
    match action {
        Action::Idle => "idle",
        Action::Provision { .. } => "provision",
        Action::Abandon => "abandon",
        Action::Block { .. } => "block",
        Action::Release { .. } => "release",
        Action::Attach => "attach",
        Action::Restore => "restore",
        Action::FailSnapshotLost => "fail_snapshot_lost",
        Action::AbandonRelease => "abandon_release",
    }
}

/// The class a failed call is counted under.
pub(super) fn failure_label(e: &ProviderCallError) -> &'static str {
    match (outcome::classify(e), e) {
        (_, ProviderCallError::Uncertain { .. }) => "uncertain",
        (FailureClass::Retry, _) => "retry",
        (FailureClass::Refused, _) => "refused",
        (FailureClass::Final, _) => "final",
    }
}
