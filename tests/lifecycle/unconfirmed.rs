//! A terminate the provider does not confirm is settled by inspecting the sandbox: terminated
//! there, it is released with that evidence; the claim is never made on a receipt alone.

use sagents::store::Backend;

use super::assert_gone;
use super::fixture::ax_with_faults;

crate::on_both_backends!(
    an_unconfirmed_terminate_is_released_on_the_evidence_of_an_inspect,
    an_unconfirmed_snapshot_keeps_its_checkpoint_and_resumes_from_it,
);

async fn an_unconfirmed_terminate_is_released_on_the_evidence_of_an_inspect(backend: Backend) {
    // The provider terminates, then answers `compute_released: false`.
    let ax = ax_with_faults(backend, "release=unconfirmed").await;
    let session = ax.app.create_session().await;
    let (run, claim) = ax.running_isolated(&session).await;
    let pid = ax.background(&claim).await;
    ax.complete(&claim).await;
    assert_eq!(ax.drain().await, 1);

    let record = ax.record(&run).await;
    assert_eq!(record["state"], "released", "{record}");
    assert_eq!(record["disposition"], "terminate");
    assert_eq!(
        record["compute_released"], false,
        "only a receipt says compute was released"
    );
    assert_eq!(
        record["error"]["code"], "release.confirmed_by_inspect",
        "{record}"
    );
    assert!(record["error"]["message"]
        .as_str()
        .unwrap()
        .contains("inspect reports"));
    assert_eq!(ax.releases("terminate", "released_on_inspect"), 1);
    assert_eq!(ax.releases("terminate", "released"), 0);
    assert_eq!(
        ax.provider.sandbox_state(&claim.sandbox_id).await.as_str(),
        "terminated"
    );
    assert_gone(pid, "terminated").await;
}

async fn an_unconfirmed_snapshot_keeps_its_checkpoint_and_resumes_from_it(backend: Backend) {
    // The provider snapshots and terminates, then answers `compute_released: false` (and
    // replays that receipt for the same key), naming the checkpoint it took.
    let ax = ax_with_faults(backend, "release=unconfirmed:times=1").await;
    let (session, run, claim, pid) = ax.suspended_with_work().await;
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "released", "{record}");
    assert_eq!(record["compute_released"], false, "only a receipt says so");
    assert_eq!(record["error"]["code"], "release.confirmed_by_inspect");
    assert_eq!(record["checkpoint_lost"], false);
    assert!(
        record["sandbox_checkpoint"]["checkpoint_id"].is_string(),
        "{record}"
    );
    assert_gone(pid, "snapshotted and terminated").await;

    ax.approve(&session).await;
    let record = ax.drain_to_active(&run, claim.generation + 1).await;
    assert_ne!(
        record["sandbox_ref"]["sandbox_id"],
        claim.sandbox_id.as_str()
    );
    let resumed = ax.claim().await;
    assert_eq!(
        ax.sh(&resumed, "cat state.txt").await,
        "v1",
        "restored from the snapshot"
    );
}
