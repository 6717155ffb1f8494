//! Provider failures injected into the real local provider: retries with backoff on the
//! manual clock, and a broken sandbox forced to terminate.

use chrono::{DateTime, Utc};
use sagents::clock::Clock;
use sagents::domain::sandbox::WorkspaceMode;
use sagents::store::Backend;
use serde_json::{json, Value};

use super::fixture::{ax_with_faults, spec_json, Ax};
use super::{assert_gone, running, Replica, PROVIDER_TOKEN};
use crate::on_both_backends;

on_both_backends!(
    failing_releases_back_off_while_the_user_sees_nothing_and_end_released,
    a_broken_sandbox_is_force_terminated_and_its_resume_fails_with_snapshot_lost,
    provisions_are_retried_and_a_refused_one_fails_the_run,
    a_run_cancelled_while_its_snapshot_keeps_failing_is_terminated,
    a_refused_token_is_retried_and_never_costs_the_snapshot,
);

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .unwrap_or_else(|| panic!("a time, got {v}"))
        .parse()
        .unwrap()
}

fn now(ax: &Ax) -> DateTime<Utc> {
    ax.app.clock.as_ref().unwrap().now()
}

/// The record was released by a `terminate` issued for `purpose`, under that purpose's key.
fn assert_terminated_for(record: &Value, purpose: &str, key_suffix: &str) {
    assert_eq!(record["state"], "released", "{record}");
    assert_eq!(record["disposition"], "terminate");
    assert_eq!(record["release_purpose"], purpose);
    assert!(record["release_idempotency_key"]
        .as_str()
        .unwrap()
        .ends_with(key_suffix));
    assert_eq!(record["compute_released"], true);
}

/// A provisioned, claimed run with a file and a background process, then suspended.
async fn failing_releases_back_off_while_the_user_sees_nothing_and_end_released(backend: Backend) {
    // Each failed snapshot resumes the sandbox and answers a recoverable error.
    let ax = ax_with_faults(backend, "snapshot=fail:times=3").await;
    let (session, run, claim, pid) = ax.suspended_with_work().await;
    let user_view = ax.snapshot_bytes(&session).await;

    assert_eq!(ax.drain().await, 1);
    let first = ax.record(&run).await;
    assert_eq!(first["state"], "release_failed");
    assert_eq!(first["error"]["code"], "sandbox.snapshot_failed");
    assert_eq!(first["error"]["retryable"], true);
    let key = first["release_idempotency_key"].clone();
    assert!(key.as_str().unwrap().ends_with(":release"));
    let m = ax.metrics().await;
    assert_eq!(m["release_failure_count"], 1);
    assert_eq!(m["release_retry_count"], 1);
    assert_eq!(m["pending_releases"], 1);

    // Backoff: 1 s, 2 s, 4 s (±10 %), each attempt only once it is due.
    let mut record = first;
    for (attempt, delay) in [(1, 1.0), (2, 2.0), (3, 4.0)] {
        assert_eq!(record["retry_count"], attempt);
        assert_eq!(
            record["release_idempotency_key"], key,
            "one key for every retry"
        );
        assert_eq!(record["due_at"], record["next_retry_at"]);
        let wait = (time(&record["next_retry_at"]) - now(&ax)).as_seconds_f64();
        assert!(
            (delay * 0.9..=delay * 1.1).contains(&wait),
            "retry {attempt} in {wait} s, expected {delay} s ± 10 %"
        );
        assert_eq!(ax.drain().await, 0, "not due before its time");
        assert!(running(pid), "a recoverable failure leaves it running");
        assert_eq!(ax.snapshot_bytes(&session).await, user_view);
        ax.advance(wait.ceil() as i64);
        assert_eq!(ax.drain().await, 1);
        record = ax.record(&run).await;
    }
    assert_eq!(record["state"], "released");
    assert_eq!(record["release_idempotency_key"], key);
    assert_eq!(record["retry_count"], 0);
    assert_eq!(record["next_retry_at"], json!(null));
    assert_eq!(record["compute_released"], true);
    assert_gone(pid, "the process is gone").await;
    assert_eq!(
        ax.snapshot_bytes(&session).await,
        user_view,
        "the run stayed suspended, its interaction pending"
    );
    let counters = &ax.app.state.metrics.lifecycle;
    assert_eq!(counters.retries("release"), 3);
    assert_eq!(counters.releases("snapshot_and_terminate", "failed"), 3);
    assert_eq!(counters.releases("snapshot_and_terminate", "released"), 1);
    assert_eq!(counters.provider_calls("release", "503"), 3);
    let m = ax.metrics().await;
    assert_eq!(m["release_failure_count"], 0);
    assert_eq!(m["release_retry_count"], 0);
    assert!(m["average_release_latency_seconds"].as_f64().unwrap() >= 7.0);

    ax.approve(&session).await;
    ax.drain().await;
    let resumed = ax.claim().await;
    assert_eq!(resumed.kind, "resume");
    assert_ne!(resumed.sandbox_id, claim.sandbox_id);
    assert_eq!(ax.sh(&resumed, "cat state.txt").await, "v1");
}

async fn a_broken_sandbox_is_force_terminated_and_its_resume_fails_with_snapshot_lost(
    backend: Backend,
) {
    // The snapshot fails and the paused sandbox cannot be brought back: a terminal error.
    let ax = ax_with_faults(backend, "snapshot=fail:times=1;resume=fail:times=1").await;
    let (session, run, _, pid) = ax.suspended_with_work().await;
    let user_view = ax.snapshot_bytes(&session).await;

    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_terminated_for(&record, "forced_terminate", ":forced-terminate");
    assert_eq!(record["checkpoint_lost"], true);
    assert_eq!(record["sandbox_checkpoint"], json!(null));
    assert_eq!(record["error"]["code"], "sandbox.lost");
    assert_gone(pid, "a broken sandbox is never left running").await;
    assert_eq!(ax.snapshot_bytes(&session).await, user_view);
    let counters = &ax.app.state.metrics.lifecycle;
    assert_eq!(
        counters.releases("snapshot_and_terminate", "forced_terminate"),
        1
    );
    assert_eq!(counters.releases("terminate", "released"), 1);

    ax.approve(&session).await;
    // Failing the run ends it, which makes its record due once more, to find nothing to do.
    assert_eq!(ax.drain().await, 2);
    let failed = ax.run(&run).await;
    assert_eq!(failed.state.as_str(), "failed");
    assert_eq!(failed.error.unwrap()["code"], "sandbox.snapshot_lost");
    let (_, snap) = ax.app.snapshot(&session).await;
    assert_eq!(snap["runs"][0]["status"], "failed");
    ax.claim_none().await;
    assert_eq!(ax.record(&run).await["state"], "released");
    assert_eq!(ax.drain().await, 0);
}

async fn provisions_are_retried_and_a_refused_one_fails_the_run(backend: Backend) {
    let ax = ax_with_faults(backend, "provision=recoverable:times=1").await;
    let session = ax.app.create_session().await;
    let run = ax.isolated_run(&session).await;
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "provisioning");
    assert_eq!(record["retry_count"], 1);
    let key = record["bind_idempotency_key"].clone();
    assert_eq!(key, json!(format!("{run}:g1:provision")));
    ax.claim_none().await;
    ax.advance(2);
    ax.drain_to_active(&run, 1).await;
    assert_eq!(ax.app.state.metrics.lifecycle.retries("provision"), 1);

    // The provider refuses a workspace outside its root: nothing to retry, the run fails.
    let outside = spec_json(WorkspaceMode::ActiveWorkspace, Some("../../etc"));
    let doomed = ax.run_with(&session, outside, None).await;
    ax.drain().await;
    let record = ax.record(&doomed).await;
    assert_eq!(record["state"], "released");
    assert_eq!(record["compute_released"], false, "nothing was ever bound");
    assert_eq!(record["error"]["code"], "sandbox.workspace_outside_root");
    let failed = ax.run(&doomed).await;
    assert_eq!(failed.state.as_str(), "failed");
    assert_eq!(failed.error.unwrap()["code"], "sandbox.provision_failed");
    let claimed = ax.claim().await;
    assert_eq!(claimed.run_id, run, "only the provisioned run is offered");
}

async fn a_run_cancelled_while_its_snapshot_keeps_failing_is_terminated(backend: Backend) {
    let ax = ax_with_faults(backend, "snapshot=fail:times=1000").await;
    let (session, run, _, pid) = ax.suspended_with_work().await;
    assert_eq!(ax.drain().await, 1);
    let failing = ax.record(&run).await;
    assert_eq!(failing["state"], "release_failed");
    assert!(running(pid), "a failed snapshot leaves the sandbox running");

    // Cancelled while the snapshot waits for its retry: the sandbox is terminated at once,
    // under a key of its own, not after the backoff and not by another snapshot.
    ax.app
        .post_ok(
            &format!("/v1/sessions/{session}/runs/{run}/cancel"),
            &ax.app.frontend,
            &json!({}),
            200,
        )
        .await;
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_terminated_for(&record, "run_ended", ":run-ended");
    assert_eq!(
        record["release_requested_at"], failing["release_requested_at"],
        "the release latency counts from the first request"
    );
    assert_gone(pid, "no sandbox outlives its run").await;
    let counters = &ax.app.state.metrics.lifecycle;
    assert_eq!(counters.releases("snapshot_and_terminate", "failed"), 1);
    assert_eq!(counters.releases("terminate", "released"), 1);
    assert_eq!(ax.drain().await, 0);
}

async fn a_refused_token_is_retried_and_never_costs_the_snapshot(backend: Backend) {
    let ax = ax_with_faults(backend, "").await;
    let (session, run, _, pid) = ax.suspended_with_work().await;
    let store = ax.app.store();
    let registered = store.get_provider("local").await.unwrap().unwrap();
    let register = |token: &'static str| {
        let (url, caps) = (registered.base_url.clone(), registered.capabilities.clone());
        async move {
            store
                .upsert_provider("local", &url, token, &caps, "u")
                .await
                .unwrap()
        }
    };
    // A replica that reads the registration after the token was changed to a wrong one.
    register("rotated-wrongly").await;
    let replica = Replica::new(store.clone(), "replica-2");
    assert_eq!(replica.drain().await, 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "release_failed", "{record}");
    assert_eq!(record["disposition"], "snapshot_and_terminate");
    assert_eq!(record["checkpoint_lost"], false);
    assert_eq!(record["error"]["code"], "auth.unauthorized");
    assert!(record["release_idempotency_key"]
        .as_str()
        .unwrap()
        .ends_with(":release"));
    assert!(running(pid), "nothing was done to the sandbox");

    // The registration is fixed; the same replica reads it again and the snapshot is taken.
    register(PROVIDER_TOKEN).await;
    ax.advance(2);
    assert_eq!(replica.drain().await, 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "released");
    assert_eq!(record["disposition"], "snapshot_and_terminate");
    assert!(record["sandbox_checkpoint"].is_object(), "{record}");
    assert_gone(pid, "released").await;
    ax.approve(&session).await;
    ax.drain().await;
    let resumed = ax.claim().await;
    assert_eq!(ax.sh(&resumed, "cat state.txt").await, "v1");
}
