//! The snapshot read is served beside the router; a percent-encoded session id still goes
//! through the router (which decodes it to the same id). Both must answer alike, refusals
//! included, and name the same route in the metrics.

use std::collections::HashMap;

use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::Method;
use serde_json::Value;

use crate::common::app::TestApp;
use sagents::store::Backend;

/// What must match between the two paths: status, the headers a client reads, and the body
/// (a problem's `request_id` aside, which differs per request).
#[derive(Debug, PartialEq)]
struct Answer {
    status: u16,
    headers: Vec<(String, Option<String>)>,
    body: Value,
}

async fn answer(app: &TestApp, path: &str, token: Option<&str>, headers: HeaderMap) -> Answer {
    let req = match token {
        Some(token) => app.request(Method::GET, path, token),
        None => reqwest::Client::new().get(app.url(path)),
    };
    let res = req.headers(headers).send().await.unwrap();
    let status = res.status().as_u16();
    let headers = ["content-type", "etag", "cache-control", "content-length"]
        .into_iter()
        .map(|name| {
            let value = res
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned());
            (name.to_owned(), value)
        })
        .collect();
    assert!(res.headers().contains_key("x-request-id"));
    let text = res.text().await.unwrap();
    let mut body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if let Some(problem) = body.as_object_mut() {
        problem.remove("request_id");
    }
    Answer {
        status,
        headers,
        body,
    }
}

/// `sagents_http_requests_total` of the snapshot route, by status.
async fn snapshot_requests(app: &TestApp) -> HashMap<String, u64> {
    let res = app
        .request(Method::GET, "/metrics", &app.admin)
        .send()
        .await
        .unwrap();
    let text = res.text().await.unwrap();
    let prefix = "sagents_http_requests_total{method=\"GET\",route=\"/v1/sessions/{session_id}/snapshot\",status=\"";
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .filter_map(|l| l.split_once("\"} "))
        .map(|(status, n)| (status.to_owned(), n.trim().parse().unwrap()))
        .collect()
}

/// `ses_…` with its first letter percent-encoded: the same session, but not a plain path.
fn encoded(session_id: &str) -> String {
    format!("%{:02X}{}", session_id.as_bytes()[0], &session_id[1..])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_snapshot_read_answers_beside_the_router_as_through_it() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let suspended = app.suspended_with_interaction().await;
    let (etag, _) = app.snapshot(&suspended.session_id).await;
    let unknown = "ses_00000000000000000000000000000000";
    let before = snapshot_requests(&app).await;

    let with = |name: &'static str, value: &[u8]| {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_bytes(value).unwrap());
        h
    };
    let cases: Vec<(&str, &str, Option<&str>, HeaderMap)> = vec![
        (
            "a snapshot",
            &suspended.session_id,
            Some(&app.frontend),
            HeaderMap::new(),
        ),
        (
            "not modified",
            &suspended.session_id,
            Some(&app.frontend),
            with("if-none-match", etag.as_bytes()),
        ),
        (
            "a stale etag",
            &suspended.session_id,
            Some(&app.frontend),
            with("if-none-match", b"\"0\""),
        ),
        ("no token", &suspended.session_id, None, HeaderMap::new()),
        (
            "another role",
            &suspended.session_id,
            Some(&app.runtime),
            HeaderMap::new(),
        ),
        (
            "an unknown session",
            unknown,
            Some(&app.frontend),
            HeaderMap::new(),
        ),
        (
            "a malformed id",
            "nope",
            Some(&app.frontend),
            HeaderMap::new(),
        ),
        (
            "a non-ASCII etag",
            &suspended.session_id,
            Some(&app.frontend),
            with("if-none-match", b"\"\xff\""),
        ),
    ];
    for (what, id, token, headers) in cases {
        let direct = answer(
            &app,
            &format!("/v1/sessions/{id}/snapshot"),
            token,
            headers.clone(),
        )
        .await;
        let routed = answer(
            &app,
            &format!("/v1/sessions/{}/snapshot", encoded(id)),
            token,
            headers,
        )
        .await;
        assert_eq!(direct, routed, "{what}");
    }
    for query in [
        "?wait_seconds=9999",
        "?wait_seconds=soon",
        "?wait_seconds=0",
    ] {
        let direct = answer(
            &app,
            &format!("/v1/sessions/{}/snapshot{query}", suspended.session_id),
            Some(&app.frontend),
            HeaderMap::new(),
        )
        .await;
        let routed = answer(
            &app,
            &format!(
                "/v1/sessions/{}/snapshot{query}",
                encoded(&suspended.session_id)
            ),
            Some(&app.frontend),
            HeaderMap::new(),
        )
        .await;
        assert_eq!(direct, routed, "{query}");
    }

    let after = snapshot_requests(&app).await;
    let asked = |status: &str| {
        after.get(status).copied().unwrap_or(0) - before.get(status).copied().unwrap_or(0)
    };
    // Every case was asked twice, once on each path.
    for (status, cases) in [
        ("200", 3),
        ("304", 1),
        ("400", 1),
        ("401", 1),
        ("403", 1),
        ("404", 2),
        ("422", 2),
    ] {
        assert_eq!(asked(status), 2 * cases, "status {status}: {after:?}");
    }
    app.stop().await;
}
