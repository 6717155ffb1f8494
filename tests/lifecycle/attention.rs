//! A release the provider never confirms uses its attempt budget, then needs an operator:
//! listed, counted, retried slowly, and resolved only by an explicit decision.

use sagents::store::Backend;
use serde_json::json;

use super::fixture::{ax_with_faults, Ax};
use crate::common::app::{expect_json, expect_problem};

crate::on_both_backends!(
    a_release_that_never_confirms_needs_an_operator,
    a_bind_that_keeps_failing_while_a_human_waits_needs_an_operator,
    a_reply_never_waits_on_the_attention_cadence,
);

/// Retries a failing release (the backoff never exceeds five minutes) until its record
/// needs attention; returns the attempts made, which the default budget caps at ten.
pub async fn fail_until_attention(ax: &Ax, run: &str) -> i64 {
    let mut attempts = 1;
    while ax.record(run).await["state"] == "release_failed" {
        ax.advance(301);
        assert_eq!(ax.drain().await, 1, "each retry is due after its backoff");
        attempts += 1;
        assert!(attempts <= 10, "attention must come within the budget");
    }
    attempts
}

async fn a_release_that_never_confirms_needs_an_operator(backend: Backend) {
    let ax = ax_with_faults(backend, "release=recoverable").await;
    let session = ax.app.create_session().await;
    let (run, claim) = ax.running_isolated(&session).await;
    ax.complete(&claim).await;
    assert_eq!(ax.drain().await, 1);
    assert_eq!(ax.record(&run).await["state"], "release_failed");

    let attempts = fail_until_attention(&ax, &run).await;
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "needs_attention", "{record}");
    assert_eq!(attempts, 10);
    assert_eq!(record["retry_count"], 10);
    assert_eq!(record["compute_released"], false);

    let metrics = ax.metrics().await;
    assert_eq!(metrics["needs_attention_count"], 1, "{metrics}");
    assert_eq!(metrics["records_by_state"]["needs_attention"], 1);
    let prom = ax.prometheus().await;
    assert!(
        prom.contains("sagents_lifecycle_needs_attention 1\n"),
        "{prom}"
    );
    assert!(prom.contains("sagents_lifecycle_attention_entered_total{disposition=\"terminate\"} 1"));

    let page = ax
        .app
        .get_ok("/v1/admin/lifecycle/attention", &ax.app.admin)
        .await;
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{page}");
    assert_eq!(items[0]["record"]["run_id"], run.as_str());
    assert_eq!(items[0]["tenant_id"], "default");
    assert!(page["next_cursor"].is_null());

    // Retried slowly: not within the backoff cap, but after the attention interval.
    ax.advance(400);
    assert_eq!(
        ax.drain().await,
        0,
        "a record needing attention waits its slow retry"
    );
    ax.advance(600);
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "needs_attention");
    assert_eq!(record["retry_count"], 11);

    // The operator retries at once, then declares the sandbox gone.
    let path = format!("/v1/admin/runs/{run}/execution-resource/attention");
    let res = ax
        .app
        .post(
            &path,
            &ax.app.admin,
            &json!({"action": "retry_now", "reason": "provider fixed"}),
        )
        .await;
    expect_json(res, 200).await;
    assert_eq!(
        ax.drain().await,
        1,
        "retry_now makes the record due at once"
    );
    assert_eq!(ax.record(&run).await["retry_count"], 12);

    for (body, status, code) in [
        (
            json!({"action": "explode", "reason": "x"}),
            422,
            "request.invalid",
        ),
        (
            json!({"action": "mark_released", "reason": "  "}),
            422,
            "request.invalid",
        ),
        (json!({"action": "mark_released"}), 422, "request.invalid"),
    ] {
        let res = ax.app.post(&path, &ax.app.admin, &body).await;
        expect_problem(res, status, code, None).await;
    }
    let res = ax
        .app
        .post(
            &path,
            &ax.app.runtime,
            &json!({"action": "retry_now", "reason": "x"}),
        )
        .await;
    assert_eq!(res.status(), 403);
    assert_eq!(
        ax.record(&run).await["state"],
        "needs_attention",
        "bad input changes nothing"
    );

    let res = ax
        .app
        .post(
            &path,
            &ax.app.admin,
            &json!({"action": "mark_released", "reason": "gone at the host"}),
        )
        .await;
    let record = expect_json(res, 200).await;
    assert_eq!(record["state"], "released", "{record}");
    assert_eq!(record["compute_released"], false, "no receipt said so");
    assert_eq!(record["error"]["code"], "release.resolved_by_operator");
    assert_eq!(record["error"]["message"], "gone at the host");
    ax.drain().await;
    assert_eq!(ax.record(&run).await["state"], "released");
    assert_eq!(ax.metrics().await["needs_attention_count"], 0);

    let res = ax
        .app
        .post(
            &path,
            &ax.app.admin,
            &json!({"action": "retry_now", "reason": "again"}),
        )
        .await;
    expect_problem(res, 409, "execution_resource.not_in_attention", None).await;
    let unknown = format!(
        "/v1/admin/runs/{}/execution-resource/attention",
        sagents::domain::RunId::new()
    );
    let res = ax
        .app
        .post(
            &unknown,
            &ax.app.admin,
            &json!({"action": "retry_now", "reason": "x"}),
        )
        .await;
    assert_eq!(res.status(), 404);

    let history = ax
        .app
        .get_ok(
            &format!("/v1/admin/runs/{run}/execution-resource/events"),
            &ax.app.admin,
        )
        .await;
    let types: Vec<&str> = history["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert!(types.contains(&"lifecycle.needs_attention"), "{types:?}");
    assert_eq!(types.last(), Some(&"lifecycle.released"));
}

async fn a_bind_that_keeps_failing_while_a_human_waits_needs_an_operator(backend: Backend) {
    let ax = ax_with_faults(backend, "restore=recoverable").await;
    let (session, run, _claim, _pid) = ax.suspended_with_work().await;
    assert_eq!(ax.drain().await, 1);
    assert_eq!(ax.record(&run).await["state"], "released");
    let path = format!("/v1/admin/runs/{run}/execution-resource/attention");
    let give_up = json!({"action": "give_up", "reason": "the provider lost the archive"});

    ax.approve(&session).await;
    let mut waited = 0;
    loop {
        assert_eq!(
            ax.drain().await,
            1,
            "each retry is due within the resume cap"
        );
        let record = ax.record(&run).await;
        assert_eq!(record["state"], "restore_requested", "{record}");
        if record["error"]["code"] == "bind.needs_attention" {
            break;
        }
        if waited == 0 {
            let res = ax.app.post(&path, &ax.app.admin, &give_up).await;
            expect_problem(res, 409, "execution_resource.not_in_attention", None).await;
        }
        ax.advance(5);
        waited += 5;
        assert!(waited <= 180, "attention within its budget: {record}");
    }
    assert!(
        waited >= 120,
        "not before two minutes of failing: {waited} s"
    );
    let record = ax.record(&run).await;
    assert!(record["retry_count"].as_i64().unwrap() >= 10, "{record}");
    let message = record["error"]["message"].as_str().unwrap();
    assert!(message.contains("the restore failed"), "{message}");
    let counters = &ax.app.store().metrics().lifecycle;
    assert_eq!(counters.attention_entries("restore"), 1);

    // Still retried at the resume cadence.
    ax.advance(5);
    assert_eq!(ax.drain().await, 1);
    assert_eq!(
        ax.record(&run).await["error"]["code"],
        "bind.needs_attention"
    );
    assert_eq!(counters.attention_entries("restore"), 1, "entered once");
    let page = ax
        .app
        .get_ok("/v1/admin/lifecycle/attention", &ax.app.admin)
        .await;
    let listed: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["record"]["run_id"].as_str())
        .collect();
    assert_eq!(listed, [run.as_str()], "operators find the bind: {page}");

    let res = ax.app.post(&path, &ax.app.admin, &give_up).await;
    let record = expect_json(res, 200).await;
    assert_eq!(record["state"], "released", "{record}");
    assert_eq!(record["error"]["code"], "sandbox.bind_abandoned");
    let failed = ax.run(&run).await;
    assert_eq!(failed.state, sagents::domain::run::RunState::Failed);
    let error = failed.error.unwrap();
    assert_eq!(error["code"], "sandbox.bind_abandoned");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("restore"), "{message}");
    assert!(
        message.contains("the provider lost the archive"),
        "{message}"
    );
    ax.drain().await;
    assert_eq!(ax.record(&run).await["state"], "released");
}

async fn a_reply_never_waits_on_the_attention_cadence(backend: Backend) {
    // The first release is done but its answer lost; the next ten are refused (503) before
    // the provider looks at the key, so the release needs attention when the human answers.
    let faults = "release=drop:times=1;release=recoverable:times=11";
    let ax = ax_with_faults(backend, faults).await;
    let (session, run, claim, _pid) = ax.suspended_with_work().await;
    assert_eq!(ax.drain().await, 1);
    fail_until_attention(&ax, &run).await;
    assert_eq!(ax.record(&run).await["state"], "needs_attention");

    ax.approve(&session).await;
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "needs_attention", "{record}");
    let at: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(record["next_retry_at"].clone()).unwrap();
    let wait = at - ax.app.store().now();
    assert!(
        wait <= chrono::Duration::seconds(5),
        "the resume cadence, not the operators' 15 min: {wait}"
    );

    ax.app.advance(wait + chrono::Duration::milliseconds(1));
    assert!(ax.drain().await >= 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "active", "{record}");
    assert_eq!(record["generation"], claim.generation + 1, "restored");
    let resumed = ax.claim().await;
    assert_eq!(ax.sh(&resumed, "cat state.txt").await, "v1");
}
