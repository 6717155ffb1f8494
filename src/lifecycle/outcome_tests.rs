use super::*;
use crate::domain::sandbox::{CheckpointRef, SandboxRef};
use crate::domain::sandbox::{ResolvedSandboxSpec, WorkspaceMode};
use crate::domain::{JobId, RunId};
use crate::lifecycle::rules::Cadence;
use crate::providers::client::UncertainKind;
use crate::providers::wire::SandboxHandle;
use crate::providers::wire::{ProviderError as WireError, SandboxState};
use chrono::Duration;

fn now() -> DateTime<Utc> {
    crate::clock::truncate_ms(Utc::now())
}

fn sandbox_ref(id: &str) -> SandboxRef {
    SandboxRef {
        sandbox_id: id.into(),
        provider_id: "local".into(),
        provider_version: "0.1.0".into(),
        tenant_id: "acme".into(),
        owner_run_id: "run_1".into(),
        spec_hash: format!("sha256:{}", "1".repeat(64)),
        policy_hash: format!("sha256:{}", "2".repeat(64)),
    }
}

pub(super) fn record(state: ResourceState) -> ExecutionResourceRecord {
    ExecutionResourceRecord {
        generation: 1,
        provider_generation: Some(1),
        sandbox_ref: Some(sandbox_ref("sbx_1")),
        state,
        version: 3,
        ..ExecutionResourceRecord::provisioning(
            RunId::new(),
            ResolvedSandboxSpec::example("local", WorkspaceMode::Isolated),
            format!("sha256:{}", "3".repeat(64)),
            now(),
        )
    }
}

fn checkpoint() -> CheckpointRef {
    CheckpointRef {
        checkpoint_id: "ckp_1".into(),
        provider_id: "local".into(),
        sandbox_id: "sbx_1".into(),
        generation: 1,
        size_bytes: 10,
        digest: Some(format!("sha256:{}", "9".repeat(64))),
        // Fixed: two checkpoints made a millisecond apart must still compare equal.
        created_at: DateTime::from_timestamp_millis(1_790_000_000_000).unwrap_or_default(),
    }
}

fn receipt(d: ReleaseDisposition, released: bool) -> SandboxReleaseReceipt {
    SandboxReleaseReceipt {
        r#ref: sandbox_ref("sbx_1").into(),
        disposition: d.into(),
        state: if released {
            SandboxState::Terminated
        } else {
            SandboxState::Ready
        },
        checkpoint: (d == ReleaseDisposition::SnapshotAndTerminate && released)
            .then(|| checkpoint().into()),
        compute_released: released,
        duplicate: false,
        released_at: now() - Duration::hours(1),
    }
}

fn handle(id: &str) -> SandboxHandle {
    SandboxHandle {
        r#ref: sandbox_ref(id).into(),
        state: SandboxState::Ready,
        revision: 1,
        generation: 1,
        grant: None,
    }
}

fn provider_error(retryable: bool) -> WireError {
    WireError {
        code: "sandbox.snapshot_failed".into(),
        category: "internal".into(),
        message: "boom".into(),
        retryable,
    }
}

fn recoverable() -> ProviderCallError {
    ProviderCallError::Recoverable {
        status: 503,
        error: provider_error(true),
    }
}

fn terminal() -> ProviderCallError {
    ProviderCallError::Terminal {
        status: 500,
        error: WireError {
            code: "sandbox.lost".into(),
            ..provider_error(false)
        },
    }
}

fn refused() -> ProviderCallError {
    ProviderCallError::Refused {
        status: 409,
        error: WireError {
            code: "sandbox.terminated".into(),
            ..provider_error(false)
        },
    }
}

/// A suspension release under way, as `begin_release` writes it.
fn releasing(d: ReleaseDisposition) -> (ExecutionResourceRecord, SuspensionId, DateTime<Utc>) {
    let sus = SuspensionId::new();
    let t = now();
    let r = begin_release(
        record(ResourceState::Active),
        d,
        ReleasePurpose::Suspend,
        Some((&sus, SuspensionReason::ApprovalRequired)),
        t,
    )
    .unwrap();
    (r, sus, t)
}

#[test]
fn failures_are_classified_by_what_a_retry_can_do() {
    assert_eq!(classify(&recoverable()), FailureClass::Retry);
    assert_eq!(
        classify(&ProviderCallError::Uncertain {
            kind: UncertainKind::Timeout,
            message: "slow".into()
        }),
        FailureClass::Retry
    );
    assert_eq!(
        classify(&ProviderCallError::Unreachable("down".into())),
        FailureClass::Retry
    );
    assert_eq!(
        classify(&ProviderCallError::Config("not registered".into())),
        FailureClass::Retry
    );
    assert_eq!(classify(&terminal()), FailureClass::Final);
    assert_eq!(classify(&refused()), FailureClass::Refused);
    for status in [401, 403, 407] {
        assert_eq!(classify(&unauthorised(status)), FailureClass::Retry);
    }
}

fn unauthorised(status: u16) -> ProviderCallError {
    ProviderCallError::Refused {
        status,
        error: WireError {
            code: format!("provider.http_{status}"),
            ..provider_error(false)
        },
    }
}

#[test]
fn a_release_starts_by_writing_its_key_and_purpose() {
    let (r, sus, t) = releasing(ReleaseDisposition::SnapshotAndTerminate);
    assert_eq!(r.state, ResourceState::ReleaseRequested);
    assert_eq!(
        r.release_idempotency_key.as_deref(),
        Some(
            rules::release_idempotency_key(&r.run_id, 1, Some(&sus), ReleasePurpose::Suspend)
                .as_str()
        )
    );
    assert_eq!(r.release_purpose, Some(ReleasePurpose::Suspend));
    assert_eq!(
        r.disposition,
        Some(ReleaseDisposition::SnapshotAndTerminate)
    );
    assert_eq!(r.release_requested_at, Some(t));
    assert_eq!(r.suspension_id, Some(sus));
    assert_eq!(
        r.suspension_reason,
        Some(SuspensionReason::ApprovalRequired)
    );
    assert!(!r.compute_released);

    let mut blocked = record(ResourceState::ReleaseBlocked);
    blocked.blocking_job_ids = vec![JobId::new()];
    let r = begin_release(
        blocked,
        ReleaseDisposition::Terminate,
        ReleasePurpose::RunEnded,
        None,
        t,
    )
    .unwrap();
    assert_eq!(r.state, ResourceState::ReleaseRequested);
    assert!(r.blocking_job_ids.is_empty());
    assert!(r
        .release_idempotency_key
        .unwrap()
        .ends_with(":none:run-ended"));

    let released = record(ResourceState::Released);
    assert!(begin_release(
        released,
        ReleaseDisposition::Terminate,
        ReleasePurpose::RunEnded,
        None,
        t
    )
    .is_err());
}

#[test]
fn a_release_re_issued_for_an_ended_run_gets_its_own_key_and_keeps_its_start() {
    let (r, sus, t) = releasing(ReleaseDisposition::SnapshotAndTerminate);
    let later = t + chrono::Duration::seconds(9);
    let failed = release_failed(r, &recoverable(), later, 0.0, Cadence::Release).unwrap();
    assert_eq!(failed.state, ResourceState::ReleaseFailed);
    let old_key = failed.release_idempotency_key.clone().unwrap();
    let r = begin_release(
        failed,
        ReleaseDisposition::Terminate,
        ReleasePurpose::RunEnded,
        None,
        later,
    )
    .unwrap();
    assert_eq!(r.state, ResourceState::ReleaseRequested);
    let key = r.release_idempotency_key.clone().unwrap();
    assert_ne!(key, old_key);
    assert!(key.ends_with(&format!(":{sus}:run-ended")), "{key}");
    assert_eq!(
        r.release_requested_at,
        Some(t),
        "compute was asked back at t"
    );
    assert_eq!((r.retry_count, r.next_retry_at), (0, None));
}

#[test]
fn a_consistent_snapshot_receipt_releases_and_keeps_the_checkpoint() {
    let (mut r, _, _) = releasing(ReleaseDisposition::SnapshotAndTerminate);
    r.retry_count = 3;
    r.next_retry_at = Some(now());
    r.error = Some(provider_error(true).into());
    let key = r.release_idempotency_key.clone();
    let t = now() + Duration::seconds(5);
    let done = release_answered(
        r,
        &receipt(ReleaseDisposition::SnapshotAndTerminate, true),
        t,
        0.0,
        Cadence::Release,
    )
    .unwrap();
    assert_eq!(done.state, ResourceState::Released);
    assert!(done.compute_released);
    assert_eq!(done.released_at, Some(t), "our clock, not the provider's");
    assert_eq!(done.sandbox_checkpoint, Some(checkpoint()));
    assert_eq!(done.retry_count, 0);
    assert_eq!(done.next_retry_at, None);
    assert_eq!(done.error, None);
    assert_eq!(done.release_idempotency_key, key);
}

#[test]
fn a_terminate_receipt_keeps_no_checkpoint() {
    let (mut r, _, _) = releasing(ReleaseDisposition::Terminate);
    r.sandbox_checkpoint = Some(checkpoint());
    let done = release_answered(
        r,
        &receipt(ReleaseDisposition::Terminate, true),
        now(),
        0.0,
        Cadence::Release,
    )
    .unwrap();
    assert_eq!(done.state, ResourceState::Released);
    assert_eq!(done.sandbox_checkpoint, None);
}

#[test]
fn a_receipt_that_keeps_compute_is_never_counted_released() {
    let (r, _, _) = releasing(ReleaseDisposition::Terminate);
    let t = now();
    let not_done = release_answered(
        r,
        &receipt(ReleaseDisposition::Terminate, false),
        t,
        0.0,
        Cadence::Release,
    )
    .unwrap();
    assert_eq!(not_done.state, ResourceState::ReleaseFailed);
    assert!(!not_done.compute_released);
    assert_eq!(not_done.released_at, None);
    assert_eq!(not_done.retry_count, 1);
    assert_eq!(not_done.next_retry_at, Some(t + Duration::seconds(1)));
    assert_eq!(
        not_done.error.map(|e| e.code),
        Some("provider.compute_not_released".to_string())
    );

    // The same holds for a detach receipt, were one ever asked for.
    let (r, _, _) = releasing(ReleaseDisposition::Detach);
    let kept = release_answered(
        r,
        &receipt(ReleaseDisposition::Detach, false),
        t,
        0.0,
        Cadence::Release,
    )
    .unwrap();
    assert_eq!(kept.state, ResourceState::ReleaseFailed);
    assert!(!kept.compute_released);
}

#[test]
fn retryable_release_failures_back_off_with_the_same_key() {
    let (r, _, _) = releasing(ReleaseDisposition::SnapshotAndTerminate);
    let key = r.release_idempotency_key.clone();
    let t = now();
    let failures = [
        recoverable(),
        ProviderCallError::Uncertain {
            kind: UncertainKind::InconsistentReceipt,
            message: "no checkpoint".into(),
        },
        ProviderCallError::Unreachable("refused".into()),
        // Not authorised: the snapshot was not even tried, so it is not lost.
        unauthorised(401),
    ];
    let mut r = r;
    for (n, err) in failures.iter().enumerate() {
        r = release_failed(r, err, t, 0.0, Cadence::Release).unwrap();
        assert_eq!(r.state, ResourceState::ReleaseFailed);
        assert_eq!(r.retry_count, n as i64 + 1);
        let delay = Duration::seconds(1 << n);
        assert_eq!(r.next_retry_at, Some(t + delay));
        assert_eq!(r.release_idempotency_key, key);
        assert_eq!(r.error, Some(err.to_provider_error()));
        assert!(!r.checkpoint_lost);
    }
    r.retry_count = 20;
    let capped = release_failed(r.clone(), &recoverable(), t, 0.0, Cadence::Release).unwrap();
    assert_eq!(capped.next_retry_at, Some(t + Duration::seconds(300)));
    let late = release_failed(r.clone(), &recoverable(), t, 1.0, Cadence::Release).unwrap();
    assert_eq!(late.next_retry_at, Some(t + Duration::seconds(330)));
    let early = release_failed(r, &recoverable(), t, -1.0, Cadence::Release).unwrap();
    assert_eq!(early.next_retry_at, Some(t + Duration::seconds(270)));
}

#[test]
fn a_refused_release_is_retried_with_its_key_and_keeps_the_snapshot() {
    let (r, _, requested) = releasing(ReleaseDisposition::SnapshotAndTerminate);
    let key = r.release_idempotency_key.clone();
    let failed = release_failed(r, &refused(), requested, 0.0, Cadence::Release).unwrap();
    assert_eq!(failed.state, ResourceState::ReleaseFailed);
    assert_eq!(
        failed.disposition,
        Some(ReleaseDisposition::SnapshotAndTerminate)
    );
    assert_eq!(failed.release_idempotency_key, key);
    assert!(!failed.checkpoint_lost);
    assert_eq!(failed.retry_count, 1);
    assert_eq!(failed.next_retry_at, Some(requested + Duration::seconds(1)));
    assert_eq!(failed.error, Some(refused().to_provider_error()));
}

#[test]
fn an_abandoned_release_keeps_the_sandbox_active_with_nothing_pending() {
    let (r, _, requested) = releasing(ReleaseDisposition::SnapshotAndTerminate);
    let failed = release_failed(r, &recoverable(), requested, 0.0, Cadence::Release).unwrap();
    let kept = abandon_release(failed.clone()).unwrap();
    assert_eq!(kept.state, ResourceState::Active);
    assert_eq!(kept.generation, failed.generation);
    assert_eq!(kept.sandbox_ref, failed.sandbox_ref);
    assert_eq!(kept.disposition, None);
    assert_eq!(kept.release_idempotency_key, None);
    assert_eq!(kept.release_purpose, None);
    assert_eq!(
        kept.bind_idempotency_key,
        Some(bind_idempotency_key(&kept, BindKind::Attach)),
        "the attach is decided in the same write"
    );
    assert_eq!(kept.retry_count, 0);
    assert_eq!(kept.next_retry_at, None);
    assert!(!kept.compute_released);
    assert!(abandon_release(record(ResourceState::Released)).is_err());
}

#[path = "outcome_bind_tests.rs"]
mod bind;

#[path = "outcome/resume_tests.rs"]
mod resume;

#[path = "outcome/kept_checkpoint_tests.rs"]
mod kept_checkpoint;

#[path = "outcome/forced_tests.rs"]
mod forced;
