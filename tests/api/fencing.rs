//! Leases over HTTP: stale tokens, expiry, take-over, hash checks, cancel and resume.

use serde_json::json;

use crate::common::app::{expect_problem, hash, Options, TestApp};
use crate::on_both_backends;
use sagents::store::Backend;

on_both_backends!(
    stale_and_expired_tokens_lose_the_lease,
    a_hash_mismatch_on_resume_fails_the_run,
    explicit_resume_and_cancel
);

async fn stale_and_expired_tokens_lose_the_lease(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        Options {
            manual_clock: true,
            ..Options::default()
        },
    )
    .await;
    let (session_id, run_id, first) = app.claimed_run("w1").await;
    let t1 = first["lease"]["fencing_token"].as_i64().unwrap();
    let lease1 = first["lease"]["lease_id"].as_str().unwrap().to_owned();
    let heartbeat = format!("/v1/runtime/leases/{lease1}/heartbeat");

    let renewed = app
        .post_ok(&heartbeat, &app.runtime, &json!({"fencing_token": t1}), 200)
        .await;
    assert_eq!(
        renewed["grant"],
        json!(null),
        "a run without a sandbox gets no grant"
    );
    let stale = app
        .post(
            &heartbeat,
            &app.runtime,
            &json!({"fencing_token": t1 + 1000}),
        )
        .await;
    expect_problem(stale, 409, "lease.lost", None).await;

    // Nobody else can claim a run whose lease is live.
    let none = app
        .post_ok(
            "/v1/runtime/claims",
            &app.runtime,
            &json!({"worker_id": "w2"}),
            200,
        )
        .await;
    assert_eq!(none["claims"], json!([]));

    app.advance(chrono::Duration::seconds(31));
    let expired = app
        .post(&heartbeat, &app.runtime, &json!({"fencing_token": t1}))
        .await;
    expect_problem(expired, 409, "lease.lost", None).await;
    let job = app
        .post(
            &format!("/v1/runs/{run_id}/jobs"),
            &app.runtime,
            &json!({"fencing_token": t1, "kind": "shell"}),
        )
        .await;
    expect_problem(job, 409, "lease.lost", None).await;

    let second = app.claim_one("w2").await;
    assert_eq!(second["run"]["id"], run_id.as_str());
    let t2 = second["lease"]["fencing_token"].as_i64().unwrap();
    assert!(t2 > t1, "a take-over gets a higher token ({t2} > {t1})");
    assert_ne!(second["lease"]["lease_id"], first["lease"]["lease_id"]);

    let late = app
        .post(
            &format!("/v1/runs/{run_id}/complete"),
            &app.runtime,
            &json!({"fencing_token": t1, "output": {}}),
        )
        .await;
    expect_problem(late, 409, "lease.lost", None).await;
    let (_, snap) = app.snapshot(&session_id).await;
    assert_eq!(snap["runs"][0]["status"], "running");

    let done = app
        .post_ok(
            &format!("/v1/runs/{run_id}/complete"),
            &app.runtime,
            &json!({"fencing_token": t2, "output": {}}),
            200,
        )
        .await;
    assert_eq!(done["state"], "completed");

    let metrics = app
        .request(reqwest::Method::GET, "/metrics", &app.admin)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("sagents_lease_takeovers_total 1\n"),
        "{metrics}"
    );
    app.stop().await;
}

async fn a_hash_mismatch_on_resume_fails_the_run(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (session_id, run_id, claim) = app.claimed_run("w1").await;
    let t1 = claim["lease"]["fencing_token"].as_i64().unwrap();
    app.suspend(&run_id, t1, false).await;
    let resumed = app
        .post_ok(
            &format!("/v1/sessions/{session_id}/runs/{run_id}/resume"),
            &app.frontend,
            &json!({}),
            200,
        )
        .await;
    assert_eq!(resumed["state"], "resuming");
    let claim = app.claim_one("w2").await;
    assert_eq!(claim["kind"], "resume");
    let t2 = claim["lease"]["fencing_token"].as_i64().unwrap();

    let stale = app
        .post(
            &format!("/v1/runs/{run_id}/resumed"),
            &app.runtime,
            &json!({"fencing_token": t2, "resolved_spec_hash": hash('b')}),
        )
        .await;
    expect_problem(stale, 409, "sandbox.policy_stale", None).await;
    let (_, snap) = app.snapshot(&session_id).await;
    assert_eq!(snap["runs"][0]["status"], "failed");

    let again = app
        .post(
            &format!("/v1/runs/{run_id}/resumed"),
            &app.runtime,
            &json!({"fencing_token": t2, "resolved_spec_hash": hash('a')}),
        )
        .await;
    assert_eq!(again.status(), 409, "a failed run never continues");
    app.stop().await;
}

async fn explicit_resume_and_cancel(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let s = app.suspended_with_interaction().await;
    let resume = format!("/v1/sessions/{}/runs/{}/resume", s.session_id, s.run_id);
    let cancel = format!("/v1/sessions/{}/runs/{}/cancel", s.session_id, s.run_id);

    let pending = app.post(&resume, &app.frontend, &json!({})).await;
    expect_problem(pending, 409, "interaction.pending", None).await;

    let cancelled = app.post_ok(&cancel, &app.frontend, &json!({}), 200).await;
    assert_eq!(cancelled["state"], "cancelled");
    let (_, snap) = app.snapshot(&s.session_id).await;
    assert_eq!(snap["runs"][0]["status"], "cancelled");
    assert_eq!(snap["pending_interactions"], json!([]));

    let twice = app.post(&cancel, &app.frontend, &json!({})).await;
    expect_problem(twice, 409, "run.terminal", None).await;
    let reply = app
        .post(
            &s.reply_path(),
            &app.frontend,
            &json!({"decision": "approve"}),
        )
        .await;
    expect_problem(reply, 409, "interaction.not_pending", None).await;
    let not_suspended = app.post(&resume, &app.frontend, &json!({})).await;
    expect_problem(not_suspended, 409, "run.not_suspended", None).await;
    app.stop().await;
}
