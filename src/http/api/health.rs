//! Liveness and readiness (open paths).

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, Problem};
use super::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// `ok` (process up) or `ready` (database reachable, migrations applied).
    pub status: String,
}

#[utoipa::path(
    get,
    path = "/healthz",
    tag = "health",
    responses((status = 200, description = "The process is up", body = Health))
)]
async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
    })
}

#[utoipa::path(
    get,
    path = "/readyz",
    tag = "health",
    responses(
        (status = 200, description = "Ready to serve", body = Health),
        (status = 503, description = "`service.unavailable`: the database is unreachable, a migration is missing, or the service is shutting down", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    if state.shutdown.is_triggered() {
        return Err(ApiError::unavailable("the service is shutting down"));
    }
    state.store.check_ready().await.map_err(|e| {
        tracing::warn!(error = %e, "not ready");
        ApiError::unavailable("the database is unreachable or not fully migrated")
    })?;
    Ok(Json(Health {
        status: "ready".into(),
    }))
}
