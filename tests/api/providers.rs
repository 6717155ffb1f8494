//! Registering sandbox providers over HTTP: v3 only, tokens never listed.

use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use crate::common::app::{expect_json, expect_problem, TestApp};
use crate::common::db::column_text;
use crate::on_both_backends;
use crate::provider::Harness;
use sagents::store::Backend;

on_both_backends!(
    a_v3_provider_is_registered_and_listed_without_its_token,
    v2_unreachable_and_malformed_providers_are_refused,
    a_run_needing_a_disposition_its_provider_lacks_is_refused_at_creation
);

/// A v3 provider that offers only `terminate` and `snapshot_and_terminate` (no detach).
async fn provider_without_detach() -> String {
    let router = Router::new().route(
        "/v3/capabilities",
        get(|| async {
            Json(json!({
                "api_version": "3", "capability": "execution.sandbox", "provider_id": "nodetach",
                "provider_version": "1.0", "isolation_level": "vm",
                "supported_release_dispositions": ["terminate", "snapshot_and_terminate"],
                "supports_snapshot": true, "supports_restore": true, "supports_reconnect": false
            }))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}")
}

async fn a_run_needing_a_disposition_its_provider_lacks_is_refused_at_creation(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let base_url = provider_without_detach().await;
    let body = json!({"provider_id": "nodetach", "base_url": base_url, "token": "t"});
    expect_json(
        app.post("/v1/admin/providers", &app.admin, &body).await,
        201,
    )
    .await;
    let session = app.create_session().await;
    let hash = |c: char| format!("sha256:{}", c.to_string().repeat(64));
    let run = |lifecycle: serde_json::Value| {
        json!({
            "resolved_spec_hash": hash('c'),
            "input": {},
            "sandbox_spec": {
                "spec_version": "sagents.sandbox-spec/v3", "provider_id": "nodetach",
                "spec_hash": hash('a'), "policy_hash": hash('b'),
                "workspace_mode": "isolated", "lifecycle": lifecycle,
            },
        })
    };
    let path = format!("/v1/sessions/{session}/runs");
    // A policy hold detaches by default, which this provider cannot do.
    let problem = expect_problem(
        app.post(&path, &app.runtime, &run(json!({}))).await,
        422,
        "sandbox.capability_missing",
        Some("sandbox_spec.lifecycle.unsafe_pause_behavior"),
    )
    .await;
    assert!(problem.to_string().contains("detach"), "{problem}");
    let (_, snapshot) = app.snapshot(&session).await;
    assert_eq!(snapshot["runs"], json!([]), "a refused run is not created");
    let ok = run(json!({"unsafe_pause_behavior": "terminate"}));
    let created = expect_json(app.post(&path, &app.runtime, &ok).await, 201).await;
    assert_eq!(created["state"], "queued");
}

async fn a_v3_provider_is_registered_and_listed_without_its_token(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let local =
        Harness::with(|c| c.token = Some("provider-secret-0123456789abcdef0123".into())).await;
    let body = json!({"provider_id": "local", "base_url": local.base_url(), "token": "provider-secret-0123456789abcdef0123"});
    let created = expect_json(
        app.post("/v1/admin/providers", &app.admin, &body).await,
        201,
    )
    .await;
    assert_eq!(created["provider_id"], "local");
    assert_eq!(created["capabilities"]["api_version"], "3");
    let listed = expect_json(app.get("/v1/admin/providers", &app.admin).await, 200).await;
    assert_eq!(listed["providers"].as_array().unwrap().len(), 1);
    assert!(
        !listed
            .to_string()
            .contains("provider-secret-0123456789abcdef0123"),
        "{listed}"
    );
    let at_rest = column_text(&app.database_url, "providers", "token").await;
    assert_eq!(at_rest.len(), 1);
    assert!(at_rest[0].starts_with("sealed:v1:"), "{at_rest:?}");
    assert!(
        !at_rest[0].contains("provider-secret-0123456789abcdef0123"),
        "sealed at rest"
    );
    let record = app.store().get_provider("local").await.unwrap().unwrap();
    assert_eq!(
        record.token, "provider-secret-0123456789abcdef0123",
        "opened for use"
    );
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
