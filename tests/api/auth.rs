//! Tokens, roles, tenants, open paths, request ids and metrics.

use reqwest::Method;
use serde_json::json;

use crate::common::app::{expect_json, expect_problem, hash, TestApp};
use crate::common::db::column_text;
use crate::on_both_backends;
use sagents::domain::token::Role;
use sagents::store::Backend;

on_both_backends!(
    tokens_and_roles,
    metrics_tokens_read_metrics_only,
    tokens_expire,
    tenants_never_see_each_other,
    open_paths_request_ids_and_metrics
);

async fn tokens_and_roles(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let unauthenticated = app
        .client
        .post(app.url("/v1/sessions"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthenticated.headers()["www-authenticate"], "Bearer");
    expect_problem(unauthenticated, 401, "auth.unauthorized", None).await;
    for header in [
        "Bearer sag_nope",
        "Basic dXNlcjpwdw==",
        "Bearer",
        "sag_nope",
    ] {
        let res = app
            .client
            .get(app.url("/v1/admin/tokens"))
            .header("authorization", header)
            .send()
            .await
            .unwrap();
        expect_problem(res, 401, "auth.unauthorized", None).await;
    }

    let session_id = app.create_session().await;
    let wrong_role = [
        (Method::POST, "/v1/sessions".to_owned(), &app.runtime),
        (
            Method::GET,
            format!("/v1/sessions/{session_id}/snapshot"),
            &app.admin,
        ),
        (
            Method::POST,
            format!("/v1/sessions/{session_id}/runs"),
            &app.frontend,
        ),
        (Method::POST, "/v1/runtime/claims".to_owned(), &app.frontend),
        (Method::GET, "/v1/admin/tokens".to_owned(), &app.runtime),
        (Method::GET, "/metrics".to_owned(), &app.frontend),
    ];
    for (method, path, token) in wrong_role {
        let res = app
            .request(method, &path, token)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        expect_problem(res, 403, "auth.forbidden", None).await;
    }

    let created = app
        .post_ok(
            "/v1/admin/tokens",
            &app.admin,
            &json!({"role": "frontend"}),
            201,
        )
        .await;
    assert_eq!(created["tenant_id"], "default");
    let secret = created["secret"].as_str().unwrap().to_owned();
    let token_id = created["id"].as_str().unwrap().to_owned();
    app.post_ok("/v1/sessions", &secret, &json!({}), 201).await;

    // A replay never shows the secret again: it names the token that was created.
    let keyed = || {
        app.request(Method::POST, "/v1/admin/tokens", &app.admin)
            .header("idempotency-key", "mint-1")
            .json(&json!({"role": "runtime", "tenant": "acme"}))
    };
    let first = expect_json(keyed().send().await.unwrap(), 201).await;
    let again = keyed().send().await.unwrap();
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let problem = expect_problem(again, 409, "token.already_created", None).await;
    assert!(problem["detail"]
        .as_str()
        .unwrap()
        .contains(first["id"].as_str().unwrap()));
    assert!(!problem.to_string().contains("sag_"));
    let stored = column_text(&app.database_url, "idempotency_keys", "response_body").await;
    assert!(
        !stored
            .iter()
            .any(|body| body.contains(first["secret"].as_str().unwrap())),
        "no secret is stored with the idempotent response"
    );

    let listed = app.get_ok("/v1/admin/tokens", &app.admin).await;
    assert!(listed["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["id"] == token_id.as_str()));
    assert!(
        !listed.to_string().contains("sag_"),
        "secrets are never listed"
    );

    let revoked = app
        .request(
            Method::DELETE,
            &format!("/v1/admin/tokens/{token_id}"),
            &app.admin,
        )
        .send()
        .await
        .unwrap();
    assert!(expect_json(revoked, 200).await["revoked_at"].is_string());
    let after = app.post("/v1/sessions", &secret, &json!({})).await;
    expect_problem(after, 401, "auth.unauthorized", None).await;

    let admin_tenant = app
        .post(
            "/v1/admin/tokens",
            &app.admin,
            &json!({"role": "admin", "tenant": "acme"}),
        )
        .await;
    expect_problem(admin_tenant, 422, "request.invalid", Some("tenant")).await;
    let unknown = app
        .request(
            Method::DELETE,
            "/v1/admin/tokens/tok_0192f0c1a2b37c4d8e9f0a1b2c3d4e5f",
            &app.admin,
        )
        .send()
        .await
        .unwrap();
    expect_problem(unknown, 404, "token.not_found", None).await;
    app.stop().await;
}

async fn tenants_never_see_each_other(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let s = app.suspended_with_interaction().await;
    let queued_session = app.create_session().await;
    app.create_run(&queued_session).await;
    let (etag, before) = app.snapshot(&s.session_id).await;

    let frontend = app.token(Role::Frontend, Some("acme")).await;
    let runtime = app.token(Role::Runtime, Some("acme")).await;
    let hidden = [
        (
            Method::GET,
            format!("/v1/sessions/{}/snapshot", s.session_id),
            &frontend,
            json!(null),
            "session.not_found",
        ),
        (
            Method::GET,
            format!("/v1/sessions/{}/events", s.session_id),
            &frontend,
            json!(null),
            "session.not_found",
        ),
        (
            Method::POST,
            s.reply_path(),
            &frontend,
            json!({"decision": "approve"}),
            "",
        ),
        (
            Method::POST,
            format!("/v1/sessions/{}/runs/{}/cancel", s.session_id, s.run_id),
            &frontend,
            json!({}),
            "",
        ),
        (
            Method::POST,
            format!("/v1/sessions/{}/runs", s.session_id),
            &runtime,
            json!({"resolved_spec_hash": hash('a')}),
            "session.not_found",
        ),
        (
            Method::POST,
            format!("/v1/runs/{}/fail", s.run_id),
            &runtime,
            json!({"fencing_token": 1, "error": {"code": "x"}}),
            "run.not_found",
        ),
    ];
    for (method, path, token, body, code) in hidden {
        let mut req = app.request(method, &path, token);
        if !body.is_null() {
            req = req.json(&body);
        }
        let res = req.send().await.unwrap();
        let problem = expect_json(res, 404).await;
        let got = problem["code"].as_str().unwrap();
        assert!(got.ends_with(".not_found"), "{path}: {problem}");
        if !code.is_empty() {
            assert_eq!(got, code, "{path}");
        }
    }
    let claims = app
        .post_ok(
            "/v1/runtime/claims",
            &runtime,
            &json!({"worker_id": "acme-w"}),
            200,
        )
        .await;
    assert_eq!(
        claims["claims"],
        json!([]),
        "another tenant's work is never offered"
    );
    assert_eq!(app.snapshot(&s.session_id).await, (etag, before));
    app.stop().await;
}

async fn open_paths_request_ids_and_metrics(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for path in ["/healthz", "/readyz", "/openapi.json"] {
        let res = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        assert!(res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"));
    }
    let spec: serde_json::Value = app
        .client
        .get(app.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(spec["paths"]["/v1/sessions"].is_object());
    let docs = app.client.get(app.url("/docs/")).send().await.unwrap();
    assert_eq!(docs.status(), 200);
    assert!(docs.text().await.unwrap().contains("swagger"));

    let res = app
        .client
        .get(app.url("/v1/sessions/nope/snapshot"))
        .bearer_auth(&app.frontend)
        .header("x-request-id", "client-id-42")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["x-request-id"], "client-id-42");
    let problem = expect_problem(res, 404, "session.not_found", None).await;
    assert_eq!(problem["request_id"], "client-id-42");
    let res = app
        .client
        .get(app.url("/healthz"))
        .header("x-request-id", "not sane <>")
        .send()
        .await
        .unwrap();
    let generated = res.headers()["x-request-id"].to_str().unwrap();
    assert!(!generated.is_empty() && generated != "not sane <>");

    let missing = app.get("/v1/nothing-here", &app.frontend).await;
    expect_problem(missing, 404, "route.not_found", None).await;
    let wrong_method = app
        .request(Method::DELETE, "/v1/sessions", &app.frontend)
        .send()
        .await
        .unwrap();
    expect_problem(wrong_method, 405, "request.method_not_allowed", None).await;

    let metrics = app
        .request(Method::GET, "/metrics", &app.admin)
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);
    assert!(metrics.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let text = metrics.text().await.unwrap();
    assert!(text.contains(
        "sagents_http_requests_total{method=\"GET\",route=\"/v1/sessions/{session_id}/snapshot\",status=\"404\"} 1"
    ), "{text}");
    assert!(text.contains("sagents_http_request_duration_seconds_bucket{method=\"GET\",route=\"/healthz\",le=\"+Inf\"} 2"));
    assert!(text.contains("sagents_lease_claims_total"));
    app.stop().await;
}

async fn metrics_tokens_read_metrics_only(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let created = app
        .post_ok(
            "/v1/admin/tokens",
            &app.admin,
            &json!({"role": "metrics"}),
            201,
        )
        .await;
    assert_eq!(created["tenant_id"], serde_json::Value::Null);
    let scraper = created["secret"].as_str().unwrap().to_owned();
    let prometheus = app.get("/metrics", &scraper).await;
    assert_eq!(prometheus.status(), 200);
    assert!(prometheus.text().await.unwrap().contains("sagents_"));
    app.get_ok("/v1/admin/lifecycle/metrics", &scraper).await;
    for (method, path) in [
        (Method::GET, "/v1/admin/tokens"),
        (Method::GET, "/v1/admin/providers"),
        (Method::POST, "/v1/sessions"),
        (Method::GET, "/v1/interactions"),
    ] {
        let res = app
            .request(method, path, &scraper)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        expect_problem(res, 403, "auth.forbidden", None).await;
    }
    let bound = app
        .post(
            "/v1/admin/tokens",
            &app.admin,
            &json!({"role": "metrics", "tenant": "acme"}),
        )
        .await;
    expect_problem(bound, 422, "request.invalid", Some("tenant")).await;
    app.stop().await;
}

async fn tokens_expire(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        crate::common::app::Options {
            manual_clock: true,
            ..Default::default()
        },
    )
    .await;
    let created = app
        .post_ok(
            "/v1/admin/tokens",
            &app.admin,
            &json!({"role": "frontend", "ttl_seconds": 60}),
            201,
        )
        .await;
    assert!(created["expires_at"].is_string(), "{created}");
    let secret = created["secret"].as_str().unwrap().to_owned();
    app.post_ok("/v1/sessions", &secret, &json!({}), 201).await;
    app.advance(chrono::Duration::seconds(61));
    let expired = app.post("/v1/sessions", &secret, &json!({})).await;
    expect_problem(expired, 401, "auth.unauthorized", None).await;
    for ttl in [json!(0), json!(-5), json!(315_360_001)] {
        let res = app
            .post(
                "/v1/admin/tokens",
                &app.admin,
                &json!({"role": "frontend", "ttl_seconds": ttl}),
            )
            .await;
        expect_problem(res, 422, "request.invalid", Some("ttl_seconds")).await;
    }
    app.stop().await;
}
