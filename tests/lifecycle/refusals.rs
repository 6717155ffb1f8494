//! A provider that refuses a release (a 4xx request problem) is retried with backoff under
//! the same key: nothing is known to be wrong with the sandbox, so its snapshot is kept.

use sagents::store::Backend;

use super::fixture::ax_with_faults;
use super::{assert_gone, running};

crate::on_both_backends!(a_refused_release_is_retried_and_never_costs_the_snapshot);

async fn a_refused_release_is_retried_and_never_costs_the_snapshot(backend: Backend) {
    let ax = ax_with_faults(backend, "release=refused:times=1").await;
    let (session, run, _, pid) = ax.suspended_with_work().await;
    let user_view = ax.snapshot_bytes(&session).await;

    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "release_failed", "{record}");
    assert_eq!(record["disposition"], "snapshot_and_terminate");
    assert_eq!(record["checkpoint_lost"], false);
    assert_eq!(record["release_purpose"], "suspend");
    assert_eq!(record["error"]["code"], "fault.injected");
    assert_eq!(record["retry_count"], 1);
    let key = record["release_idempotency_key"].clone();
    assert!(running(pid), "a refusal did nothing to the sandbox");
    assert_eq!(ax.releases("snapshot_and_terminate", "refused"), 1);
    let counters = &ax.app.store().metrics().lifecycle;
    assert_eq!(counters.release_failures("refused"), 1);
    assert_eq!(
        counters.release_failures("final"),
        0,
        "never taken for a broken sandbox"
    );
    let text = ax.app.store().metrics().render_prometheus();
    assert!(
        text.contains("sagents_lifecycle_release_failures_total{class=\"refused\"} 1"),
        "{text}"
    );
    assert_eq!(ax.snapshot_bytes(&session).await, user_view);

    ax.advance(2);
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "released", "{record}");
    assert_eq!(
        record["release_idempotency_key"], key,
        "the same release, retried"
    );
    assert!(record["sandbox_checkpoint"].is_object(), "{record}");
    assert_gone(pid, "released").await;
    ax.approve(&session).await;
    ax.drain().await;
    let resumed = ax.claim().await;
    assert_eq!(ax.sh(&resumed, "cat state.txt").await, "v1");
}
