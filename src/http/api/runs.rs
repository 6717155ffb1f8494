//! Runs: created by the runtime, cancelled or resumed by the frontend, and moved through
//! their states by the runtime worker holding the lease.

use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{Frontend, Runtime};
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, PathIds};
use super::state::AppState;
use crate::domain::commands::{CompleteRun, ConfirmResumed, CreateRun, FailRun, SuspendRun};
use crate::domain::run::{Run, RunReadBack};
use crate::domain::tenant::NetworkNotAllowed;
use crate::domain::{RunId, SessionId};
use crate::service::runs::{self, CreateRunError};
use crate::store::IdempotencyClaim;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_run))
        .routes(routes!(read_back_run))
        .routes(routes!(cancel_run))
        .routes(routes!(resume_run))
        .routes(routes!(suspend_run))
        .routes(routes!(confirm_resumed))
        .routes(routes!(complete_run))
        .routes(routes!(fail_run))
}

#[utoipa::path(
    post,
    path = "/v1/sessions/{session_id}/runs",
    tag = "runs",
    params(("session_id" = SessionId, Path, description = "The session")),
    request_body = CreateRun,
    responses(
        (status = 201, description = "The run, `queued`", body = Run),
        (status = 404, description = "`session.not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`sandbox.spec_unsupported`: the sandbox spec is not `sagents.sandbox-spec/v3`; `sandbox.capability_missing`: the provider does not offer a disposition the spec's pauses or end need; `sandbox.network_not_allowed`: `resources.network: host` while the tenant's policy does not allow host networking; `request.invalid`: e.g. a `parent_run_id` neither of this session nor of its parent session, `sandbox_spec.host_workspace` without `workspace_mode: active_workspace` (or missing with it), a `safe_pause_behavior` that keeps compute", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["runtime"]))
)]
async fn create_run(
    State(state): State<AppState>,
    auth: Runtime,
    ids: PathIds,
    key: Option<Extension<IdempotencyClaim>>,
    ApiJson(cmd): ApiJson<CreateRun>,
) -> Result<(StatusCode, Json<Run>), ApiError> {
    let session_id: SessionId = ids.get("session_id")?;
    let key = key.as_ref().map(|Extension(k)| k);
    let run = runs::create_run(&state.store, auth.tenant()?, &session_id, &cmd, key)
        .await
        .map_err(|e| match e {
            CreateRunError::CapabilityMissing { field, message } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "sandbox.capability_missing",
                message.clone(),
            )
            .with_field(field, message),
            CreateRunError::NetworkNotAllowed(e) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "sandbox.network_not_allowed",
                e.to_string(),
            )
            .with_field(
                NetworkNotAllowed::FIELD,
                "`host` needs the tenant's allowance (`allow_host_network`)",
            ),
            CreateRunError::Store(e) => e.into(),
        })?;
    Ok((StatusCode::CREATED, Json(run)))
}

#[utoipa::path(
    get,
    path = "/v1/runs/{run_id}",
    tag = "runtime",
    params(("run_id" = RunId, Path, description = "A run of the caller's tenant")),
    responses(
        (status = 200, description = "The run, the worker holding its live lease (if any) and its latest suspension: how a runtime that lost an answer learns whether its write landed", body = RunReadBack),
        (status = 404, description = "`run.not_found`: no such run in the caller's tenant", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["runtime"]))
)]
async fn read_back_run(
    State(state): State<AppState>,
    auth: Runtime,
    ids: PathIds,
) -> Result<Json<RunReadBack>, ApiError> {
    let run_id: RunId = ids.get("run_id")?;
    Ok(Json(
        state.store.read_back_run(auth.scope(), &run_id).await?,
    ))
}

#[utoipa::path(
    post,
    path = "/v1/sessions/{session_id}/runs/{run_id}/cancel",
    tag = "runs",
    params(
        ("session_id" = SessionId, Path, description = "The session"),
        ("run_id" = RunId, Path, description = "A run of the session"),
    ),
    responses(
        (status = 200, description = "The run, `cancelled`; its pending interactions are cancelled", body = Run),
        (status = 404, description = "`session.not_found` or `run.not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`run.terminal`: the run already ended", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["frontend"]))
)]
async fn cancel_run(
    State(state): State<AppState>,
    auth: Frontend,
    ids: PathIds,
) -> Result<Json<Run>, ApiError> {
    let session_id: SessionId = ids.get("session_id")?;
    let run_id: RunId = ids.get("run_id")?;
    let run = state
        .store
        .cancel_run(auth.scope(), &session_id, &run_id, auth.resolver())
        .await?;
    Ok(Json(run))
}

#[utoipa::path(
    post,
    path = "/v1/sessions/{session_id}/runs/{run_id}/resume",
    tag = "runs",
    params(
        ("session_id" = SessionId, Path, description = "The session"),
        ("run_id" = RunId, Path, description = "A suspended run without a pending interaction"),
    ),
    responses(
        (status = 200, description = "The run, `resuming`", body = Run),
        (status = 404, description = "`session.not_found` or `run.not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`interaction.pending` (reply to it instead) or `run.not_suspended`", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["frontend"]))
)]
async fn resume_run(
    State(state): State<AppState>,
    auth: Frontend,
    ids: PathIds,
) -> Result<Json<Run>, ApiError> {
    let session_id: SessionId = ids.get("session_id")?;
    let run_id: RunId = ids.get("run_id")?;
    let run = state
        .store
        .resume_run(auth.scope(), &session_id, &run_id, &auth.actor())
        .await?;
    Ok(Json(run))
}

#[utoipa::path(
    post,
    path = "/v1/runs/{run_id}/suspend",
    tag = "runs",
    params(("run_id" = RunId, Path, description = "A running run whose lease you hold")),
    request_body = SuspendRun,
    responses(
        (status = 200, description = "The run, `suspended`; the lease is handed back and cleanup is scheduled", body = Run),
        (status = 404, description = "`run.not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`lease.lost`: stale fencing token or expired lease; `checkpoint.sequence`: not after the last checkpoint; or the run cannot suspend in its state", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`request.invalid`: also `interaction.expires_at` not in the future, two deadlines, a warning or an `on_expiry` other than `fail` without a deadline, an `on_expiry` decision missing or not allowed", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["runtime"]))
)]
async fn suspend_run(
    State(state): State<AppState>,
    auth: Runtime,
    ids: PathIds,
    ApiJson(cmd): ApiJson<SuspendRun>,
) -> Result<Json<Run>, ApiError> {
    let run_id: RunId = ids.get("run_id")?;
    Ok(Json(
        state.store.suspend_run(auth.scope(), &run_id, &cmd).await?,
    ))
}

#[utoipa::path(
    post,
    path = "/v1/runs/{run_id}/resumed",
    tag = "runs",
    params(("run_id" = RunId, Path, description = "A resuming run whose lease you hold")),
    request_body = ConfirmResumed,
    responses(
        (status = 200, description = "The run, `running` again", body = Run),
        (status = 404, description = "`run.not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`sandbox.policy_stale`: a hash differs from the bound one and the run has been failed; `lease.lost`", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["runtime"]))
)]
async fn confirm_resumed(
    State(state): State<AppState>,
    auth: Runtime,
    ids: PathIds,
    ApiJson(cmd): ApiJson<ConfirmResumed>,
) -> Result<Json<Run>, ApiError> {
    let run_id: RunId = ids.get("run_id")?;
    Ok(Json(
        state
            .store
            .confirm_resumed(auth.scope(), &run_id, &cmd)
            .await?,
    ))
}

#[utoipa::path(
    post,
    path = "/v1/runs/{run_id}/complete",
    tag = "runs",
    params(("run_id" = RunId, Path, description = "A running run whose lease you hold")),
    request_body = CompleteRun,
    responses(
        (status = 200, description = "The run, `completed`", body = Run),
        (status = 404, description = "`run.not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`lease.lost`, or the run cannot complete in its state", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["runtime"]))
)]
async fn complete_run(
    State(state): State<AppState>,
    auth: Runtime,
    ids: PathIds,
    ApiJson(cmd): ApiJson<CompleteRun>,
) -> Result<Json<Run>, ApiError> {
    let run_id: RunId = ids.get("run_id")?;
    Ok(Json(
        state
            .store
            .complete_run(auth.scope(), &run_id, &cmd)
            .await?,
    ))
}

#[utoipa::path(
    post,
    path = "/v1/runs/{run_id}/fail",
    tag = "runs",
    params(("run_id" = RunId, Path, description = "A run whose lease you hold")),
    request_body = FailRun,
    responses(
        (status = 200, description = "The run, `failed`", body = Run),
        (status = 404, description = "`run.not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`lease.lost`, or the run already ended", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["runtime"]))
)]
async fn fail_run(
    State(state): State<AppState>,
    auth: Runtime,
    ids: PathIds,
    ApiJson(cmd): ApiJson<FailRun>,
) -> Result<Json<Run>, ApiError> {
    let run_id: RunId = ids.get("run_id")?;
    Ok(Json(
        state.store.fail_run(auth.scope(), &run_id, &cmd).await?,
    ))
}
