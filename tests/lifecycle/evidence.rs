//! Only the provider's own word is evidence that compute is gone: an ingress in front of the
//! provider answering its HTML 404 or 502 pages, or a provider's JSON 500 with a code plugin
//! API v3 does not call terminal, is an unreachable provider: the release is retried under
//! the same key, the snapshot is never lost, and once the ingress heals the approved run
//! resumes with its files.

use sagents::domain::run::RunState;
use sagents::store::Backend;
use serde_json::{json, Value};

use super::fixture::{ax, ax_with_faults, Ax};
use super::{running, PROVIDER_TOKEN};
use crate::common::proxy::{Mode, Proxy};

crate::on_both_backends!(
    an_ingress_page_during_a_release_never_loses_the_snapshot,
    an_unknown_non_retryable_error_does_not_force_a_terminate,
    a_not_found_counts_only_from_a_provider_that_speaks_v3,
    a_refused_retry_of_a_snapshot_is_no_word_on_the_first_attempt,
);

/// Registers the provider through a proxy (before any lifecycle work, so every client
/// calls it through the proxy).
async fn behind_proxy(ax: &Ax) -> Proxy {
    let proxy = Proxy::start(&ax.provider.base_url()).await;
    ax.app
        .post_ok(
            "/v1/admin/providers",
            &ax.app.admin,
            &json!({
                "provider_id": "local",
                "base_url": proxy.base_url,
                "token": PROVIDER_TOKEN,
            }),
            201,
        )
        .await;
    proxy
}

fn assert_retrying(record: &Value, code: &str) {
    assert_eq!(record["state"], "release_failed", "{record}");
    assert_eq!(record["disposition"], "snapshot_and_terminate");
    assert_eq!(record["checkpoint_lost"], false, "{record}");
    assert_eq!(record["compute_released"], false);
    assert_eq!(record["error"]["code"], code, "{record}");
    assert_eq!(record["error"]["retryable"], true);
}

async fn an_ingress_page_during_a_release_never_loses_the_snapshot(backend: Backend) {
    let ax = ax(backend).await;
    let proxy = behind_proxy(&ax).await;
    let (session, run, claim, pid) = ax.suspended_with_work().await;
    let key_before = ax.record(&run).await["release_idempotency_key"].clone();

    proxy.set(Mode::Html404);
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_retrying(&record, "provider.not_a_provider_answer");
    let message = record["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("404") && message.contains("<title>404 Not Found"),
        "{message}"
    );
    assert_eq!(record["retry_count"], 1);
    let key = record["release_idempotency_key"].clone();
    assert!(key.is_string() && (key_before.is_null() || key_before == key));
    assert!(running(pid), "nothing reached the provider");
    assert!(proxy.answered_itself() >= 1);

    proxy.set(Mode::Html502);
    ax.advance(60);
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_retrying(&record, "provider.not_a_provider_answer");
    assert_eq!(record["retry_count"], 2);
    assert_eq!(record["release_idempotency_key"], key, "the same release");
    assert_eq!(
        ax.releases("snapshot_and_terminate", "released_on_inspect"),
        0
    );
    assert_eq!(ax.releases("snapshot_and_terminate", "forced_terminate"), 0);

    proxy.set(Mode::PassThrough);
    ax.approve(&session).await;
    ax.drain().await;
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "active", "{record}");
    assert_eq!(record["checkpoint_lost"], false, "{record}");
    assert_eq!(ax.releases("snapshot_and_terminate", "released"), 1);
    let resumed = ax.claim().await;
    assert_eq!(resumed.run_id, claim.run_id);
    assert_eq!(resumed.kind, "resume");
    assert_eq!(ax.sh(&resumed, "cat state.txt").await, "v1");
    ax.resumed(&resumed).await;
    let run = ax.run(&run).await;
    assert_eq!(run.state, RunState::Running, "{run:?}");
}

async fn an_unknown_non_retryable_error_does_not_force_a_terminate(backend: Backend) {
    let ax = ax(backend).await;
    let proxy = behind_proxy(&ax).await;
    let (session, run, _, pid) = ax.suspended_with_work().await;

    proxy.set(Mode::Json500Unknown);
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_retrying(&record, "provider.unknown_error");
    assert!(
        record["error"]["message"]
            .as_str()
            .unwrap()
            .contains("vendor.oops"),
        "{record}"
    );
    assert!(running(pid), "never terminated");
    assert_eq!(ax.releases("snapshot_and_terminate", "forced_terminate"), 0);
    let counters = &ax.app.store().metrics().lifecycle;
    assert_eq!(counters.release_failures("final"), 0);

    proxy.set(Mode::PassThrough);
    ax.advance(60);
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "released", "{record}");
    assert!(record["sandbox_checkpoint"].is_object(), "{record}");
    ax.approve(&session).await;
    ax.drain().await;
    let resumed = ax.claim().await;
    assert_eq!(ax.sh(&resumed, "cat state.txt").await, "v1");
}

async fn a_not_found_counts_only_from_a_provider_that_speaks_v3(backend: Backend) {
    // The provider forgets the sandbox: its release and inspect answer `sandbox.not_found`.
    let ax = ax_with_faults(backend, "release=forget:times=1").await;
    let proxy = behind_proxy(&ax).await;
    let (_, run, _, _) = ax.suspended_with_work().await;

    proxy.set(Mode::CapabilitiesHtml404);
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "release_failed", "{record}");
    assert_eq!(record["checkpoint_lost"], false, "{record}");
    assert_eq!(record["error"]["code"], "sandbox.not_found", "{record}");

    proxy.set(Mode::PassThrough);
    ax.advance(60);
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "released", "{record}");
    assert_eq!(record["error"]["code"], "release.confirmed_by_inspect");
    assert_eq!(
        record["checkpoint_lost"], true,
        "the provider's word, checked"
    );
}

async fn a_refused_retry_of_a_snapshot_is_no_word_on_the_first_attempt(backend: Backend) {
    // The first attempt snapshots and terminates but its answer is lost; the retry is refused
    // for a reason that says nothing of it; the sandbox is terminated. Only the key's receipt,
    // asked for again, tells whether the snapshot was taken: it was.
    let faults = "release=drop:times=1;release=refused:times=2";
    let ax = ax_with_faults(backend, faults).await;
    let (session, run, _claim, _pid) = ax.suspended_with_work().await;
    ax.drain().await;
    ax.advance(5);
    ax.drain().await;
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "release_failed", "{record}");
    assert_eq!(record["error"]["code"], "fault.injected");
    assert_eq!(record["checkpoint_lost"], false, "{record}");

    ax.advance(5);
    ax.drain().await;
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "released", "{record}");
    assert_eq!(
        record["compute_released"], true,
        "the receipt said so: {record}"
    );
    assert!(record["sandbox_checkpoint"].is_object(), "{record}");

    ax.approve(&session).await;
    ax.drain().await;
    let resumed = ax.claim().await;
    assert_eq!(resumed.kind, "resume");
    assert_eq!(ax.sh(&resumed, "cat state.txt").await, "v1");
}
