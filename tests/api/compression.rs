//! Responses are compressed for a client that asks (`Accept-Encoding: gzip`), the same JSON
//! once decoded, on the snapshot's hot path and through the router alike; never for a client
//! that does not ask, nor for an event stream.

use std::io::Read;

use reqwest::{Method, Response};
use serde_json::Value;

use crate::common::app::TestApp;
use crate::on_both_backends;
use sagents::store::Backend;

async fn get(app: &TestApp, path: &str, accept_encoding: Option<&str>) -> Response {
    let mut req = app.request(Method::GET, path, &app.frontend);
    if let Some(encoding) = accept_encoding {
        req = req.header("accept-encoding", encoding);
    }
    req.send().await.unwrap()
}

fn encoding(res: &Response) -> Option<String> {
    res.headers()
        .get("content-encoding")
        .map(|v| v.to_str().unwrap().to_owned())
}

fn gunzip(bytes: &[u8]) -> Value {
    let mut text = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

async fn gzip_is_given_to_a_client_that_asks(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let session = app.create_session().await;
    // The snapshot through the hot path, the session list through the router.
    for path in [
        format!("/v1/sessions/{session}/snapshot"),
        "/v1/sessions".into(),
    ] {
        let plain = get(&app, &path, None).await;
        assert_eq!(plain.status(), 200);
        assert_eq!(encoding(&plain), None, "{path}");
        let plain: Value = plain.json().await.unwrap();

        let gzipped = get(&app, &path, Some("gzip")).await;
        assert_eq!(gzipped.status(), 200);
        assert_eq!(encoding(&gzipped).as_deref(), Some("gzip"), "{path}");
        assert!(gzipped.headers().contains_key("x-request-id"));
        let body = gzipped.bytes().await.unwrap();
        assert_eq!(gunzip(&body), plain, "{path}");

        let unknown = get(&app, &path, Some("identity")).await;
        assert_eq!(encoding(&unknown), None, "{path}");
    }
    app.stop().await;
}

async fn an_event_stream_is_not_compressed(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let session = app.create_session().await;
    let res = get(
        &app,
        &format!("/v1/sessions/{session}/events/stream"),
        Some("gzip"),
    )
    .await;
    assert_eq!(res.status(), 200);
    let content_type = res.headers()["content-type"].to_str().unwrap();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    assert_eq!(encoding(&res), None);
    drop(res);
    app.stop().await;
}

on_both_backends!(
    gzip_is_given_to_a_client_that_asks,
    an_event_stream_is_not_compressed,
);
