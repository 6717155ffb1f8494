//! Binding, blocking and abandoning.

use super::*;
use crate::lifecycle::rules::Cadence;

#[test]
fn binding_writes_a_deterministic_key_first() {
    let mut fresh = record(ResourceState::Provisioning);
    fresh.generation = 0;
    fresh.sandbox_ref = None;
    fresh.due_at = None;
    let intent = begin_bind(fresh.clone(), BindKind::Provision).unwrap();
    assert_eq!(intent.state, ResourceState::Provisioning);
    let key = format!("{}:g1:provision", fresh.run_id);
    assert_eq!(intent.bind_idempotency_key.as_deref(), Some(key.as_str()));
    assert_eq!(
        begin_bind(intent.clone(), BindKind::Provision).unwrap(),
        intent,
        "a retry changes nothing"
    );

    let mut released = record(ResourceState::Released);
    released.disposition = Some(ReleaseDisposition::SnapshotAndTerminate);
    released.sandbox_checkpoint = Some(checkpoint());
    let restore = begin_bind(released.clone(), BindKind::Restore).unwrap();
    assert_eq!(restore.state, ResourceState::RestoreRequested);
    assert_eq!(
        restore.bind_idempotency_key,
        Some(format!("{}:g2:restore", released.run_id))
    );
    assert_eq!(restore.sandbox_checkpoint, Some(checkpoint()));
    let reprovision = begin_bind(released.clone(), BindKind::Provision).unwrap();
    assert_eq!(
        reprovision.bind_idempotency_key,
        Some(format!("{}:g2:provision", released.run_id))
    );
    assert!(begin_bind(record(ResourceState::ReleaseFailed), BindKind::Restore).is_err());
}

#[test]
fn a_ready_sandbox_is_the_next_generation_with_everything_cleared() {
    let t = now();
    let mut r = begin_bind(
        {
            let mut r = record(ResourceState::Released);
            r.disposition = Some(ReleaseDisposition::SnapshotAndTerminate);
            r.sandbox_checkpoint = Some(checkpoint());
            r.compute_released = true;
            r.released_at = Some(t);
            r.release_idempotency_key = Some("k".into());
            r.release_purpose = Some(ReleasePurpose::Suspend);
            r
        },
        BindKind::Restore,
    )
    .unwrap();
    r = bind_failed(
        r,
        BindKind::Restore,
        &recoverable(),
        t,
        0.0,
        Cadence::Release,
    )
    .unwrap()
    .record;
    assert_eq!(r.retry_count, 1);
    let restored = SandboxHandle {
        generation: 5,
        ..handle("sbx_2")
    };
    let done = bind_succeeded(r, BindKind::Restore, &restored).unwrap();
    assert_eq!(done.state, ResourceState::Active);
    assert_eq!(done.generation, 2);
    assert_eq!(done.provider_generation, Some(5));
    assert_eq!(done.sandbox_ref, Some(sandbox_ref("sbx_2")));
    assert_eq!(done.bind_idempotency_key, None);
    assert_eq!(done.retry_count, 0);
    assert_eq!(done.next_retry_at, None);
    assert_eq!(done.error, None);
    assert_eq!(done.sandbox_checkpoint, None);
    assert_eq!(done.disposition, None);
    assert_eq!(done.release_idempotency_key, None);
    assert!(!done.compute_released);

    let mut blocked = record(ResourceState::ReleaseBlocked);
    blocked.disposition = Some(ReleaseDisposition::Detach);
    blocked.blocking_job_ids = vec![JobId::new()];
    let kept = SandboxHandle {
        generation: 3,
        ..handle("sbx_1")
    };
    let attached = bind_succeeded(blocked, BindKind::Attach, &kept).unwrap();
    assert_eq!(attached.state, ResourceState::Active);
    assert_eq!(attached.generation, 2);
    assert_eq!(attached.provider_generation, Some(3));
    assert!(attached.blocking_job_ids.is_empty());
    assert!(bind_succeeded(
        record(ResourceState::Released),
        BindKind::Attach,
        &handle("x")
    )
    .is_err());
}

#[test]
fn retryable_bind_failures_stay_and_back_off() {
    let t = now();
    let r = begin_bind(record(ResourceState::Provisioning), BindKind::Provision).unwrap();
    let key = r.bind_idempotency_key.clone();
    let next = bind_failed(
        r,
        BindKind::Provision,
        &recoverable(),
        t,
        0.0,
        Cadence::Release,
    )
    .unwrap();
    assert_eq!(next.effect, RunEffect::None);
    assert_eq!(next.record.state, ResourceState::Provisioning);
    assert_eq!(next.record.bind_idempotency_key, key);
    assert_eq!(next.record.next_retry_at, Some(t + Duration::seconds(1)));
    let again = bind_failed(
        next.record,
        BindKind::Provision,
        &recoverable(),
        t,
        0.0,
        Cadence::Release,
    )
    .unwrap();
    assert_eq!(again.record.next_retry_at, Some(t + Duration::seconds(2)));

    let blocked = record(ResourceState::ReleaseBlocked);
    let next = bind_failed(
        blocked,
        BindKind::Attach,
        &recoverable(),
        t,
        0.0,
        Cadence::Release,
    )
    .unwrap();
    assert_eq!(next.record.state, ResourceState::ReleaseBlocked);
    assert_eq!(next.record.retry_count, 1);
}

#[test]
fn final_bind_failures_fail_the_run_and_leave_no_compute_behind() {
    let t = now();
    let r = begin_bind(record(ResourceState::Provisioning), BindKind::Provision).unwrap();
    let next = bind_failed(r, BindKind::Provision, &refused(), t, 0.0, Cadence::Release).unwrap();
    assert_eq!(next.record.state, ResourceState::Released);
    assert!(!next.record.compute_released, "nothing was ever released");
    assert_eq!(next.record.bind_idempotency_key, None);
    assert_eq!(next.record.error, Some(refused().to_provider_error()));
    assert!(matches!(
        next.effect,
        RunEffect::Fail { ref code, .. } if code == "sandbox.provision_failed"
    ));

    let mut released = record(ResourceState::Released);
    released.sandbox_checkpoint = Some(checkpoint());
    let r = begin_bind(released, BindKind::Restore).unwrap();
    let next = bind_failed(r, BindKind::Restore, &terminal(), t, 0.0, Cadence::Release).unwrap();
    assert_eq!(next.record.state, ResourceState::Released);
    assert!(matches!(
        next.effect,
        RunEffect::Fail { ref code, .. } if code == "sandbox.restore_failed"
    ));

    let active = record(ResourceState::ReleaseBlocked);
    let next = bind_failed(
        active,
        BindKind::Attach,
        &refused(),
        t,
        0.0,
        Cadence::Release,
    )
    .unwrap();
    assert_eq!(
        next.record.state,
        ResourceState::ReleaseBlocked,
        "the sandbox may still run: it stays due to be terminated"
    );
    assert!(matches!(
        next.effect,
        RunEffect::Fail { ref code, .. } if code == "sandbox.attach_failed"
    ));
}

#[test]
fn a_lost_snapshot_fails_the_run() {
    let mut r = record(ResourceState::Released);
    r.checkpoint_lost = true;
    let next = snapshot_lost(r.clone());
    assert_eq!(next.record.state, ResourceState::Released);
    match next.effect {
        RunEffect::Fail { code, message } => {
            assert_eq!(code, SNAPSHOT_LOST);
            assert!(message.contains("checkpoint"));
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn blocking_records_the_blockers_disposition_and_suspension() {
    let sus = SuspensionId::new();
    let job = JobId::new();
    let child = RunId::new();
    let blockers = Blockers {
        job_ids: vec![job.clone()],
        child_run_ids: vec![child.clone()],
        detach: false,
    };
    let r = block(
        record(ResourceState::Active),
        ReleaseDisposition::SnapshotAndTerminate,
        &blockers,
        Some((&sus, SuspensionReason::ApprovalRequired)),
    )
    .unwrap();
    assert_eq!(r.state, ResourceState::ReleaseBlocked);
    assert_eq!(r.blocking_job_ids, vec![job]);
    assert_eq!(r.blocking_child_run_ids, vec![child]);
    assert_eq!(
        r.disposition,
        Some(ReleaseDisposition::SnapshotAndTerminate)
    );
    assert_eq!(r.suspension_id, Some(sus));
    assert!(!r.compute_released);

    let fewer = block(
        r,
        ReleaseDisposition::SnapshotAndTerminate,
        &Blockers {
            child_run_ids: vec![],
            ..blockers.clone()
        },
        None,
    )
    .unwrap();
    assert_eq!(fewer.state, ResourceState::ReleaseBlocked);
    assert!(fewer.blocking_child_run_ids.is_empty());

    let detach = Blockers {
        detach: true,
        ..Blockers::default()
    };
    let held = block(
        record(ResourceState::Active),
        ReleaseDisposition::Detach,
        &detach,
        None,
    )
    .unwrap();
    assert_eq!(held.state, ResourceState::ReleaseBlocked);
    assert_eq!(held.disposition, Some(ReleaseDisposition::Detach));
    assert!(!held.compute_released);
    assert!(block(
        record(ResourceState::Released),
        ReleaseDisposition::Detach,
        &detach,
        None
    )
    .is_err());
}

#[test]
fn abandoning_is_only_for_records_without_compute() {
    let r = abandon(record(ResourceState::Provisioning)).unwrap();
    assert_eq!(r.state, ResourceState::Released);
    assert!(!r.compute_released);
    assert!(abandon(record(ResourceState::Active)).is_err());
}

#[test]
fn a_handle_for_another_run_is_quarantined_and_ones_own_terminated() {
    let r = record(ResourceState::Provisioning);
    let mut good = handle("sbx_2");
    good.r#ref.owner_run_id = r.run_id.to_string();
    assert_eq!(handle_mismatch(&r, "acme", &good), None);

    let mut foreign = good.clone();
    foreign.r#ref.owner_run_id = "run_someone_else".into();
    foreign.r#ref.policy_hash = format!("sha256:{}", "9".repeat(64));
    let why = handle_mismatch(&r, "acme", &foreign).expect("a mismatch");
    assert!(
        why.contains("owner_run_id") && why.contains("policy_hash"),
        "{why}"
    );
    assert!(!why.contains("spec_hash"), "{why}");
    assert!(handle_mismatch(&r, "other-tenant", &good)
        .unwrap()
        .contains("tenant_id"));

    let mut own = good.clone();
    own.r#ref.policy_hash = format!("sha256:{}", "9".repeat(64));
    let own_why = handle_mismatch(&r, "acme", &own).expect("a mismatch");
    assert!(handle_is_own(&r, "acme", &own));
    let next = bind_mismatched(
        r.clone(),
        "acme",
        BindKind::Provision,
        &own,
        own_why.clone(),
    )
    .unwrap();
    assert_eq!(
        next.record.state,
        ResourceState::Active,
        "its own compute is bound, so it gets terminated"
    );
    assert_eq!(next.record.sandbox_ref, Some(own.r#ref.clone().into()));
    assert_eq!(next.record.error.as_ref().unwrap().code, HANDLE_MISMATCH);
    assert_eq!(
        next.effect,
        RunEffect::Fail {
            code: HANDLE_MISMATCH.into(),
            message: own_why
        }
    );

    assert!(!handle_is_own(&r, "acme", &foreign));
    assert!(!handle_is_own(&r, "other-tenant", &good));
    let next = bind_mismatched(r.clone(), "acme", BindKind::Provision, &foreign, why).unwrap();
    assert_eq!(
        next.record.state,
        ResourceState::Released,
        "another run's compute is never bound"
    );
    assert!(!next.record.compute_released);
    assert_eq!(next.record.sandbox_ref, r.sandbox_ref);
    let error = next.record.error.as_ref().unwrap();
    assert_eq!(error.code, HANDLE_MISMATCH);
    assert!(
        error.message.contains("quarantined") && error.message.contains("run_someone_else"),
        "{}",
        error.message
    );
    assert!(matches!(next.effect, RunEffect::Fail { .. }));

    let mut active = record(ResourceState::Active);
    active.run_id = r.run_id.clone();
    let why = handle_mismatch(&active, "acme", &foreign).expect("a mismatch");
    let next = bind_mismatched(active.clone(), "acme", BindKind::Attach, &foreign, why).unwrap();
    assert_eq!(next.record.state, ResourceState::Active);
    assert_eq!(
        next.record.sandbox_ref, active.sandbox_ref,
        "its own sandbox stays bound, to be terminated with the run"
    );
}
