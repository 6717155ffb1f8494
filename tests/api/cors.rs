//! CORS for browser clients on the configured origins: a preflight is answered, the answer
//! names the origin and exposes the headers a client reads; another origin, or a server
//! with no origins configured, gets no CORS header at all.

use reqwest::header::HeaderMap;
use reqwest::{Method, Response};

use crate::common::app::{Options, TestApp};
use crate::on_both_backends;
use sagents::store::Backend;

const ALLOWED: &str = "https://app.example.com";

async fn spawn(backend: Backend) -> TestApp {
    TestApp::spawn_with(
        backend,
        Options {
            cors_origins: vec![ALLOWED.into(), "http://localhost:5173".into()],
            ..Options::default()
        },
    )
    .await
}

async fn preflight(app: &TestApp, path: &str, origin: &str) -> Response {
    app.client
        .request(Method::OPTIONS, app.url(path))
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization,content-type,idempotency-key",
        )
        .send()
        .await
        .unwrap()
}

fn cors_headers(headers: &HeaderMap) -> Vec<String> {
    headers
        .keys()
        .map(|k| k.as_str().to_owned())
        .filter(|k| k.starts_with("access-control-"))
        .collect()
}

fn header<'a>(res: &'a Response, name: &str) -> &'a str {
    res.headers().get(name).map_or("", |v| v.to_str().unwrap())
}

async fn a_preflight_from_an_allowed_origin_is_answered(backend: Backend) {
    let app = spawn(backend).await;
    let res = preflight(&app, "/v1/sessions", ALLOWED).await;
    assert!(res.status().is_success(), "{}", res.status());
    assert_eq!(header(&res, "access-control-allow-origin"), ALLOWED);
    let methods = header(&res, "access-control-allow-methods").to_ascii_uppercase();
    for m in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
        assert!(methods.contains(m), "{methods}");
    }
    let allowed = header(&res, "access-control-allow-headers").to_ascii_lowercase();
    for h in [
        "authorization",
        "content-type",
        "idempotency-key",
        "if-none-match",
        "last-event-id",
        "x-request-id",
    ] {
        assert!(allowed.contains(h), "{allowed}");
    }
    assert!(res.headers().contains_key("x-request-id"));

    let read = app
        .request(Method::GET, "/v1/sessions", &app.frontend)
        .header("origin", ALLOWED)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    assert_eq!(header(&read, "access-control-allow-origin"), ALLOWED);
    let exposed = header(&read, "access-control-expose-headers").to_ascii_lowercase();
    for h in ["etag", "retry-after", "x-request-id"] {
        assert!(exposed.contains(h), "{exposed}");
    }
    app.stop().await;
}

async fn the_snapshot_read_has_the_same_cors_headers_both_ways(backend: Backend) {
    let app = spawn(backend).await;
    let session = app.create_session().await;
    // The plain path is served beside the router; the percent-encoded one by the router.
    let encoded = session.replacen('_', "%5F", 1);
    let mut answers = vec![];
    for id in [&session, &encoded] {
        let res = app
            .request(
                Method::GET,
                &format!("/v1/sessions/{id}/snapshot"),
                &app.frontend,
            )
            .header("origin", ALLOWED)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        answers.push((
            header(&res, "access-control-allow-origin").to_owned(),
            header(&res, "access-control-expose-headers").to_owned(),
        ));
    }
    assert_eq!(answers[0].0, ALLOWED);
    assert_eq!(answers[0], answers[1]);
    app.stop().await;
}

async fn another_origin_gets_no_cors_headers(backend: Backend) {
    let app = spawn(backend).await;
    let res = preflight(&app, "/v1/sessions", "https://evil.example.net").await;
    assert_eq!(res.status(), 405, "an OPTIONS as without CORS");
    assert_eq!(cors_headers(res.headers()), Vec::<String>::new());
    let read = app
        .request(Method::GET, "/v1/sessions", &app.frontend)
        .header("origin", "https://evil.example.net")
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    assert_eq!(cors_headers(read.headers()), Vec::<String>::new());
    app.stop().await;
}

async fn no_origins_configured_means_no_cors_headers(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let res = preflight(&app, "/v1/sessions", ALLOWED).await;
    assert_eq!(res.status(), 405);
    assert_eq!(cors_headers(res.headers()), Vec::<String>::new());
    let session = app.create_session().await;
    let read = app
        .request(
            Method::GET,
            &format!("/v1/sessions/{session}/snapshot"),
            &app.frontend,
        )
        .header("origin", ALLOWED)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    assert_eq!(cors_headers(read.headers()), Vec::<String>::new());
    app.stop().await;
}

on_both_backends!(
    a_preflight_from_an_allowed_origin_is_answered,
    the_snapshot_read_has_the_same_cors_headers_both_ways,
    another_origin_gets_no_cors_headers,
    no_origins_configured_means_no_cors_headers,
);
