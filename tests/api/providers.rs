//! Registering sandbox providers over HTTP: v3 only, tokens never listed.

use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use crate::common::app::{expect_json, expect_problem, TestApp};
use crate::on_both_backends;
use crate::provider::Harness;
use sagents::store::Backend;

on_both_backends!(
    a_v3_provider_is_registered_and_listed_without_its_token,
    v2_unreachable_and_malformed_providers_are_refused
);

async fn a_v3_provider_is_registered_and_listed_without_its_token(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let local = Harness::with(|c| c.token = Some("provider-secret".into())).await;
    let body =
        json!({"provider_id": "local", "base_url": local.base_url(), "token": "provider-secret"});
    let created = expect_json(
        app.post("/v1/admin/providers", &app.admin, &body).await,
        201,
    )
    .await;
    assert_eq!(created["provider_id"], "local");
    assert_eq!(created["capabilities"]["api_version"], "3");
    let listed = expect_json(app.get("/v1/admin/providers", &app.admin).await, 200).await;
    assert_eq!(listed["providers"].as_array().unwrap().len(), 1);
    assert!(!listed.to_string().contains("provider-secret"), "{listed}");
    expect_problem(
        app.get("/v1/admin/providers", &app.frontend).await,
        403,
        "auth.forbidden",
        None,
    )
    .await;
}

async fn v2_unreachable_and_malformed_providers_are_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let v2 = Router::new().route(
        "/v3/capabilities",
        get(|| async {
            Json(json!({
                "api_version": "2", "capability": "execution.sandbox", "provider_id": "old",
                "provider_version": "2.9", "isolation_level": "vm",
                "supported_release_dispositions": ["terminate"], "supports_snapshot": false,
                "supports_restore": false, "supports_reconnect": false
            }))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, v2).await });
    let old = json!({"provider_id": "old", "base_url": format!("http://{addr}"), "token": "t"});
    expect_problem(
        app.post("/v1/admin/providers", &app.admin, &old).await,
        422,
        "provider.api_version_unsupported",
        None,
    )
    .await;

    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gone = closed.local_addr().unwrap();
    drop(closed);
    let unreachable =
        json!({"provider_id": "gone", "base_url": format!("http://{gone}"), "token": "t"});
    expect_problem(
        app.post("/v1/admin/providers", &app.admin, &unreachable)
            .await,
        502,
        "provider.unreachable",
        None,
    )
    .await;

    let bad_url = json!({"provider_id": "x", "base_url": "file:///etc/passwd", "token": "t"});
    expect_problem(
        app.post("/v1/admin/providers", &app.admin, &bad_url).await,
        422,
        "request.invalid",
        Some("base_url"),
    )
    .await;
    let bad_id = json!({"provider_id": "a b", "base_url": "http://127.0.0.1:1", "token": "t"});
    expect_problem(
        app.post("/v1/admin/providers", &app.admin, &bad_id).await,
        422,
        "request.invalid",
        Some("provider_id"),
    )
    .await;

    let listed = expect_json(app.get("/v1/admin/providers", &app.admin).await, 200).await;
    assert_eq!(listed["providers"], json!([]));
}
