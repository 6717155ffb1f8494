//! A checkpoint a snapshot receipt named before its kill failed exists: it is kept through
//! the retry, a forced terminate and an inspect, and never recorded lost.

use super::*;

/// What a provider answers when the archive is saved and the kill fails.
fn kill_failed_receipt() -> SandboxReleaseReceipt {
    SandboxReleaseReceipt {
        state: SandboxState::Suspended,
        checkpoint: Some(checkpoint().into()),
        ..receipt(ReleaseDisposition::SnapshotAndTerminate, false)
    }
}

fn kept() -> (ExecutionResourceRecord, DateTime<Utc>) {
    let (r, _, t) = releasing(ReleaseDisposition::SnapshotAndTerminate);
    let r = release_answered(r, &kill_failed_receipt(), t, 0.0, Cadence::Release).unwrap();
    (r, t)
}

#[test]
fn an_unreleased_receipt_naming_a_checkpoint_keeps_it_and_retries() {
    let (r, _) = kept();
    assert_eq!(r.state, ResourceState::ReleaseFailed);
    assert_eq!(r.sandbox_checkpoint, Some(checkpoint()));
    assert!(!r.checkpoint_lost);
    let done = release_answered(
        r,
        &receipt(ReleaseDisposition::SnapshotAndTerminate, true),
        now(),
        0.0,
        Cadence::Release,
    )
    .unwrap();
    assert_eq!(done.state, ResourceState::Released);
    assert_eq!(done.sandbox_checkpoint, Some(checkpoint()));
}

#[test]
fn a_forced_terminate_after_the_checkpoint_was_named_keeps_it() {
    let (r, t) = kept();
    let forced = release_failed(r, &terminal(), t, 0.0, Cadence::Release).unwrap();
    assert_eq!(
        forced.release_purpose,
        Some(ReleasePurpose::ForcedTerminate)
    );
    assert!(!forced.checkpoint_lost, "the checkpoint exists");
    assert_eq!(forced.sandbox_checkpoint, Some(checkpoint()));
    let done = release_answered(
        forced.clone(),
        &receipt(ReleaseDisposition::Terminate, true),
        t,
        0.0,
        Cadence::Release,
    )
    .unwrap();
    assert_eq!(done.state, ResourceState::Released);
    assert_eq!(done.sandbox_checkpoint, Some(checkpoint()));
    assert!(!done.checkpoint_lost);
    let inspected = release_confirmed_by_inspect(forced, "gone", None, t).unwrap();
    assert_eq!(inspected.sandbox_checkpoint, Some(checkpoint()));
    assert!(!inspected.checkpoint_lost);
}

#[test]
fn an_inspect_after_the_checkpoint_was_named_keeps_it() {
    let (r, t) = kept();
    let done = release_confirmed_by_inspect(r, "terminated", None, t).unwrap();
    assert_eq!(done.state, ResourceState::Released);
    assert_eq!(done.sandbox_checkpoint, Some(checkpoint()));
    assert!(!done.checkpoint_lost);
}
