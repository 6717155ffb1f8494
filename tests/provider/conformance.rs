//! The conformance checker passes against the local provider and fails, with the right
//! check names, against a deliberately dishonest provider.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use sagents::providers::conformance::{print_report, run_checks, run_checks_with, CheckResult};
use sagents::providers::grant::GrantSigner;
use sagents::providers::wire::{
    ProvisionRequest, ReleaseRequest, RestoreRequest, SandboxInfo, SandboxRef, SandboxState,
};

use super::*;

fn by_name(results: &[CheckResult]) -> HashMap<String, (bool, String)> {
    results
        .iter()
        .map(|r| (r.name.clone(), (r.passed, r.detail.clone())))
        .collect()
}

#[tokio::test]
async fn the_local_provider_passes_every_check() {
    // As deployed: a service token, and only the public key of the checker's grant signer.
    let signer = GrantSigner::ed25519(&[3; 32]);
    let public = signer.verifier().public_key_text();
    let h = Harness::with(move |c| {
        c.token = Some("conformance-provider-token-0123456789".into());
        c.grant_secret = None;
        c.grant_public_key = public;
    })
    .await;
    let results = run_checks_with(
        &h.base_url(),
        Some("conformance-provider-token-0123456789"),
        Some(signer),
    )
    .await;
    let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "capabilities_v3",
            "disposition_detach",
            "disposition_terminate",
            "disposition_snapshot_and_terminate",
            "release_idempotent",
            "restore_brings_files_back",
            "old_grants_refused_after_terminate",
            "exec_refuses_the_service_token",
            "grants_refused_off_exec",
            "detach_never_releases_compute",
            "unknown_sandbox_not_found",
            "inventory_lists_sandboxes",
            "inventory_pages_without_repeats",
            "inventory_lists_checkpoints",
            "checkpoint_delete_idempotent",
            "restore_refused_after_checkpoint_delete",
            "receipts_consistent",
        ]
    );
    assert!(print_report(&results), "{results:#?}");
    let skipped: Vec<_> = results.iter().filter(|r| r.skipped()).collect();
    assert!(skipped.is_empty(), "{skipped:#?}");
    let r = by_name(&results);
    assert!(
        !r["restore_brings_files_back"].1.starts_with("skipped"),
        "exec was used"
    );
    assert!(!r["old_grants_refused_after_terminate"]
        .1
        .starts_with("skipped"));
}

#[tokio::test]
async fn the_checker_honours_the_provider_token() {
    // A shared-secret provider mints the grants the checker execs with.
    let h = Harness::with(|c| c.token = Some("conformance-provider-token-0123456789".into())).await;
    let results = run_checks(&h.base_url(), Some("conformance-provider-token-0123456789")).await;
    assert!(
        results.iter().all(|r| r.passed && !r.skipped()),
        "{results:#?}"
    );
    let denied = run_checks(&h.base_url(), None).await;
    assert_eq!(denied.len(), 1);
    assert!(!denied[0].passed && denied[0].detail.contains("401"));
}

/// A provider that claims compute is released on detach and never answers `duplicate`.
#[derive(Clone, Default)]
struct Broken {
    sandboxes: Arc<Mutex<HashMap<String, (SandboxRef, SandboxState)>>>,
}

fn new_ref(run: &str, tenant: &str) -> SandboxRef {
    SandboxRef {
        sandbox_id: format!("sbx_{}", uuid::Uuid::now_v7().simple()),
        provider_id: "broken".into(),
        provider_version: "0".into(),
        tenant_id: tenant.into(),
        owner_run_id: run.into(),
        spec_hash: format!("sha256:{}", "a".repeat(64)),
        policy_hash: format!("sha256:{}", "b".repeat(64)),
    }
}

fn handle(r: SandboxRef) -> serde_json::Value {
    serde_json::json!({"ref": r, "state": "ready", "revision": 1})
}

async fn broken_caps() -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "api_version": "3", "capability": "execution.sandbox", "provider_id": "broken",
        "provider_version": "0", "isolation_level": "none",
        "supported_release_dispositions": ["detach", "terminate", "snapshot_and_terminate"],
        "supports_snapshot": true, "supports_restore": true, "supports_reconnect": false
    }))
}

async fn broken_provision(State(b): State<Broken>, Json(req): Json<ProvisionRequest>) -> Response {
    let r = new_ref(&req.owner_run_id, &req.tenant_id);
    b.sandboxes
        .lock()
        .unwrap()
        .insert(r.sandbox_id.clone(), (r.clone(), SandboxState::Ready));
    (StatusCode::CREATED, Json(handle(r))).into_response()
}

async fn broken_inspect(State(b): State<Broken>, Path(id): Path<String>) -> Response {
    match b.sandboxes.lock().unwrap().get(&id) {
        Some((r, s)) => Json(SandboxInfo {
            r#ref: r.clone(),
            state: *s,
            revision: 1,
            attached_clients: 0,
            generation: 1,
        })
        .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn broken_release(
    State(b): State<Broken>,
    Path(id): Path<String>,
    Json(req): Json<ReleaseRequest>,
) -> Response {
    let d = req.request.disposition;
    if let Some(entry) = b.sandboxes.lock().unwrap().get_mut(&id) {
        entry.1 = SandboxState::Terminated;
    }
    let checkpoint = (d == sagents::providers::wire_spec::ReleaseDisposition::SnapshotAndTerminate)
        .then(|| {
            serde_json::json!({"checkpoint_id": format!("ckp_{}", uuid::Uuid::now_v7().simple()),
            "provider_id": "broken", "sandbox_id": id, "size_bytes": 1,
            "created_at": "2026-01-01T00:00:00Z"})
        });
    Json(serde_json::json!({
        "ref": req.request.r#ref, "disposition": d, "state": "terminated",
        "checkpoint": checkpoint, "compute_released": true, "duplicate": false,
        "released_at": chrono::Utc::now()
    }))
    .into_response()
}

async fn broken_restore(State(b): State<Broken>, Json(req): Json<RestoreRequest>) -> Response {
    let r = new_ref(&req.owner_run_id, "t");
    b.sandboxes
        .lock()
        .unwrap()
        .insert(r.sandbox_id.clone(), (r.clone(), SandboxState::Ready));
    (StatusCode::CREATED, Json(handle(r))).into_response()
}

#[tokio::test]
async fn a_dishonest_provider_fails_the_right_checks() {
    let app = Router::new()
        .route("/v3/capabilities", get(broken_caps))
        .route("/v3/sandboxes", post(broken_provision))
        .route("/v3/sandboxes/{id}", get(broken_inspect))
        .route("/v3/sandboxes/{id}/release", post(broken_release))
        .route("/v3/restores", post(broken_restore))
        .with_state(Broken::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let results = run_checks(&format!("http://{addr}"), None).await;
    assert!(!print_report(&results));
    let r = by_name(&results);
    for failing in [
        "disposition_detach",
        "release_idempotent",
        "detach_never_releases_compute",
        "unknown_sandbox_not_found",
        "receipts_consistent",
    ] {
        assert!(!r[failing].0, "{failing} should fail: {results:#?}");
    }
    for passing in [
        "capabilities_v3",
        "disposition_terminate",
        "disposition_snapshot_and_terminate",
        "restore_brings_files_back",
        "old_grants_refused_after_terminate",
    ] {
        assert!(r[passing].0, "{passing} should pass: {results:#?}");
    }
    assert!(r["release_idempotent"].1.contains("duplicate"));
    assert!(
        r["unknown_sandbox_not_found"]
            .1
            .contains("not_a_provider_answer")
            || r["unknown_sandbox_not_found"]
                .1
                .contains("not a provider's error body"),
        "{results:#?}"
    );
    for (check, lacking) in [
        ("inventory_lists_sandboxes", "supports_inventory"),
        ("inventory_pages_without_repeats", "supports_inventory"),
        ("inventory_lists_checkpoints", "supports_inventory"),
        ("checkpoint_delete_idempotent", "supports_checkpoint_delete"),
        (
            "restore_refused_after_checkpoint_delete",
            "supports_checkpoint_delete",
        ),
    ] {
        let result = results.iter().find(|c| c.name == check).unwrap();
        assert!(result.skipped(), "{result:?}");
        assert!(result.detail.contains(lacking), "{result:?}");
    }
    assert!(r["receipts_consistent"].1.contains("detach"));
}

#[tokio::test]
async fn a_v2_provider_fails_capabilities_and_nothing_else_runs() {
    let app = Router::new().route(
        "/v3/capabilities",
        get(|| async {
            Json(serde_json::json!({"api_version": "2", "capability": "execution.sandbox"}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let results = run_checks(&format!("http://{addr}"), None).await;
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].name, "capabilities_v3");
    assert!(
        !results[0].passed && results[0].detail.contains("\"2\""),
        "{results:?}"
    );
}
