//! The HTTP surface: plugin API v3 plus `exec`, bearer auth and fault injection. Every route
//! but `exec` takes the provider's service token (a provider without one is started only with
//! `--insecure-no-auth`); `exec` takes a grant for the sandbox and nothing else.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use sha2::{Digest, Sha256};

use super::doors;
use super::engine::Engine;
use super::error::ApiError;
use super::faults::{FaultAction, FaultPoint};
use super::inventory::InventoryParams;
use super::operations::Answer;
use sagents_plugin_api::grant::looks_like_grant;
use sagents_plugin_api::wire::{
    AttachRequest, ExecRequest, OperationPending, ProvisionRequest, ReleaseRequest, RestoreRequest,
};

#[derive(Clone)]
pub struct AppState {
    pub engine: Arc<Engine>,
    /// SHA-256 of the expected bearer token, if one is required.
    pub token_digest: Option<[u8; 32]>,
}

/// JSON body whose rejections use the provider error shape.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(ApiJson(v)),
            Err(JsonRejection::JsonDataError(e)) => {
                Err(ApiError::invalid("validation.failed", e.body_text()))
            }
            Err(e) => {
                let mut err = ApiError::bad_request(e.body_text());
                err.status = e.status();
                Err(err)
            }
        }
    }
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v3/capabilities", get(capabilities))
        .route("/v3/sandboxes", post(provision).get(list_sandboxes))
        .route("/v3/sandboxes/{id}", get(inspect))
        .route("/v3/sandboxes/{id}/attach", post(attach))
        .route("/v3/sandboxes/{id}/release", post(release))
        .route("/v3/sandboxes/{id}/exec", post(exec))
        .route("/v3/restores", post(restore))
        .route("/v3/checkpoints", get(list_checkpoints))
        .route("/v3/checkpoints/{id}", delete(delete_checkpoint))
        .fallback(|| async { ApiError::not_found("route", "this path").into_response() })
        .method_not_allowed_fallback(|| async {
            let mut e = ApiError::bad_request("this method is not allowed on this path");
            e.status = StatusCode::METHOD_NOT_ALLOWED;
            e.into_response()
        })
        .layer(middleware::from_fn_with_state(state.clone(), auth))
        .with_state(state)
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

impl AppState {
    fn is_service_token(&self, given: &str) -> bool {
        self.token_digest
            .is_some_and(|want| <[u8; 32]>::from(Sha256::digest(given.as_bytes())) == want)
    }
}

/// `POST /v3/sandboxes/{id}/exec`, whose caller is authorized by a grant in the handler.
fn is_exec(req: &Request) -> bool {
    let mut parts = req.uri().path().split('/');
    req.method() == Method::POST
        && matches!(
            (parts.next(), parts.next(), parts.next(), parts.next(), parts.next(), parts.next()),
            (Some(""), Some("v3"), Some("sandboxes"), Some(id), Some("exec"), None) if !id.is_empty()
        )
}

async fn auth(State(s): State<AppState>, req: Request, next: Next) -> Response {
    if s.token_digest.is_some() && !is_exec(&req) {
        match bearer(req.headers()) {
            Some(t) if s.is_service_token(t) => {}
            Some(t) if looks_like_grant(t) => {
                return ApiError::forbidden(
                    "grant.not_accepted",
                    "a grant authorizes exec in its sandbox only; this route takes the provider's service token",
                )
                .into_response()
            }
            _ => return ApiError::unauthorized().into_response(),
        }
    }
    next.run(req).await
}

/// The grant an exec caller presents as its bearer token; the service token is refused.
pub struct GrantBearer(pub String);

impl FromRequestParts<AppState> for GrantBearer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, ApiError> {
        match bearer(&parts.headers) {
            Some(t) if s.is_service_token(t) => Err(ApiError::forbidden(
                "grant.required",
                "the provider's service token does not authorize exec; send the sandbox's grant as the bearer token",
            )),
            Some(t) if !t.is_empty() => Ok(GrantBearer(t.to_owned())),
            _ => Err(ApiError::grant_required()),
        }
    }
}

/// `202 Accepted`: the operation runs on under its key; ask again after `Retry-After`.
fn accepted(p: OperationPending) -> Response {
    let secs = Duration::from_millis(p.retry_after_ms).as_secs().max(1);
    (
        StatusCode::ACCEPTED,
        [(axum::http::header::RETRY_AFTER, secs.to_string())],
        Json(p),
    )
        .into_response()
}

/// A response whose body fails at once: the work is done but the caller never hears of it.
fn dropped() -> Response {
    let stream = futures::stream::once(async {
        Err::<Bytes, std::io::Error>(std::io::Error::other("response dropped by fault injection"))
    });
    Response::new(Body::from_stream(stream))
}

async fn with_faults<F>(s: &AppState, point: FaultPoint, sandbox: Option<&str>, work: F) -> Response
where
    F: std::future::Future<Output = Result<Response, ApiError>>,
{
    let decision = s.engine.faults.decide(point);
    if let Some(delay) = decision.delay {
        tokio::time::sleep(delay).await;
    }
    if decision.hold {
        s.engine.faults.hold().await;
    }
    match decision.action {
        Some(FaultAction::Recoverable) => {
            return ApiError::recoverable(
                "fault.injected",
                format!("injected recoverable fault on {point}"),
            )
            .into_response()
        }
        Some(FaultAction::Refused) => {
            return ApiError::conflict("fault.injected", format!("injected refusal on {point}"))
                .into_response()
        }
        Some(FaultAction::Terminal) => {
            if let Some(id) = sandbox {
                s.engine.mark_lost(id).await;
            }
            return ApiError::terminal(
                "fault.injected",
                format!("injected terminal fault on {point}"),
            )
            .into_response();
        }
        Some(FaultAction::Forget) => {
            if let Some(id) = sandbox {
                s.engine.forget(id).await;
            }
        }
        _ => {}
    }
    let resp = match work.await {
        Err(e) if e.is_crash() => return dropped(),
        done => done.unwrap_or_else(IntoResponse::into_response),
    };
    match decision.action {
        Some(FaultAction::Drop) => dropped(),
        Some(FaultAction::Foreign) => {
            rewrite(resp, "/ref/owner_run_id", "run_foreign".into()).await
        }
        Some(FaultAction::Unconfirmed) => rewrite(resp, "/compute_released", false.into()).await,
        _ => resp,
    }
}

/// The answer with one field replaced (the work itself was done).
async fn rewrite(resp: Response, pointer: &str, value: serde_json::Value) -> Response {
    let (mut parts, body) = resp.into_parts();
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return dropped();
    };
    let Ok(mut json) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    if let Some(field) = json.pointer_mut(pointer) {
        *field = value;
    }
    Response::from_parts(parts, Body::from(json.to_string()))
}

async fn capabilities(State(s): State<AppState>) -> Response {
    with_faults(&s, FaultPoint::Capabilities, None, async {
        Ok(Json(s.engine.capabilities()).into_response())
    })
    .await
}

async fn provision(State(s): State<AppState>, ApiJson(req): ApiJson<ProvisionRequest>) -> Response {
    with_faults(&s, FaultPoint::Provision, None, async {
        doors::check_network(s.engine.cfg.allow_host_network, &req.spec)?;
        let (handle, created) = s.engine.provision(&req).await?;
        let status = if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        Ok((status, Json(handle)).into_response())
    })
    .await
}

async fn inspect(State(s): State<AppState>, Path(id): Path<String>) -> Response {
    with_faults(&s, FaultPoint::Inspect, Some(&id), async {
        Ok(Json(s.engine.inspect(&id).await?).into_response())
    })
    .await
}

async fn attach(
    State(s): State<AppState>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<AttachRequest>,
) -> Response {
    with_faults(&s, FaultPoint::Attach, Some(&id), async {
        Ok(Json(s.engine.attach(&id, &req).await?).into_response())
    })
    .await
}

async fn release(
    State(s): State<AppState>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<ReleaseRequest>,
) -> Response {
    with_faults(&s, FaultPoint::Release, Some(&id), async {
        Ok(match s.engine.release_operation(&id, req).await? {
            Answer::Done(receipt) => Json(receipt).into_response(),
            Answer::Pending(p) => accepted(p),
        })
    })
    .await
}

async fn exec(
    State(s): State<AppState>,
    Path(id): Path<String>,
    GrantBearer(grant): GrantBearer,
    ApiJson(req): ApiJson<ExecRequest>,
) -> Response {
    with_faults(&s, FaultPoint::Exec, Some(&id), async {
        Ok(Json(s.engine.exec(&id, &grant, &req).await?).into_response())
    })
    .await
}

async fn restore(State(s): State<AppState>, ApiJson(req): ApiJson<RestoreRequest>) -> Response {
    with_faults(&s, FaultPoint::Restore, None, async {
        doors::check_network(s.engine.cfg.allow_host_network, &req.spec)?;
        let (handle, created) = match s.engine.restore_operation(req).await? {
            Answer::Done(done) => done,
            Answer::Pending(p) => return Ok(accepted(p)),
        };
        let status = if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        Ok((status, Json(handle)).into_response())
    })
    .await
}

async fn list_sandboxes(
    State(s): State<AppState>,
    InventoryParams(q): InventoryParams,
) -> Response {
    with_faults(&s, FaultPoint::ListSandboxes, None, async {
        Ok(Json(s.engine.list_sandboxes(&q).await?).into_response())
    })
    .await
}

async fn list_checkpoints(
    State(s): State<AppState>,
    InventoryParams(q): InventoryParams,
) -> Response {
    with_faults(&s, FaultPoint::ListCheckpoints, None, async {
        Ok(Json(s.engine.list_checkpoints(&q).await?).into_response())
    })
    .await
}

async fn delete_checkpoint(State(s): State<AppState>, Path(id): Path<String>) -> Response {
    with_faults(&s, FaultPoint::DeleteCheckpoint, None, async {
        Ok(Json(s.engine.delete_checkpoint(&id).await?).into_response())
    })
    .await
}
