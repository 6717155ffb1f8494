use std::sync::atomic::Ordering;

use chrono::Duration;
use sagents::domain::interaction::{SuspensionReason, SuspensionStatus};
use sagents::domain::resource::ExecutionResourceRecord;
use sagents::domain::resource::ReleasePurpose;
use sagents::domain::resource::ResourceState;
use sagents::domain::resource::RunEffect;
use sagents::domain::run::{RunState, RunStatus};
use sagents::domain::sandbox::ReleaseDisposition;
use sagents::domain::sandbox::{CheckpointRef, ProviderError};
use sagents::store::{Backend, StoreError};
use serde_json::json;

use super::{
    activate, due_work, register, release, sandbox_run, save_and_release, suspended_sandbox,
    work_for,
};
use crate::on_both_backends;
use crate::store::{fx, ttl, TTL};

on_both_backends!(
    saves_are_fenced_and_compare_and_set,
    a_fail_effect_fails_the_run_visibly,
    a_released_child_wakes_its_blocked_ancestors,
    compute_changes_never_touch_the_snapshot,
    a_last_save_hands_the_lease_back_only_when_it_lands,
);

fn provider_error(code: &str, retryable: bool) -> ProviderError {
    ProviderError {
        code: code.into(),
        category: "provider".into(),
        message: format!("{code} happened"),
        retryable,
    }
}

async fn a_last_save_hands_the_lease_back_only_when_it_lands(backend: Backend) {
    let f = fx(backend).await;
    register(&f).await;
    let s = f.session("acme").await;
    let run = sandbox_run(&f, &s, None).await;
    let work = work_for(&f, &run.id).await;
    let (lease_id, token) = (&work.lease.lease_id, work.lease.fencing_token);
    let mut next = work.record.clone();
    activate(&mut next);
    let held = || f.store.heartbeat(None, lease_id, token, ttl());

    let mut stale = next.clone();
    stale.version += 1;
    let refused = f
        .store
        .save_resource_and_release_lease(&run.id, token, &stale)
        .await;
    assert!(matches!(refused, Err(StoreError::VersionConflict { .. })));
    let refused = f
        .store
        .save_resource_and_release_lease(&run.id, token + 1000, &next)
        .await;
    assert!(matches!(refused, Err(StoreError::LeaseLost)));
    held().await.expect("a refused save keeps the lease");

    let work_rx = f.store.hub().subscribe_work();
    let saved = f
        .store
        .save_resource_and_release_lease(&run.id, token, &next)
        .await
        .unwrap();
    assert_eq!(saved.state, ResourceState::Active);
    assert_eq!(saved.due_at, None, "the saved due time stands");
    assert_eq!(f.store.get_resource(&run.id).await.unwrap(), saved);
    assert!(work_rx.has_changed().unwrap());
    assert!(matches!(held().await, Err(StoreError::LeaseLost)));
    let mut again = saved.clone();
    again.retry_count = 1;
    assert!(matches!(
        f.store
            .save_resource(&run.id, token, &again, RunEffect::None)
            .await,
        Err(StoreError::LeaseLost)
    ));
    assert!(due_work(&f).await.is_empty(), "nothing is due");
}

async fn saves_are_fenced_and_compare_and_set(backend: Backend) {
    let f = fx(backend).await;
    register(&f).await;
    let s = f.session("acme").await;
    let run = sandbox_run(&f, &s, None).await;
    let other = sandbox_run(&f, &s, None).await;
    let mut work = due_work(&f).await;
    assert_eq!(work.len(), 2);
    let work = work.remove(0);
    assert_eq!(work.run.id, run.id);
    let token = work.lease.fencing_token;
    let stored = f.store.get_resource(&run.id).await.unwrap();
    let mut next = work.record.clone();
    activate(&mut next);
    let save = |record: ExecutionResourceRecord, token: i64| {
        let store = f.store.clone();
        let run_id = run.id.clone();
        async move {
            store
                .save_resource(&run_id, token, &record, RunEffect::None)
                .await
        }
    };

    let rejected = f.store.metrics().fenced_rejections.load(Ordering::Relaxed);
    assert!(matches!(
        save(next.clone(), token + 1000).await,
        Err(StoreError::LeaseLost)
    ));
    assert_eq!(
        f.store.metrics().fenced_rejections.load(Ordering::Relaxed),
        rejected + 1
    );
    let mut stale = next.clone();
    stale.version += 1;
    match save(stale, token).await {
        Err(StoreError::VersionConflict { current, expected }) => assert_ne!(current, expected),
        other => panic!("expected a version conflict, got {other:?}"),
    }
    let mut foreign = next.clone();
    foreign.run_id = other.id.clone();
    match save(foreign, token).await {
        Err(StoreError::Invalid(e)) => assert_eq!(e.field, "run_id"),
        other => panic!("expected Invalid, got {other:?}"),
    }
    assert_eq!(f.store.get_resource(&run.id).await.unwrap(), stored);

    f.advance(1);
    let work_rx = f.store.hub().subscribe_work();
    let lifecycle = f.store.hub().subscribe_lifecycle_work();
    let saved = save(next.clone(), token).await.unwrap();
    assert!(work_rx.has_changed().unwrap(), "claimable by runtimes now");
    assert!(
        !lifecycle.has_changed().unwrap(),
        "an active record that is not due is no work for the lifecycle pool"
    );
    assert_eq!(saved.version, stored.version + 1);
    assert_eq!(saved.updated_at, f.store.now());
    assert_eq!(saved.state, ResourceState::Active);
    assert_eq!(saved.generation, 1);
    assert_eq!(saved.provider_generation, Some(7));
    assert_eq!(saved.due_at, None);
    assert_eq!(
        saved,
        ExecutionResourceRecord {
            version: saved.version,
            updated_at: saved.updated_at,
            ..next.clone()
        }
    );
    assert_eq!(f.store.get_resource(&run.id).await.unwrap(), saved);
    assert!(
        matches!(
            save(next, token).await,
            Err(StoreError::VersionConflict { .. })
        ),
        "the version read before the write is stale now"
    );

    f.advance(TTL);
    let mut later = saved.clone();
    later.retry_count = 3;
    assert!(matches!(
        save(later, token).await,
        Err(StoreError::LeaseLost)
    ));
    assert_eq!(f.store.get_resource(&run.id).await.unwrap(), saved);
    assert_eq!(
        f.store.metrics().fenced_rejections.load(Ordering::Relaxed),
        rejected + 2
    );
}

async fn a_fail_effect_fails_the_run_visibly(backend: Backend) {
    let f = fx(backend).await;
    register(&f).await;
    let s = f.session("acme").await;
    let (run, _) = suspended_sandbox(&f, &s, true).await;
    let before = f.snapshot(&s).await;
    assert_eq!(before.pending_interactions.len(), 1);

    let work = work_for(&f, &run.id).await;
    assert_eq!(work.run.state, RunState::Suspended);
    let suspension = work.suspension.clone().expect("the latest suspension");
    assert_eq!(suspension.status, SuspensionStatus::Pending);
    assert_eq!(suspension.reason, SuspensionReason::ApprovalRequired);
    let mut lost = work.record.clone();
    release(&mut lost, f.store.now());
    lost.checkpoint_lost = true;
    lost.error = Some(provider_error("sandbox.broken", false));
    f.advance(1);
    let effect = RunEffect::Fail {
        code: "sandbox.snapshot_lost".into(),
        message: "the sandbox checkpoint is lost".into(),
    };
    let saved = f
        .store
        .save_resource(&run.id, work.lease.fencing_token, &lost, effect.clone())
        .await
        .unwrap();

    let failed = f.store.get_run(None, &run.id).await.unwrap();
    assert_eq!(failed.state, RunState::Failed);
    assert_eq!(
        failed.error,
        Some(json!({
            "code": "sandbox.snapshot_lost",
            "message": "the sandbox checkpoint is lost",
        }))
    );
    let after = f.snapshot(&s).await;
    assert_eq!(after.session.revision, before.session.revision + 1);
    assert_eq!(after.runs[0].status, RunStatus::Failed);
    assert!(after.pending_interactions.is_empty());
    assert_eq!(saved.state, ResourceState::Released);
    assert_eq!(
        saved.due_at,
        Some(f.store.now()),
        "the ended run is looked at again"
    );
    assert_eq!(saved.version, work.record.version + 2);
    assert_eq!(f.store.get_resource(&run.id).await.unwrap(), saved);
    assert!(matches!(
        f.store
            .heartbeat(None, &work.lease.lease_id, work.lease.fencing_token, ttl())
            .await,
        Err(StoreError::LeaseLost)
    ));
    let types: Vec<_> = f
        .store
        .list_events(None, &s.id, 0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.r#type, e.data))
        .collect();
    assert!(
        types.iter().all(|(t, _)| !t.starts_with("lifecycle.")),
        "the session log that frontends read holds no resource state: {types:?}"
    );
    let history = f.store.list_resource_events(&run.id, 0, 100).await.unwrap();
    let released = history
        .iter()
        .find(|e| e.r#type == "lifecycle.released")
        .expect("a lifecycle.released entry in the resource history");
    assert_eq!(
        released.sequence,
        work.record.version + 1,
        "the version it wrote"
    );
    assert_eq!(released.data["error_code"], json!("sandbox.broken"));
    assert_eq!(released.data["generation"], json!(1));
    assert_eq!(released.data["provider_id"], json!("local"));
    for kind in [
        "run.failed",
        "interaction.cancelled",
        "suspension.cancelled",
    ] {
        assert!(types.iter().any(|(t, _)| t == kind), "{kind} is logged");
    }

    // Failing a run that has already ended changes nothing visible.
    let again = work_for(&f, &run.id).await;
    assert_eq!(again.run.state, RunState::Failed);
    assert_eq!(
        again.suspension.map(|s| s.status),
        Some(SuspensionStatus::Cancelled)
    );
    let mut idle = again.record.clone();
    idle.due_at = None;
    let saved = f
        .store
        .save_resource(&run.id, again.lease.fencing_token, &idle, effect)
        .await
        .unwrap();
    assert_eq!(saved.due_at, None);
    assert_eq!(f.snapshot(&s).await, after);
}

async fn a_released_child_wakes_its_blocked_ancestors(backend: Backend) {
    let f = fx(backend).await;
    register(&f).await;
    let s = f.session("acme").await;
    let grand = sandbox_run(&f, &s, None).await;
    let parent = sandbox_run(&f, &s, Some(grand.id.clone())).await;
    let child = sandbox_run(&f, &s, Some(parent.id.clone())).await;
    let unrelated = sandbox_run(&f, &s, None).await;
    let work = due_work(&f).await;
    let of = |id| work.iter().find(|w| &w.run.id == id).expect("leased");
    assert_eq!(
        of(&grand.id).descendants,
        vec![
            (parent.id.clone(), ResourceState::Provisioning),
            (child.id.clone(), ResourceState::Provisioning)
        ]
    );
    assert_eq!(
        of(&parent.id).descendants,
        vec![(child.id.clone(), ResourceState::Provisioning)]
    );
    assert!(of(&child.id).descendants.is_empty());

    let mut blocked = Vec::new();
    for (id, children) in [
        (&grand.id, vec![parent.id.clone(), child.id.clone()]),
        (&parent.id, vec![child.id.clone()]),
        (&unrelated.id, vec![]),
    ] {
        let saved = save_and_release(&f, of(id), |r| {
            activate(r);
            r.state = ResourceState::ReleaseBlocked;
            r.blocking_child_run_ids = children;
        })
        .await;
        blocked.push(saved);
    }

    let c = of(&child.id);
    let mut requested = c.record.clone();
    activate(&mut requested);
    requested.state = ResourceState::ReleaseRequested;
    requested.release_requested_at = Some(f.store.now());
    let requested = f
        .store
        .save_resource(
            &child.id,
            c.lease.fencing_token,
            &requested,
            RunEffect::None,
        )
        .await
        .unwrap();
    for b in &blocked {
        assert_eq!(&f.store.get_resource(&b.run_id).await.unwrap(), b);
    }

    f.advance(2);
    let mut released = requested.clone();
    release(&mut released, f.store.now());
    f.store
        .save_resource(&child.id, c.lease.fencing_token, &released, RunEffect::None)
        .await
        .unwrap();
    f.store.release_lease(&child.id, &c.lease).await.unwrap();
    for b in &blocked[..2] {
        let now_due = f.store.get_resource(&b.run_id).await.unwrap();
        assert_eq!(now_due.due_at, Some(f.store.now()), "{}", b.run_id);
        assert_eq!(now_due.version, b.version + 1);
        assert_eq!(now_due.state, ResourceState::ReleaseBlocked);
    }
    assert_eq!(
        &f.store.get_resource(&unrelated.id).await.unwrap(),
        &blocked[2]
    );

    let again = due_work(&f).await;
    let ids: Vec<_> = again.iter().map(|w| w.run.id.clone()).collect();
    assert_eq!(ids, vec![grand.id.clone(), parent.id.clone()]);
    assert_eq!(
        again[0].descendants,
        vec![
            (parent.id.clone(), ResourceState::ReleaseBlocked),
            (child.id.clone(), ResourceState::Released)
        ]
    );
}

/// Provisioning, binding, blocking, releasing, failing, retrying and restoring compute while
/// the run waits for a human: the snapshot's bytes and revision never move.
async fn compute_changes_never_touch_the_snapshot(backend: Backend) {
    let f = fx(backend).await;
    register(&f).await;
    let s = f.session("acme").await;
    let (run, _) = suspended_sandbox(&f, &s, true).await;
    let bytes = serde_json::to_vec(&f.snapshot(&s).await).unwrap();
    let revision = f.store.session_revision(None, &s.id).await.unwrap();
    let run_before = f.store.get_run(None, &run.id).await.unwrap();
    let unchanged = || async {
        assert_eq!(serde_json::to_vec(&f.snapshot(&s).await).unwrap(), bytes);
        assert_eq!(
            f.store.session_revision(None, &s.id).await.unwrap(),
            revision
        );
        assert_eq!(f.store.get_run(None, &run.id).await.unwrap(), run_before);
    };

    let mut work = work_for(&f, &run.id).await;
    let suspension = work.suspension.clone().expect("suspended");
    let mut record = work.record.clone();
    let mut states = Vec::new();
    for step in 0..8 {
        f.advance(1);
        let now = f.store.now();
        let r = &mut record;
        match step {
            0 => {
                r.state = ResourceState::Provisioning;
                r.bind_idempotency_key = Some("bind-2".into());
                r.due_at = Some(now);
            }
            1 => activate(r),
            2 => {
                r.state = ResourceState::ReleaseBlocked;
                r.disposition = Some(ReleaseDisposition::SnapshotAndTerminate);
                r.suspension_id = Some(suspension.id.clone());
                r.suspension_reason = Some(suspension.reason);
            }
            3 => {
                r.state = ResourceState::ReleaseRequested;
                r.release_purpose = Some(ReleasePurpose::Suspend);
                r.release_idempotency_key = Some(format!("{}:g2:release", run.id));
                r.release_requested_at = Some(now);
                r.due_at = Some(now);
            }
            4 => {
                r.state = ResourceState::ReleaseFailed;
                r.retry_count = 1;
                r.next_retry_at = Some(now + Duration::seconds(1));
                r.due_at = r.next_retry_at;
                r.error = Some(provider_error("provider.unavailable", true));
            }
            5 => {
                release(r, now);
                r.release_requested_at = Some(now - Duration::seconds(2));
                r.retry_count = 0;
                r.next_retry_at = None;
                r.error = None;
                r.sandbox_checkpoint = Some(CheckpointRef {
                    checkpoint_id: "ckp-1".into(),
                    provider_id: "local".into(),
                    sandbox_id: format!("sbx-{}", run.id),
                    generation: 2,
                    size_bytes: 4096,
                    digest: None,
                    created_at: now,
                });
            }
            6 => {
                r.state = ResourceState::RestoreRequested;
                r.bind_idempotency_key = Some("restore-1".into());
                r.due_at = Some(now);
            }
            _ => activate(r),
        }
        if step == 4 {
            // Hand the lease back and take it again, as a retry after a restart would.
            f.store.release_lease(&run.id, &work.lease).await.unwrap();
            unchanged().await;
            work = work_for(&f, &run.id).await;
            record.version = work.record.version;
        }
        record = f
            .store
            .save_resource(&run.id, work.lease.fencing_token, &record, RunEffect::None)
            .await
            .unwrap();
        states.push(record.state);
        f.store
            .heartbeat(None, &work.lease.lease_id, work.lease.fencing_token, ttl())
            .await
            .unwrap();
        f.store.lifecycle_metrics().await.unwrap();
        f.store.next_lifecycle_due().await.unwrap();
        unchanged().await;
    }
    f.store.release_lease(&run.id, &work.lease).await.unwrap();
    unchanged().await;
    assert_eq!(record.generation, 3);

    let session_log = f.store.list_events(None, &s.id, 0, 1000).await.unwrap();
    assert!(session_log
        .iter()
        .all(|e| !e.r#type.starts_with("lifecycle.")));
    let history = f
        .store
        .list_resource_events(&run.id, 0, 1000)
        .await
        .unwrap();
    let sequences: Vec<i64> = history.iter().map(|e| e.sequence).collect();
    assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");
    let logged: Vec<_> = history
        .into_iter()
        .filter_map(|e| e.r#type.strip_prefix("lifecycle.").map(str::to_owned))
        .collect();
    let expected: Vec<_> = std::iter::once(ResourceState::Active)
        .chain(states)
        .map(|s| s.to_string())
        .collect();
    assert_eq!(logged, expected, "one lifecycle event per state change");
}
