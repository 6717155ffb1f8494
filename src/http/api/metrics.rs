//! Prometheus metrics (admin only).

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::Observer;
use super::state::AppState;
use crate::metrics::render_lifecycle_gauges;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(metrics))
}

#[utoipa::path(
    get,
    path = "/metrics",
    tag = "admin",
    responses((status = 200, description = "Prometheus text exposition format 0.0.4", body = String, content_type = "text/plain")),
    security(("bearer" = ["admin"]), ("bearer" = ["metrics"]))
)]
async fn metrics(State(state): State<AppState>, _observer: Observer) -> Response {
    let mut text = state.metrics.render_prometheus();
    let _ = writeln!(
        text,
        "# HELP sagents_snapshot_cache_bytes Bytes of snapshot bodies this replica keeps in memory.\n\
         # TYPE sagents_snapshot_cache_bytes gauge\nsagents_snapshot_cache_bytes {}",
        state.store.hub().cache.body_bytes()
    );
    match state.store.lifecycle_metrics().await {
        Ok(m) => render_lifecycle_gauges(&m, &mut text),
        Err(e) => tracing::warn!(error = %e, "the lifecycle gauges could not be read"),
    }
    let mut res = text.into_response();
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    res
}
