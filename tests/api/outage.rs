//! The database goes away under a running server (PostgreSQL stopped at once, as in a crash
//! or a failover) and comes back on the same address: requests get 503 with `Retry-After`
//! meanwhile, nothing half-done is kept, and the same replica serves again afterwards
//! without a restart. A reply refused during the outage is accepted, once, when retried.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::common::app::{expect_problem, until, Options, TestApp};
use crate::common::own_pg::OwnCluster;
use sagents::store::Backend;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_is_a_503_and_the_replica_recovers_by_itself() {
    let cluster = OwnCluster::start();
    let url = cluster.database("outage").await;
    let app = TestApp::spawn_with(
        Backend::Postgres,
        Options {
            database_url: Some(url),
            ..Options::default()
        },
    )
    .await;
    let s = app.suspended_with_interaction().await;
    let reply_path = s.reply_path();
    // The same reply every time, under one idempotency key.
    let approve = || {
        app.request(reqwest::Method::POST, &reply_path, &app.frontend)
            .header("idempotency-key", "approve-1")
            .json(&json!({"decision": "approve", "payload": {"note": "ok"}}))
            .send()
    };

    cluster.stop();
    let started = tokio::time::Instant::now();
    let refused = approve().await.unwrap();
    assert_eq!(
        refused
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap()),
        Some("1")
    );
    expect_problem(refused, 503, "service.unavailable", None).await;
    let created = app
        .post("/v1/sessions", &app.frontend, &json!({"title": "during"}))
        .await;
    expect_problem(created, 503, "service.unavailable", None).await;
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "each request waits at most the 5 s acquire timeout: {:?}",
        started.elapsed()
    );
    let ready = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    let live = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(live.status(), StatusCode::OK, "the process itself is alive");

    cluster.restart();
    until(|| async {
        let res = app.client.get(app.url("/readyz")).send().await;
        res.is_ok_and(|r| r.status() == StatusCode::OK)
    })
    .await;

    // The refused reply changed nothing: the interaction is still pending, and the same
    // request (same key) now resolves it exactly once.
    let (_, snap) = app.snapshot(&s.session_id).await;
    assert_eq!(snap["pending_interactions"][0]["id"], s.interaction_id);
    for _ in 0..2 {
        let res = approve().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let body: serde_json::Value = res.json().await.unwrap();
        assert_eq!(body["interaction"]["status"], "resolved");
        assert_eq!(body["run_status"], "resuming");
    }
    let events = app
        .get_ok(
            &format!("/v1/sessions/{}/events?after=0", s.session_id),
            &app.frontend,
        )
        .await;
    let resolved = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "interaction.resolved")
        .count();
    assert_eq!(resolved, 1, "one resolution: {events}");

    // Everything else works again on the same replica.
    let after = app.create_session().await;
    app.create_run(&after).await;
    assert_eq!(app.claim_one("w2").await["kind"], "resume");
    app.stop().await;
}
