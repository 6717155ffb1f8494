//! Event streams end within 5 s of their token's revocation (on any replica) or expiry, and
//! one token holds only so many open at once.

use std::time::{Duration, Instant};

use reqwest::{Method, Response};

use crate::common::app::{expect_problem, until, Options, TestApp, TENANT};
use crate::on_both_backends;
use sagents::domain::token::Role;
use sagents::store::Backend;

on_both_backends!(
    a_stream_ends_within_5_s_of_its_tokens_revocation_on_another_replica,
    a_stream_ends_within_5_s_of_its_tokens_expiry,
    one_token_may_hold_only_so_many_open_streams
);

fn stream_path(session_id: &str) -> String {
    format!("/v1/sessions/{session_id}/events/stream")
}

async fn open_stream(app: &TestApp, token: &str, session_id: &str) -> Response {
    app.request(Method::GET, &stream_path(session_id), token)
        .send()
        .await
        .unwrap()
}

/// Reads the stream to its end; how long that took, or `None` past `limit`.
async fn ends_within(mut res: Response, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    tokio::time::timeout(limit, async {
        while let Ok(Some(_)) = res.chunk().await {}
    })
    .await
    .ok()
    .map(|()| start.elapsed())
}

async fn a_stream_ends_within_5_s_of_its_tokens_revocation_on_another_replica(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let session = app.create_session().await;
    let (info, secret) = app
        .store()
        .create_token(Role::Frontend, Some(TENANT), None)
        .await
        .unwrap();
    let res = open_stream(&app, &secret, &session).await;
    assert_eq!(res.status(), 200);
    let kept = open_stream(&app, &app.frontend, &session).await;
    assert_eq!(kept.status(), 200);
    // Revoked in the database, as another replica does: this one hears nothing of it.
    app.store().revoke_token(&info.id, "u").await.unwrap();
    let took = ends_within(res, Duration::from_secs(5)).await;
    assert!(
        took.is_some(),
        "the revoked token's stream still flows after 5 s"
    );
    assert!(
        ends_within(kept, Duration::from_millis(1500))
            .await
            .is_none(),
        "another token's stream goes on"
    );
    until(|| async { app.state.streams.open(&info.id) == 0 }).await;
}

async fn a_stream_ends_within_5_s_of_its_tokens_expiry(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        Options {
            manual_clock: true,
            ..Options::default()
        },
    )
    .await;
    let session = app.create_session().await;
    let expires_at = app.store().now() + chrono::Duration::seconds(60);
    let (_, secret) = app
        .store()
        .create_token(Role::Frontend, Some(TENANT), Some(expires_at))
        .await
        .unwrap();
    let res = open_stream(&app, &secret, &session).await;
    assert_eq!(res.status(), 200);
    app.advance(chrono::Duration::seconds(61));
    let took = ends_within(res, Duration::from_secs(5)).await;
    assert!(
        took.is_some(),
        "the expired token's stream still flows after 5 s"
    );
}

async fn one_token_may_hold_only_so_many_open_streams(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        Options {
            sse_heartbeat_seconds: Some(1),
            ..Options::default()
        },
    )
    .await;
    let session = app.create_session().await;
    let cap = app.state.config.sse_max_streams_per_token;
    assert_eq!(cap, 16, "the default cap");
    let mut open = Vec::new();
    for _ in 0..cap {
        let res = open_stream(&app, &app.frontend, &session).await;
        assert_eq!(res.status(), 200);
        open.push(res);
    }
    expect_problem(
        open_stream(&app, &app.frontend, &session).await,
        429,
        "stream.too_many",
        None,
    )
    .await;
    let other = app.token(Role::Frontend, Some(TENANT)).await;
    assert_eq!(open_stream(&app, &other, &session).await.status(), 200);

    // A closed stream gives its place back (noticed at its next heartbeat).
    drop(open.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let res = open_stream(&app, &app.frontend, &session).await;
        if res.status() == 200 {
            break;
        }
        assert_eq!(res.status(), 429);
        assert!(
            Instant::now() < deadline,
            "the closed stream's place never came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
