//! A provider that answers every plugin API v3 call at once, over real HTTP on loopback, and
//! records the instant the first release request for each run arrives.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::Utc;
use sagents_plugin_api::spec::ReleaseDisposition;
use sagents_plugin_api::wire::{
    AttachRequest, Capabilities, CheckpointRef, ProviderError, ProvisionRequest, ReleaseRequest,
    RestoreRequest, SandboxHandle, SandboxInfo, SandboxRef, SandboxReleaseReceipt, SandboxState,
    API_VERSION_V3, CAPABILITY_SANDBOX,
};
use sha2::{Digest, Sha256};
use tokio::sync::{oneshot, watch};

pub const PROVIDER_ID: &str = "noop";
const VERSION: &str = "1";

struct Sandbox {
    r#ref: SandboxRef,
    state: SandboxState,
    revision: u64,
    generation: u64,
}

impl Sandbox {
    fn handle(&self) -> SandboxHandle {
        SandboxHandle {
            r#ref: self.r#ref.clone(),
            state: self.state,
            revision: self.revision,
            generation: self.generation,
            grant: None,
        }
    }
}

#[derive(Default)]
struct Inner {
    sandboxes: HashMap<String, Sandbox>,
    receipts: HashMap<(String, String), SandboxReleaseReceipt>,
    arrivals: HashMap<String, Instant>,
}

pub struct Noop {
    inner: Mutex<Inner>,
    arrived: watch::Sender<usize>,
    release_calls: AtomicUsize,
}

type Refusal = (StatusCode, Json<ProviderError>);

fn refuse(status: StatusCode, code: &str, message: String) -> Refusal {
    let error = ProviderError {
        code: code.into(),
        category: "invalid_request".into(),
        message,
        retryable: false,
    };
    (status, Json(error))
}

/// A sandbox id derived from the idempotency key, so a replayed provision or restore names
/// the same sandbox.
fn sandbox_id(key: &str) -> String {
    format!("nop-{}", &hex::encode(Sha256::digest(key.as_bytes()))[..32])
}

pub fn capabilities() -> Capabilities {
    Capabilities {
        api_version: API_VERSION_V3.into(),
        capability: CAPABILITY_SANDBOX.into(),
        provider_id: PROVIDER_ID.into(),
        provider_version: VERSION.into(),
        isolation_level: "none".into(),
        supported_release_dispositions: vec![
            ReleaseDisposition::Detach,
            ReleaseDisposition::Terminate,
            ReleaseDisposition::SnapshotAndTerminate,
        ],
        supports_snapshot: true,
        supports_restore: true,
        supports_reconnect: true,
        max_lifetime_seconds: None,
        supports_exec: false,
        supports_inventory: false,
        supports_checkpoint_delete: false,
        unauthenticated: false,
        bounded_resources: Vec::new(),
    }
}

impl Noop {
    /// When the first release request naming `run_id` as owner arrived.
    pub fn arrival(&self, run_id: &str) -> Option<Instant> {
        self.lock().arrivals.get(run_id).copied()
    }

    /// Runs for which a release request has arrived.
    pub fn arrivals(&self) -> usize {
        *self.arrived.borrow()
    }

    /// Release requests received, retries and duplicates included.
    pub fn release_calls(&self) -> usize {
        self.release_calls.load(Ordering::Relaxed)
    }

    /// Waits until release requests have arrived for `n` distinct runs in all; false on timeout.
    pub async fn wait_arrivals(&self, n: usize, timeout: Duration) -> bool {
        let mut rx = self.arrived.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|c| *c >= n))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bind(&self, r#ref: SandboxRef) -> SandboxHandle {
        let mut inner = self.lock();
        let id = r#ref.sandbox_id.clone();
        inner
            .sandboxes
            .entry(id)
            .or_insert(Sandbox {
                r#ref,
                state: SandboxState::Ready,
                revision: 1,
                generation: 1,
            })
            .handle()
    }
}

async fn caps() -> Json<Capabilities> {
    Json(capabilities())
}

async fn provision(
    State(s): State<Arc<Noop>>,
    Json(req): Json<ProvisionRequest>,
) -> (StatusCode, Json<SandboxHandle>) {
    let r#ref = SandboxRef {
        sandbox_id: sandbox_id(&req.idempotency_key),
        provider_id: PROVIDER_ID.into(),
        provider_version: VERSION.into(),
        tenant_id: req.tenant_id,
        owner_run_id: req.owner_run_id,
        spec_hash: req.spec.spec_hash,
        policy_hash: req.spec.policy_hash,
    };
    (StatusCode::CREATED, Json(s.bind(r#ref)))
}

async fn restore(
    State(s): State<Arc<Noop>>,
    Json(req): Json<RestoreRequest>,
) -> Result<Json<SandboxHandle>, Refusal> {
    let tenant_id = s
        .lock()
        .sandboxes
        .get(&req.checkpoint.sandbox_id)
        .map(|b| b.r#ref.tenant_id.clone())
        .ok_or_else(|| {
            refuse(
                StatusCode::NOT_FOUND,
                "checkpoint.not_found",
                format!("no checkpoint `{}`", req.checkpoint.checkpoint_id),
            )
        })?;
    let r#ref = SandboxRef {
        sandbox_id: sandbox_id(&req.idempotency_key),
        provider_id: PROVIDER_ID.into(),
        provider_version: VERSION.into(),
        tenant_id,
        owner_run_id: req.owner_run_id,
        spec_hash: req.spec.spec_hash,
        policy_hash: req.spec.policy_hash,
    };
    Ok(Json(s.bind(r#ref)))
}

fn unknown(id: &str) -> Refusal {
    refuse(
        StatusCode::NOT_FOUND,
        "sandbox.not_found",
        format!("no sandbox `{id}`"),
    )
}

async fn inspect(
    State(s): State<Arc<Noop>>,
    Path(id): Path<String>,
) -> Result<Json<SandboxInfo>, Refusal> {
    let inner = s.lock();
    let b = inner.sandboxes.get(&id).ok_or_else(|| unknown(&id))?;
    Ok(Json(SandboxInfo {
        r#ref: b.r#ref.clone(),
        state: b.state,
        revision: b.revision,
        attached_clients: 0,
        generation: b.generation,
    }))
}

async fn attach(
    State(s): State<Arc<Noop>>,
    Path(id): Path<String>,
    Json(_req): Json<AttachRequest>,
) -> Result<Json<SandboxHandle>, Refusal> {
    let mut inner = s.lock();
    let b = inner.sandboxes.get_mut(&id).ok_or_else(|| unknown(&id))?;
    if !b.state.holds_compute() {
        return Err(refuse(
            StatusCode::CONFLICT,
            "sandbox.terminated",
            format!("sandbox `{id}` is terminated"),
        ));
    }
    b.state = SandboxState::Ready;
    b.revision += 1;
    Ok(Json(b.handle()))
}

async fn release(
    State(s): State<Arc<Noop>>,
    Path(id): Path<String>,
    Json(req): Json<ReleaseRequest>,
) -> Result<Json<SandboxReleaseReceipt>, Refusal> {
    let arrived = Instant::now();
    s.release_calls.fetch_add(1, Ordering::Relaxed);
    let spec = req.request;
    if spec.r#ref.sandbox_id != id {
        return Err(refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            "request.ref_mismatch",
            "the ref names another sandbox than the path".into(),
        ));
    }
    let mut inner = s.lock();
    if !inner.arrivals.contains_key(&spec.r#ref.owner_run_id) {
        inner
            .arrivals
            .insert(spec.r#ref.owner_run_id.clone(), arrived);
        s.arrived.send_modify(|c| *c += 1);
    }
    let key = (id.clone(), spec.idempotency_key.clone());
    if let Some(done) = inner.receipts.get(&key) {
        let mut again = done.clone();
        again.duplicate = true;
        return Ok(Json(again));
    }
    let b = inner.sandboxes.get_mut(&id).ok_or_else(|| unknown(&id))?;
    let now = Utc::now();
    let released = spec.disposition != ReleaseDisposition::Detach;
    b.state = if released {
        SandboxState::Terminated
    } else {
        SandboxState::Suspended
    };
    b.revision += 1;
    let checkpoint =
        (spec.disposition == ReleaseDisposition::SnapshotAndTerminate).then(|| CheckpointRef {
            checkpoint_id: format!("ckp-{id}-{}", b.generation),
            provider_id: PROVIDER_ID.into(),
            sandbox_id: id.clone(),
            generation: b.generation,
            size_bytes: 0,
            digest: None,
            created_at: now,
        });
    let receipt = SandboxReleaseReceipt {
        r#ref: b.r#ref.clone(),
        disposition: spec.disposition,
        state: b.state,
        checkpoint,
        compute_released: released,
        duplicate: false,
        released_at: now,
    };
    inner.receipts.insert(key, receipt.clone());
    Ok(Json(receipt))
}

/// The no-op provider serving on an ephemeral loopback port until dropped.
pub struct NoopServer {
    pub base_url: String,
    pub noop: Arc<Noop>,
    _stop: oneshot::Sender<()>,
}

pub async fn serve() -> std::io::Result<NoopServer> {
    let noop = Arc::new(Noop {
        inner: Mutex::new(Inner::default()),
        arrived: watch::channel(0).0,
        release_calls: AtomicUsize::new(0),
    });
    let app = Router::new()
        .route("/v3/capabilities", get(caps))
        .route("/v3/sandboxes", post(provision))
        .route("/v3/sandboxes/{id}", get(inspect))
        .route("/v3/sandboxes/{id}/attach", post(attach))
        .route("/v3/sandboxes/{id}/release", post(release))
        .route("/v3/restores", post(restore))
        .with_state(noop.clone());
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await;
        if let Err(e) = served {
            eprintln!("the no-op provider stopped: {e}");
        }
    });
    Ok(NoopServer {
        base_url: format!("http://{addr}"),
        noop,
        _stop: stop,
    })
}
