//! PostgreSQL only: several replicas (each its own store, pools, hub, metrics and
//! coordinator) on one database and one clock.

use std::sync::atomic::Ordering;
use std::time::Duration as StdDuration;

use sagents::domain::interaction::SuspensionReason;
use sagents::domain::resource::ExecutionResourceRecord;
use sagents::domain::resource::ResourceState;
use sagents::domain::sandbox::ReleaseDisposition;
use sagents::lifecycle::coordinator::Processed;
use sagents::providers::client::CallOptions;
use sagents::providers::wire::{ReleaseRequest, ReleaseSpec, RequestContext, SandboxState};
use sagents::store::{Backend, StoreError};

use super::*;
use crate::common::app::until;

const LIMIT: StdDuration = StdDuration::from_secs(20);

fn provisions(replicas: &[&Replica]) -> u64 {
    replicas
        .iter()
        .map(|r| {
            r.store
                .metrics()
                .lifecycle
                .provider_calls("provision", "ok")
        })
        .sum()
}

fn releases(replicas: &[&Replica]) -> u64 {
    replicas
        .iter()
        .map(|r| r.store.metrics().lifecycle.provider_calls("release", "ok"))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_never_act_on_one_run_together() {
    let lx = lx(Backend::Postgres).await;
    let b = lx.replica("replica-b").await;
    let c = lx.replica("replica-c").await;
    let s = lx.session().await;
    let mut runs = Vec::new();
    for _ in 0..12 {
        runs.push(lx.isolated_run(&s).await.id);
    }
    let (na, nb, nc) = tokio::join!(lx.drain(), b.drain(), c.drain());
    assert_eq!(
        na + nb + nc,
        12,
        "each run was worked on by exactly one holder"
    );
    let all = [&lx.main, &b, &c];
    assert_eq!(provisions(&all), 12, "one provision per run, none twice");
    for run in &runs {
        let record = lx.record(run).await;
        assert_eq!(
            (record.state, record.generation),
            (ResourceState::Active, 1)
        );
    }

    let claims = lx
        .store()
        .claim_runs(Some(TENANT), "runtime-1", 12, ttl())
        .await
        .unwrap();
    assert_eq!(claims.len(), 12);
    for claim in &claims {
        lx.suspend(claim, SuspensionReason::ApprovalRequired, 1)
            .await;
    }
    let (na, nb, nc) = tokio::join!(lx.drain(), b.drain(), c.drain());
    assert_eq!(na + nb + nc, 12);
    assert_eq!(releases(&all), 12, "one release per run, none twice");
    for run in &runs {
        let record = lx.record(run).await;
        assert_eq!(record.state, ResourceState::Released);
        let sandbox = record.sandbox_ref.unwrap().sandbox_id;
        assert_eq!(
            lx.provider.sandbox_state(&sandbox).await,
            SandboxState::Terminated
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_dies_mid_release_is_taken_over_and_nothing_is_done_twice() {
    let lx = lx_with_faults(Backend::Postgres, "release=hold:times=1").await;
    let a = lx.replica("replica-a2").await;
    let b = lx.replica("replica-b").await;
    let s = lx.session().await;
    let run = lx.isolated_run(&s).await.id;
    lx.drain().await;
    let claim = lx.claim_one().await;
    lx.suspend(&claim, SuspensionReason::ApprovalRequired, 1)
        .await;

    let mut work = a
        .store
        .claim_lifecycle_work("replica-a2:w1", 1, ttl())
        .await
        .unwrap();
    assert_eq!(work.len(), 1);
    let coordinator = a.coordinator.clone();
    let dying = tokio::spawn(async move { coordinator.process(work.remove(0)).await });
    // The intent is written before the call; the provider then holds the request.
    until(|| async { lx.record(&run).await.state == ResourceState::ReleaseRequested }).await;
    let key = lx.record(&run).await.release_idempotency_key.unwrap();
    // The replica loses its database while the provider works: it can record nothing, not
    // even hand its lease back.
    a.store.close().await;
    lx.provider.open_held_calls();
    let ended = tokio::time::timeout(LIMIT, dying).await.unwrap().unwrap();
    assert!(
        matches!(ended, Err(ref e) if e.to_string().contains("database")),
        "{ended:?}"
    );
    let sandbox = claim.sandbox.as_ref().unwrap().r#ref.sandbox_id.clone();
    assert_eq!(
        lx.provider.sandbox_state(&sandbox).await,
        SandboxState::Terminated,
        "the provider did release it"
    );
    assert_eq!(lx.record(&run).await.state, ResourceState::ReleaseRequested);

    assert_eq!(
        b.drain().await,
        0,
        "the dead replica's lease still holds the run"
    );
    lx.advance(TTL_SECONDS as i64 + 1);
    assert_eq!(b.drain().await, 1);
    assert_eq!(b.store.metrics().lease_takeovers.load(Ordering::Relaxed), 1);
    let record = lx.record(&run).await;
    assert_eq!(record.state, ResourceState::Released);
    assert_eq!(
        record.release_idempotency_key.as_deref(),
        Some(key.as_str())
    );
    assert!(!record.checkpoint_lost);
    let checkpoint = record.sandbox_checkpoint.clone().unwrap();

    // Asking again with the key gives the very same receipt: one snapshot, taken once.
    let replay = lx
        .provider
        .client
        .release(
            &ReleaseRequest {
                request: ReleaseSpec {
                    r#ref: record.sandbox_ref.clone().unwrap().into(),
                    disposition: ReleaseDisposition::SnapshotAndTerminate.into(),
                    reason: "approval_required".into(),
                    expected_revision: None,
                    idempotency_key: key,
                },
                context: RequestContext::default(),
            },
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert!(replay.duplicate);
    assert_eq!(
        replay.checkpoint.unwrap().checkpoint_id,
        checkpoint.checkpoint_id
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_holder_cannot_write_and_is_counted() {
    let lx = lx(Backend::Postgres).await;
    let b = lx.replica("replica-b").await;
    let s = lx.session().await;
    let run = lx.isolated_run(&s).await.id;
    let before = lx.record(&run).await;

    let mut stale = lx
        .store()
        .claim_lifecycle_work("replica-a:w1", 1, ttl())
        .await
        .unwrap();
    lx.advance(TTL_SECONDS as i64 + 1);
    let mut fresh = b
        .store
        .claim_lifecycle_work("replica-b:w1", 1, ttl())
        .await
        .unwrap();
    assert_eq!(fresh.len(), 1, "an expired lease is taken over");
    let stale = stale.remove(0);
    assert!(stale.lease.fencing_token < fresh[0].lease.fencing_token);

    let outcome = lx.main.coordinator.process(stale.clone()).await.unwrap();
    assert_eq!(outcome, Processed::Superseded);
    let metrics = lx.store().metrics();
    assert_eq!(metrics.fenced_rejections.load(Ordering::Relaxed), 1);
    assert_eq!(
        metrics.lifecycle.provider_calls("provision", "ok"),
        0,
        "the stale holder stopped before calling the provider"
    );
    let deferred = ExecutionResourceRecord {
        due_at: Some(fresh[0].lease.expires_at),
        ..before.clone()
    };
    assert_eq!(
        lx.record(&run).await,
        deferred,
        "nothing was written (the fresh claim deferred the record to its lease's end)"
    );
    let direct = lx
        .store()
        .save_resource(
            &run,
            stale.lease.fencing_token,
            &before,
            sagents::domain::resource::RunEffect::None,
        )
        .await;
    assert!(matches!(direct, Err(StoreError::LeaseLost)));
    assert_eq!(metrics.fenced_rejections.load(Ordering::Relaxed), 2);

    assert_eq!(
        b.coordinator.process(fresh.remove(0)).await.unwrap(),
        Processed::Settled
    );
    assert_eq!(lx.record(&run).await.state, ResourceState::Active);
}
