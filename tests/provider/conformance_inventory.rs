//! The inventory checks fail, each for its own reason, against a provider that advertises
//! inventory and checkpoint deletion but lies about both.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use sagents::providers::conformance::run_checks;
use sagents::providers::wire::{ProvisionRequest, ReleaseRequest, SandboxRef};

#[derive(Clone, Default)]
struct Liar {
    sandboxes: Arc<Mutex<BTreeMap<String, (SandboxRef, &'static str)>>>,
}

async fn caps() -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "api_version": "3", "capability": "execution.sandbox", "provider_id": "liar",
        "provider_version": "0", "isolation_level": "none",
        "supported_release_dispositions": ["terminate", "snapshot_and_terminate"],
        "supports_snapshot": true, "supports_restore": true, "supports_reconnect": false,
        "supports_inventory": true, "supports_checkpoint_delete": true
    }))
}

fn new_sandbox(l: &Liar, run: &str, tenant: &str) -> Response {
    let r = SandboxRef {
        sandbox_id: format!("sbx_{}", uuid::Uuid::now_v7().simple()),
        provider_id: "liar".into(),
        provider_version: "0".into(),
        tenant_id: tenant.into(),
        owner_run_id: run.into(),
        spec_hash: format!("sha256:{}", "a".repeat(64)),
        policy_hash: format!("sha256:{}", "b".repeat(64)),
    };
    l.sandboxes
        .lock()
        .unwrap()
        .insert(r.sandbox_id.clone(), (r.clone(), "ready"));
    let body = serde_json::json!({"ref": r, "state": "ready", "revision": 1, "generation": 1});
    (StatusCode::CREATED, Json(body)).into_response()
}

async fn provision(State(l): State<Liar>, Json(req): Json<ProvisionRequest>) -> Response {
    new_sandbox(&l, &req.owner_run_id, &req.tenant_id)
}

/// Restores anything, deleted checkpoints included.
async fn restore(State(l): State<Liar>, Json(req): Json<serde_json::Value>) -> Response {
    new_sandbox(&l, req["owner_run_id"].as_str().unwrap_or("r"), "t")
}

async fn inspect(State(l): State<Liar>, Path(id): Path<String>) -> Response {
    match l.sandboxes.lock().unwrap().get(&id) {
        Some((r, state)) => Json(serde_json::json!({
            "ref": r, "state": state, "revision": 1, "attached_clients": 0, "generation": 1
        }))
        .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn release(
    State(l): State<Liar>,
    Path(id): Path<String>,
    Json(req): Json<ReleaseRequest>,
) -> Response {
    if let Some(entry) = l.sandboxes.lock().unwrap().get_mut(&id) {
        entry.1 = "terminated";
    }
    let d = req.request.disposition.as_str();
    let checkpoint = (d == "snapshot_and_terminate").then(|| {
        serde_json::json!({"checkpoint_id": format!("ckp_{}", uuid::Uuid::now_v7().simple()),
            "provider_id": "liar", "sandbox_id": id, "generation": 1, "size_bytes": 1,
            "created_at": "2026-01-01T00:00:00Z"})
    });
    Json(serde_json::json!({
        "ref": req.request.r#ref, "disposition": d, "state": "terminated",
        "checkpoint": checkpoint, "compute_released": true, "duplicate": false,
        "released_at": "2026-01-01T00:00:00Z"
    }))
    .into_response()
}

/// Ignores the limit and names every sandbox for another tenant.
async fn list_sandboxes(State(l): State<Liar>) -> Json<serde_json::Value> {
    let items: Vec<_> = l
        .sandboxes
        .lock()
        .unwrap()
        .values()
        .map(|(r, state)| {
            serde_json::json!({"ref": r, "state": state, "generation": 1,
                "labels": {"owner_run_id": r.owner_run_id, "tenant_id": "elsewhere"}})
        })
        .collect();
    Json(serde_json::json!({ "items": items }))
}

/// Keeps no checkpoint, yet deletes every one it is asked to.
async fn list_checkpoints() -> Json<serde_json::Value> {
    Json(serde_json::json!({"items": []}))
}

async fn delete_checkpoint(Path(id): Path<String>) -> Json<serde_json::Value> {
    Json(serde_json::json!({"checkpoint_id": id, "deleted": true}))
}

#[tokio::test]
async fn a_provider_lying_about_its_inventory_fails_each_inventory_check() {
    let app = Router::new()
        .route("/v3/capabilities", get(caps))
        .route("/v3/sandboxes", post(provision).get(list_sandboxes))
        .route("/v3/sandboxes/{id}", get(inspect))
        .route("/v3/sandboxes/{id}/release", post(release))
        .route("/v3/restores", post(restore))
        .route("/v3/checkpoints", get(list_checkpoints))
        .route("/v3/checkpoints/{id}", delete(delete_checkpoint))
        .with_state(Liar::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let results = run_checks(&format!("http://{addr}"), None).await;
    let detail = |name: &str| {
        let r = results.iter().find(|r| r.name == name).unwrap();
        assert!(
            !r.passed && !r.skipped(),
            "{name} should fail: {results:#?}"
        );
        r.detail.clone()
    };
    assert!(detail("inventory_lists_sandboxes").contains("labels"));
    assert!(detail("inventory_pages_without_repeats").contains("to limit=1"));
    assert!(detail("inventory_lists_checkpoints").contains("not listed"));
    assert!(detail("checkpoint_delete_idempotent").contains("second delete"));
    assert!(detail("restore_refused_after_checkpoint_delete").contains("succeeded"));
    let passing = ["capabilities_v3", "disposition_terminate"];
    for name in passing {
        let r = results.iter().find(|r| r.name == name).unwrap();
        assert!(r.passed, "{r:?}");
    }
}
