//! A human's reply never waits on a failing release: a definite failure (the provider
//! answered, so the sandbox runs as before) is dropped and the sandbox attached at once; a
//! lost answer is settled at once by retrying the release under its key. The manual clock
//! never moves after the reply, so any wait on the backoff would fail these tests.

use sagents::store::Backend;

use sagents::lifecycle::coordinator::Processed;

use super::fixture::ax_with_faults;
use super::{assert_gone, running};
use crate::common::app::until;

crate::on_both_backends!(
    a_reply_attaches_at_once_while_every_snapshot_fails,
    a_reply_settles_a_lost_release_answer_at_once,
    a_reply_never_attaches_to_a_sandbox_an_earlier_attempt_released,
    a_failing_restore_is_retried_on_the_resume_cadence,
    a_reply_during_the_release_call_keeps_its_answer,
    a_reply_over_a_forced_terminate_fails_at_once_with_the_snapshot_lost,
);

async fn a_reply_attaches_at_once_while_every_snapshot_fails(backend: Backend) {
    // Each failed snapshot brings the sandbox back and answers a recoverable error.
    let ax = ax_with_faults(backend, "snapshot=fail").await;
    let (session, run, claim, pid) = ax.suspended_with_work().await;
    for (attempt, wait) in [(1, 1), (2, 2), (3, 4)] {
        assert_eq!(ax.drain().await, 1);
        let record = ax.record(&run).await;
        assert_eq!(record["state"], "release_failed", "{record}");
        assert_eq!(record["retry_count"], attempt);
        if attempt < 3 {
            // Past the backoff and its jitter.
            ax.advance(wait + 1);
        }
    }
    assert!(running(pid));

    ax.approve(&session).await;
    assert!(ax.drain().await >= 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "active", "{record}");
    assert_eq!(record["generation"], claim.generation + 1, "attached");
    assert_eq!(record["release_idempotency_key"], serde_json::Value::Null);
    assert_eq!(record["retry_count"], 0);
    let resumed = ax.claim().await;
    assert_eq!(resumed.kind, "resume");
    assert_eq!(
        resumed.sandbox_id, claim.sandbox_id,
        "the same sandbox, kept"
    );
    assert_eq!(ax.sh(&resumed, "cat state.txt").await, "v1");
    assert!(running(pid), "never released");
    assert_eq!(ax.releases("snapshot_and_terminate", "abandoned"), 1);
}

async fn a_reply_settles_a_lost_release_answer_at_once(backend: Backend) {
    // The provider takes the snapshot and terminates, then the answer is lost.
    let ax = ax_with_faults(backend, "release=drop:times=1").await;
    let (session, run, claim, pid) = ax.suspended_with_work().await;
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "release_failed", "{record}");
    assert_eq!(record["error"]["category"], "uncertain");
    let key = record["release_idempotency_key"].clone();

    ax.approve(&session).await;
    assert!(ax.drain().await >= 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "active", "{record}");
    assert_eq!(record["generation"], claim.generation + 1, "restored");
    let released = ax.releases("snapshot_and_terminate", "released");
    assert_eq!(released, 1, "the retry under {key} was answered");
    let counters = &ax.app.store().metrics().lifecycle;
    assert_eq!(counters.release_failures("uncertain"), 1);
    assert_eq!(
        counters.release_duplicates("snapshot_and_terminate"),
        1,
        "the provider had done it: the retry got the same outcome"
    );
    assert_gone(pid, "the lost release had terminated it").await;
    let resumed = ax.claim().await;
    assert_eq!(resumed.kind, "resume");
    assert_eq!(
        ax.sh(&resumed, "cat state.txt").await,
        "v1",
        "restored from the snapshot"
    );
}

async fn a_reply_never_attaches_to_a_sandbox_an_earlier_attempt_released(backend: Backend) {
    // The first attempt snapshots and terminates but its answer is lost; the second is
    // refused with a recoverable error before the provider looks at its key.
    let ax = ax_with_faults(backend, "release=drop:times=1;release=recoverable:times=2").await;
    let (session, run, claim, pid) = ax.suspended_with_work().await;
    assert_eq!(ax.drain().await, 1);
    assert_eq!(ax.record(&run).await["error"]["category"], "uncertain");
    ax.advance(2);
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "release_failed", "{record}");
    assert_ne!(
        record["error"]["category"], "uncertain",
        "the last error is a definite one"
    );
    assert_gone(pid, "the first attempt had terminated it").await;

    ax.approve(&session).await;
    assert!(ax.drain().await >= 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "active", "{record}");
    assert_eq!(record["generation"], claim.generation + 1);
    assert_ne!(
        record["sandbox_ref"]["sandbox_id"],
        claim.sandbox_id.as_str(),
        "restored, not attached to the terminated sandbox"
    );
    assert_eq!(ax.releases("snapshot_and_terminate", "abandoned"), 0);
    let resumed = ax.claim().await;
    assert_eq!(ax.sh(&resumed, "cat state.txt").await, "v1");
}

async fn a_failing_restore_is_retried_on_the_resume_cadence(backend: Backend) {
    let ax = ax_with_faults(backend, "restore=recoverable:times=6").await;
    let (session, run, _claim, _pid) = ax.suspended_with_work().await;
    assert_eq!(ax.drain().await, 1);
    ax.approve(&session).await;
    let mut waits = vec![];
    for attempt in 1..=6 {
        assert_eq!(ax.drain().await, 1, "restore attempt {attempt}");
        let record = ax.record(&run).await;
        assert_eq!(record["state"], "restore_requested", "{record}");
        assert_eq!(record["retry_count"], attempt);
        let now = ax.app.store().now();
        let at: chrono::DateTime<chrono::Utc> =
            serde_json::from_value(record["next_retry_at"].clone()).unwrap();
        let wait = at - now;
        assert!(
            wait <= chrono::Duration::seconds(5),
            "attempt {attempt} waits {} ms",
            wait.num_milliseconds()
        );
        waits.push(wait.num_milliseconds());
        ax.app.advance(chrono::Duration::milliseconds(1) + wait);
    }
    assert!(
        waits[0] <= 300 && waits[5] >= 3000,
        "the waits double from a quarter second toward the 5 s cap: {waits:?}"
    );
    assert_eq!(ax.drain().await, 1);
    assert_eq!(ax.record(&run).await["state"], "active");
}

async fn a_reply_during_the_release_call_keeps_its_answer(backend: Backend) {
    // The reply bumps the record while the provider is still answering; the answer stands.
    let ax = ax_with_faults(backend, "release=hold:times=1").await;
    let (session, run, _claim, pid) = ax.suspended_with_work().await;
    let store = ax.driver.store.clone();
    let mut work = store
        .claim_lifecycle_work("driver:w0", 1, chrono::Duration::seconds(30))
        .await
        .unwrap();
    assert_eq!(work.len(), 1);
    let work = work.remove(0);
    let (processed, _) = tokio::join!(ax.driver.coordinator.process(work), async {
        until(|| async { ax.record(&run).await["state"] == "release_requested" }).await;
        let approved = ax.approve(&session).await;
        ax.provider.open_held_calls();
        approved
    });
    assert_eq!(
        processed.unwrap(),
        Processed::Rebased,
        "the reply landed mid-call"
    );
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "released", "{record}");
    assert_gone(pid, "the snapshot and terminate happened").await;

    assert!(ax.drain().await >= 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "active", "{record}");
    let counters = &store.metrics().lifecycle;
    assert_eq!(
        counters.provider_calls("release", "ok"),
        1,
        "never asked twice"
    );
    assert_eq!(counters.release_duplicates("snapshot_and_terminate"), 0);
    let resumed = ax.claim().await;
    assert_eq!(ax.sh(&resumed, "cat state.txt").await, "v1");
}

async fn a_reply_over_a_forced_terminate_fails_at_once_with_the_snapshot_lost(backend: Backend) {
    // The provider calls the sandbox broken, cannot be asked about it, and every terminate
    // after that fails.
    let faults = "release=terminal:times=1;release=recoverable;inspect=recoverable";
    let ax = ax_with_faults(backend, faults).await;
    let (session, run, _claim, _pid) = ax.suspended_with_work().await;
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "release_failed", "{record}");
    assert_eq!(record["release_purpose"], "forced_terminate");
    assert_eq!(record["checkpoint_lost"], true);

    ax.approve(&session).await;
    ax.drain().await;
    let failed = ax.run(&run).await;
    assert_eq!(failed.state, sagents::domain::run::RunState::Failed);
    assert_eq!(
        failed.error.as_ref().unwrap()["code"],
        "sandbox.snapshot_lost",
        "{failed:?}"
    );
    let record = ax.record(&run).await;
    assert_eq!(
        record["release_purpose"], "forced_terminate",
        "the terminate goes on as the end of the run: {record}"
    );
    assert!(record["due_at"].is_string(), "{record}");
}
