//! Operator: a run's execution-resource record and the lifecycle figures. Reading them
//! changes nothing a user sees.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::Admin;
use super::error::{ApiError, Problem};
use super::extract::PathIds;
use crate::domain::resource::ExecutionResourceRecord;
use crate::domain::RunId;
use crate::http::state::AppState;
use crate::metrics::LifecycleMetrics;
use crate::store::StoreError;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(execution_resource))
        .routes(routes!(lifecycle_metrics))
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
    security(("bearer" = []))
)]
async fn execution_resource(
    State(state): State<AppState>,
    _admin: Admin,
    ids: PathIds,
) -> Result<Json<ExecutionResourceRecord>, ApiError> {
    let run_id: RunId = ids.get("run_id")?;
    match state.store.get_resource(&run_id).await {
        Ok(record) => Ok(Json(record)),
        Err(StoreError::NotFound(_)) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "execution_resource.not_found",
            format!(
                "run `{run_id}` has no execution resource (unknown run, or one without a sandbox)"
            ),
        )),
        Err(e) => Err(e.into()),
    }
}

#[utoipa::path(
    get,
    path = "/v1/admin/lifecycle/metrics",
    tag = "admin",
    responses((status = 200, description = "The lifecycle `metrics_snapshot`", body = LifecycleMetrics)),
    security(("bearer" = []))
)]
async fn lifecycle_metrics(
    State(state): State<AppState>,
    _admin: Admin,
) -> Result<Json<LifecycleMetrics>, ApiError> {
    Ok(Json(state.store.lifecycle_metrics().await?))
}
