//! A request that changes something and takes longer than `SAGENTS_REQUEST_TIMEOUT_SECONDS`
//! is answered with the `request.timeout` problem; a long-poll waiting longer than that is
//! not cut.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;
use tokio::net::TcpListener;

use crate::common::app::{expect_problem, Options, TestApp};
use crate::on_both_backends;
use sagents::store::Backend;

async fn spawn(backend: Backend) -> TestApp {
    TestApp::spawn_with(
        backend,
        Options {
            request_timeout_seconds: Some(1),
            ..Options::default()
        },
    )
    .await
}

/// A provider that accepts connections and never answers: registering it waits on the
/// capabilities call for its own 10 s timeout, far past the request's 1 s.
async fn silent_provider() -> (String, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = vec![];
        while let Ok((stream, _)) = listener.accept().await {
            open.push(stream);
        }
    });
    (url, held)
}

async fn a_slow_request_gets_the_timeout_problem(backend: Backend) {
    let app = spawn(backend).await;
    let (base_url, held) = silent_provider().await;
    let started = Instant::now();
    let res = app
        .post(
            "/v1/admin/providers",
            &app.admin,
            &json!({"provider_id": "silent", "base_url": base_url, "token": "t"}),
        )
        .await;
    assert!(res.headers().contains_key("x-request-id"));
    expect_problem(res, 504, "request.timeout", None).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(8),
        "{took:?}"
    );
    held.abort();
    app.stop().await;
}

async fn a_long_poll_longer_than_the_timeout_is_not_cut(backend: Backend) {
    let app = spawn(backend).await;
    let session = app.create_session().await;
    let (etag, _) = app.snapshot(&session).await;
    let started = Instant::now();
    let res = app
        .request(
            Method::GET,
            &format!("/v1/sessions/{session}/snapshot?wait_seconds=3"),
            &app.frontend,
        )
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 304);
    assert!(started.elapsed() >= Duration::from_secs(3));

    let inbox = app.get("/v1/interactions", &app.frontend).await;
    let etag = inbox.headers()["etag"].to_str().unwrap().to_owned();
    let started = Instant::now();
    let inbox = app
        .request(
            Method::GET,
            "/v1/interactions?wait_seconds=2",
            &app.frontend,
        )
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(inbox.status(), 304);
    assert!(started.elapsed() >= Duration::from_secs(2));

    // A claim's wait is in its body.
    let started = Instant::now();
    let claims = app
        .post(
            "/v1/runtime/claims",
            &app.runtime,
            &json!({"worker_id": "w1", "wait_seconds": 2}),
        )
        .await;
    assert_eq!(claims.status(), 200);
    assert!(started.elapsed() >= Duration::from_secs(2));
    app.stop().await;
}

on_both_backends!(
    a_slow_request_gets_the_timeout_problem,
    a_long_poll_longer_than_the_timeout_is_not_cut,
);
