//! `Idempotency-Key`: replays, reuse with another body, and a replay while the first runs.

use serde_json::json;

use crate::common::app::{expect_json, expect_problem, TestApp};
use crate::on_both_backends;
use sagents::domain::token::Role;
use sagents::store::Backend;

on_both_backends!(
    replays_and_key_reuse,
    a_replay_while_the_first_runs_is_refused
);

async fn post_with_key(
    app: &TestApp,
    path: &str,
    token: &str,
    key: &str,
    body: &serde_json::Value,
) -> reqwest::Response {
    app.request(reqwest::Method::POST, path, token)
        .header("idempotency-key", key)
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn replays_and_key_reuse(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let body = json!({"title": "once"});
    let first = post_with_key(&app, "/v1/sessions", &app.frontend, "create-1", &body).await;
    assert_eq!(first.status(), 201);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first_bytes = first.bytes().await.unwrap();

    let again = post_with_key(&app, "/v1/sessions", &app.frontend, "create-1", &body).await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.headers()["content-type"], "application/json");
    assert_eq!(again.bytes().await.unwrap(), first_bytes);

    let other = post_with_key(
        &app,
        "/v1/sessions",
        &app.frontend,
        "create-1",
        &json!({"title": "twice"}),
    )
    .await;
    expect_problem(
        other,
        422,
        "idempotency.key_reused",
        Some("Idempotency-Key"),
    )
    .await;

    // Keys are scoped by token: another caller's same key is a new request.
    let someone_else = app.token(Role::Frontend, Some("default")).await;
    let theirs = post_with_key(&app, "/v1/sessions", &someone_else, "create-1", &body).await;
    let theirs = expect_json(theirs, 201).await;
    let mine: serde_json::Value = serde_json::from_slice(&first_bytes).unwrap();
    assert_ne!(theirs["id"], mine["id"]);

    // Answers below 500 are stored too, problems included.
    let s = app.suspended_with_interaction().await;
    let reply = s.reply_path();
    let bad = json!({"decision": "maybe"});
    let refused = post_with_key(&app, &reply, &app.frontend, "reply-1", &bad).await;
    let refused = expect_problem(refused, 422, "request.invalid", Some("decision")).await;
    let replayed = post_with_key(&app, &reply, &app.frontend, "reply-1", &bad).await;
    assert_eq!(replayed.headers()["idempotent-replayed"], "true");
    let replayed = expect_problem(replayed, 422, "request.invalid", Some("decision")).await;
    assert_eq!(replayed, refused);

    let ok = json!({"decision": "deny"});
    let answered = post_with_key(&app, &reply, &app.frontend, "reply-2", &ok).await;
    let answered = expect_json(answered, 200).await;
    let replayed = post_with_key(&app, &reply, &app.frontend, "reply-2", &ok).await;
    assert_eq!(expect_json(replayed, 200).await, answered);

    for bad_key in ["has space", ""] {
        let res = post_with_key(&app, "/v1/sessions", &app.frontend, bad_key, &body).await;
        expect_problem(res, 400, "idempotency.key_invalid", Some("Idempotency-Key")).await;
    }
    app.stop().await;
}

async fn a_replay_while_the_first_runs_is_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let session_id = app.create_session().await;
    let body = json!({"worker_id": "w1", "wait_seconds": 30});
    let first = {
        let req = app
            .request(reqwest::Method::POST, "/v1/runtime/claims", &app.runtime)
            .header("idempotency-key", "claim-1")
            .json(&body);
        tokio::spawn(async move { req.send().await.unwrap() })
    };
    app.until_waiting(1).await;
    let during = post_with_key(&app, "/v1/runtime/claims", &app.runtime, "claim-1", &body).await;
    expect_problem(during, 409, "idempotency.in_flight", None).await;

    let run_id = app.create_run(&session_id).await;
    let first = expect_json(first.await.unwrap(), 200).await;
    assert_eq!(first["claims"][0]["run"]["id"], run_id.as_str());
    let after = post_with_key(&app, "/v1/runtime/claims", &app.runtime, "claim-1", &body).await;
    assert_eq!(after.headers()["idempotent-replayed"], "true");
    assert_eq!(expect_json(after, 200).await, first);
    app.stop().await;
}
