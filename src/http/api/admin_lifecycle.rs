//! Operator: a run's execution-resource record and its history, and the lifecycle figures.
//! Reading them changes nothing a user sees.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{Admin, Observer};
use super::error::{ApiError, Problem};
use super::extract::{ApiQuery, PathIds};
use super::sessions::{EventPage, EventsQuery};
use super::state::AppState;
use crate::domain::resource::ExecutionResourceRecord;
use crate::domain::{RunId, SessionId};
use crate::metrics::LifecycleMetrics;
use crate::store::{ResourceEvent, StoreError};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(execution_resource))
        .routes(routes!(execution_resource_events))
        .routes(routes!(lifecycle_metrics))
        .routes(routes!(session_log))
}

#[utoipa::path(
    get,
    path = "/v1/admin/runs/{run_id}/execution-resource",
    tag = "admin",
    params(("run_id" = RunId, Path, description = "The run whose compute to show")),
    responses(
        (status = 200, description = "The run's execution-resource record", body = ExecutionResourceRecord),
        (status = 404, description = "`execution_resource.not_found`: no such run, or a run without a sandbox; `run.not_found`: not a run id", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["admin"]))
)]
async fn execution_resource(
    State(state): State<AppState>,
    _admin: Admin,
    ids: PathIds,
) -> Result<Json<ExecutionResourceRecord>, ApiError> {
    let run_id: RunId = ids.get("run_id")?;
    match state.store.get_resource(&run_id).await {
        Ok(record) => Ok(Json(record)),
        Err(e) => Err(not_found_as_resource(&run_id, e)),
    }
}

fn not_found_as_resource(run_id: &RunId, e: StoreError) -> ApiError {
    match e {
        StoreError::NotFound(_) => ApiError::new(
            StatusCode::NOT_FOUND,
            "execution_resource.not_found",
            format!(
                "run `{run_id}` has no execution resource (unknown run, or one without a sandbox)"
            ),
        ),
        e => e.into(),
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ResourceEventPage {
    /// Oldest first.
    pub events: Vec<ResourceEvent>,
    /// Pass as `after` to read on; equals the request's `after` when there is nothing new.
    pub next_after: i64,
}

#[utoipa::path(
    get,
    path = "/v1/admin/runs/{run_id}/execution-resource/events",
    tag = "admin",
    params(("run_id" = RunId, Path, description = "The run whose compute history to show"), EventsQuery),
    responses(
        (status = 200, description = "A page of the run's execution-resource history: every state its record entered, with provider, generation, disposition and error code", body = ResourceEventPage),
        (status = 404, description = "`execution_resource.not_found`: no such run, or a run without a sandbox; `run.not_found`: not a run id", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`request.invalid`: `after` or `limit` out of range", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["admin"]))
)]
async fn execution_resource_events(
    State(state): State<AppState>,
    _admin: Admin,
    ids: PathIds,
    ApiQuery(query): ApiQuery<EventsQuery>,
) -> Result<Json<ResourceEventPage>, ApiError> {
    let run_id: RunId = ids.get("run_id")?;
    let (after, limit) = query.page()?;
    let events = state
        .store
        .list_resource_events(&run_id, after, limit)
        .await
        .map_err(|e| not_found_as_resource(&run_id, e))?;
    let next_after = events.last().map_or(after, |e| e.sequence);
    Ok(Json(ResourceEventPage { events, next_after }))
}

#[utoipa::path(
    get,
    path = "/v1/admin/lifecycle/metrics",
    tag = "admin",
    responses((status = 200, description = "The lifecycle `metrics_snapshot`", body = LifecycleMetrics)),
    security(("bearer" = ["admin"]), ("bearer" = ["metrics"]))
)]
async fn lifecycle_metrics(
    State(state): State<AppState>,
    _observer: Observer,
) -> Result<Json<LifecycleMetrics>, ApiError> {
    Ok(Json(state.store.lifecycle_metrics().await?))
}

#[utoipa::path(
    get,
    path = "/v1/admin/sessions/{session_id}/events",
    tag = "admin",
    params(("session_id" = SessionId, Path, description = "The session whose whole log to show"), EventsQuery),
    responses(
        (status = 200, description = "A page of the session's whole log: what frontends see (`GET /v1/sessions/{session_id}/events`) and the service's own entries they do not, such as `lease.taken_over`", body = EventPage),
        (status = 404, description = "`session.not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`request.invalid`: `after` or `limit` out of range", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["admin"]))
)]
async fn session_log(
    State(state): State<AppState>,
    _admin: Admin,
    ids: PathIds,
    ApiQuery(query): ApiQuery<EventsQuery>,
) -> Result<Json<EventPage>, ApiError> {
    let session_id: SessionId = ids.get("session_id")?;
    let (after, limit) = query.page()?;
    let events = state
        .store
        .list_session_log(None, &session_id, after, limit)
        .await?;
    let next_after = events.last().map_or(after, |e| e.sequence);
    Ok(Json(EventPage { events, next_after }))
}
