//! Graceful shutdown ends open long-polls at once and lets the server stop.

use std::time::Duration;

use serde_json::json;

use crate::common::app::TestApp;
use crate::on_both_backends;
use sagents::store::Backend;

on_both_backends!(shutdown_ends_pending_long_polls_promptly);

async fn shutdown_ends_pending_long_polls_promptly(backend: Backend) {
    let mut app = TestApp::spawn(backend).await;
    let session_id = app.create_session().await;
    let (etag, _) = app.snapshot(&session_id).await;
    let snapshot_poll = {
        let req = app
            .request(
                reqwest::Method::GET,
                &format!("/v1/sessions/{session_id}/snapshot?wait_seconds=60"),
                &app.frontend,
            )
            .header("if-none-match", &etag);
        tokio::spawn(async move { req.send().await.unwrap() })
    };
    let claim_poll = {
        let req = app
            .request(reqwest::Method::POST, "/v1/runtime/claims", &app.runtime)
            .json(&json!({"worker_id": "w", "wait_seconds": 60}));
        tokio::spawn(async move { req.send().await.unwrap() })
    };
    app.until_waiting(2).await;

    let server = app.take_server();
    app.trigger_shutdown();
    let bound = Duration::from_secs(2);
    let snap = tokio::time::timeout(bound, snapshot_poll)
        .await
        .expect("the snapshot long-poll ends promptly")
        .unwrap();
    assert_eq!(snap.status(), 304);
    assert_eq!(snap.headers()["etag"].to_str().unwrap(), etag);
    let claims = tokio::time::timeout(bound, claim_poll)
        .await
        .expect("the claims long-poll ends promptly")
        .unwrap();
    assert_eq!(claims.status(), 200);
    assert_eq!(
        claims.json::<serde_json::Value>().await.unwrap(),
        json!({"claims": []})
    );

    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the server stops")
        .unwrap()
        .expect("a clean stop");
    let refused = reqwest::Client::new().get(app.url("/healthz")).send().await;
    assert!(refused.is_err(), "no longer accepting connections");
}
