//! Runtime: background jobs started by a run's tool calls.

use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::Runtime;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, PathIds};
use super::state::AppState;
use crate::domain::commands::{CreateJob, UpdateJob};
use crate::domain::job::Job;
use crate::domain::{JobId, RunId};
use crate::store::IdempotencyClaim;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_job, list_jobs))
        .routes(routes!(update_job))
}

#[utoipa::path(
    post,
    path = "/v1/runs/{run_id}/jobs",
    tag = "jobs",
    params(("run_id" = RunId, Path, description = "A running run whose lease you hold")),
    request_body = CreateJob,
    responses(
        (status = 201, description = "The job, `running`", body = Job),
        (status = 404, description = "`run.not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`lease.lost`, or the run is not running", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["runtime"]))
)]
async fn create_job(
    State(state): State<AppState>,
    auth: Runtime,
    ids: PathIds,
    key: Option<Extension<IdempotencyClaim>>,
    ApiJson(cmd): ApiJson<CreateJob>,
) -> Result<(StatusCode, Json<Job>), ApiError> {
    let run_id: RunId = ids.get("run_id")?;
    let key = key.as_ref().map(|Extension(k)| k);
    let job = state
        .store
        .create_job_keyed(auth.scope(), &run_id, &cmd, key)
        .await?;
    Ok((StatusCode::CREATED, Json(job)))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobList {
    pub jobs: Vec<Job>,
}

#[utoipa::path(
    get,
    path = "/v1/runs/{run_id}/jobs",
    tag = "jobs",
    params(("run_id" = RunId, Path, description = "The run")),
    responses(
        (status = 200, description = "The run's jobs, oldest first", body = JobList),
        (status = 404, description = "`run.not_found`", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["runtime"]))
)]
async fn list_jobs(
    State(state): State<AppState>,
    auth: Runtime,
    ids: PathIds,
) -> Result<Json<JobList>, ApiError> {
    let run_id: RunId = ids.get("run_id")?;
    let jobs = state.store.list_jobs(auth.scope(), &run_id).await?;
    Ok(Json(JobList { jobs }))
}

#[utoipa::path(
    patch,
    path = "/v1/runs/{run_id}/jobs/{job_id}",
    tag = "jobs",
    params(
        ("run_id" = RunId, Path, description = "The run"),
        ("job_id" = JobId, Path, description = "A job of the run"),
    ),
    request_body = UpdateJob,
    responses(
        (status = 200, description = "The job in its new state (no fencing token needed: jobs outlive leases)", body = Job),
        (status = 404, description = "`run.not_found` or `job.not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`job.finished` or `job.invalid_transition`: jobs only move forward", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["runtime"]))
)]
async fn update_job(
    State(state): State<AppState>,
    auth: Runtime,
    ids: PathIds,
    ApiJson(cmd): ApiJson<UpdateJob>,
) -> Result<Json<Job>, ApiError> {
    let run_id: RunId = ids.get("run_id")?;
    let job_id: JobId = ids.get("job_id")?;
    let job = state
        .store
        .update_job(auth.scope(), &run_id, &job_id, cmd.state)
        .await?;
    Ok(Json(job))
}
