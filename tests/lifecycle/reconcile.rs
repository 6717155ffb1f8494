//! The reconciler against the real local provider: compute no record owns is terminated,
//! a record that says released while its sandbox runs is reopened, checkpoints are deleted
//! once nothing can restore from them, and one replica at a time does it.

use sagents::lifecycle::reconciler::Reconciler;
use sagents::providers::client::CallOptions;
use sagents::providers::wire::SandboxState;
use sagents::store::Backend;
use serde_json::json;

use super::attention::fail_until_attention;
use super::fixture::{ax, ax_with, ax_with_faults, Ax};
use crate::common::app::{expect_json, until, Options};

crate::on_both_backends!(
    orphans_are_terminated_and_false_releases_reopened,
    checkpoints_outlive_their_run_by_the_grace_only,
    one_replica_at_a_time_reconciles,
    the_service_reconciles_in_the_background,
);

fn reconciler(ax: &Ax, holder: &str) -> Reconciler {
    Reconciler::new(
        ax.app.store().clone(),
        ax.app.state.providers.clone(),
        holder,
    )
}

async fn orphans_are_terminated_and_false_releases_reopened(backend: Backend) {
    let ax = ax_with_faults(backend, "release=recoverable:times=10").await;
    let orphan = ax.provider.provision("made-outside-any-record").await;

    // An operator declares a release done that was not.
    let session = ax.app.create_session().await;
    let (run, claim) = ax.running_isolated(&session).await;
    ax.complete(&claim).await;
    assert_eq!(ax.drain().await, 1);
    assert_eq!(fail_until_attention(&ax, &run).await, 10);
    let res = ax
        .app
        .post(
            &format!("/v1/admin/runs/{run}/execution-resource/attention"),
            &ax.app.admin,
            &json!({"action": "mark_released", "reason": "looked gone"}),
        )
        .await;
    expect_json(res, 200).await;
    assert_eq!(
        ax.provider.sandbox_state(&claim.sandbox_id).await,
        SandboxState::Ready
    );

    let r = reconciler(&ax, "replica-a");
    let report = r.run_once().await.unwrap();
    assert_eq!(
        (report.orphans_terminated, report.records_reopened),
        (1, 1),
        "{report:?}"
    );
    assert_eq!(
        ax.provider.sandbox_state(&orphan.r#ref.sandbox_id).await,
        SandboxState::Terminated
    );
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "release_requested", "{record}");
    assert_eq!(record["release_purpose"], "reconcile");
    assert!(record["release_idempotency_key"]
        .as_str()
        .unwrap()
        .ends_with(":reconcile"));

    assert_eq!(ax.drain().await, 1, "the reopened record is due at once");
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "released", "{record}");
    assert_eq!(record["compute_released"], true);
    assert_eq!(
        ax.provider.sandbox_state(&claim.sandbox_id).await,
        SandboxState::Terminated
    );

    let again = r.run_once().await.unwrap();
    assert_eq!(
        (
            again.orphans_terminated,
            again.records_reopened,
            again.failed
        ),
        (0, 0, 0),
        "a settled system gives the reconciler nothing to do"
    );
    let counters = &ax.app.store().metrics().lifecycle;
    assert_eq!(counters.reconciler_actions("orphan_terminated"), 1);
    assert_eq!(counters.reconciler_actions("record_reopened"), 1);
    assert_eq!(counters.reconciler_passes("ok"), 2);
}

async fn checkpoints_outlive_their_run_by_the_grace_only(backend: Backend) {
    let ax = ax(backend).await;
    // A run that finishes after one snapshot and restore.
    let (session, run, claim, _) = ax.suspended_with_work().await;
    assert_eq!(ax.drain().await, 1);
    ax.approve(&session).await;
    ax.drain_to_active(&run, 2).await;
    let resumed = ax.claim().await;
    assert_eq!(resumed.run_id, claim.run_id);
    ax.resumed(&resumed).await;
    ax.complete(&resumed).await;
    ax.drain().await;
    // A run still suspended: its checkpoint is what it resumes from.
    let (_, waiting, _, _) = ax.suspended_with_work().await;
    assert_eq!(ax.drain().await, 1);
    let kept = ax.record(&waiting).await["sandbox_checkpoint"]["checkpoint_id"].clone();

    let checkpoints = || async {
        let items = ax
            .provider
            .client
            .checkpoints_all(&CallOptions::default())
            .await
            .unwrap();
        let mut ids: Vec<String> = items
            .into_iter()
            .map(|i| i.checkpoint.checkpoint_id)
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(checkpoints().await.len(), 2);
    let r = reconciler(&ax, "replica-a");
    assert_eq!(
        r.run_once().await.unwrap().checkpoints_deleted,
        0,
        "within the grace"
    );

    ax.advance(25 * 3600);
    assert_eq!(r.run_once().await.unwrap().checkpoints_deleted, 1);
    assert_eq!(checkpoints().await, vec![kept.as_str().unwrap().to_owned()]);
    assert_eq!(
        ax.app
            .store()
            .metrics()
            .lifecycle
            .reconciler_actions("checkpoint_deleted"),
        1
    );
    assert_eq!(r.run_once().await.unwrap().checkpoints_deleted, 0);
}

async fn one_replica_at_a_time_reconciles(backend: Backend) {
    let ax = ax(backend).await;
    let a = reconciler(&ax, "replica-a");
    let b = reconciler(&ax, "replica-b");
    let ttl = chrono::Duration::seconds(360);
    assert!(a.tick(ttl).await.unwrap().is_some());
    assert!(b.tick(ttl).await.unwrap().is_none(), "a holds the lease");
    ax.advance(300);
    assert!(a.tick(ttl).await.unwrap().is_some(), "the holder renews it");
    ax.advance(300);
    assert!(b.tick(ttl).await.unwrap().is_none());
    ax.advance(361);
    assert!(
        b.tick(ttl).await.unwrap().is_some(),
        "a lease left to expire is taken over"
    );
    assert!(a.tick(ttl).await.unwrap().is_none());
}

async fn the_service_reconciles_in_the_background(backend: Backend) {
    let opts = Options {
        workers: Some(0),
        reconcile_interval_seconds: Some(1),
        ..Options::default()
    };
    let ax = ax_with(backend, "", opts).await;
    let orphan = ax.provider.provision("made-outside-any-record").await;
    let id = orphan.r#ref.sandbox_id.clone();
    // The counter moves after the provider's answer reaches the reconciler, so wait on it.
    let counted = "sagents_reconciler_actions_total{action=\"orphan_terminated\"} 1";
    until(|| async { ax.prometheus().await.contains(counted) }).await;
    assert_eq!(
        ax.provider.sandbox_state(&id).await,
        SandboxState::Terminated
    );
}
