//! Prometheus metrics (admin only).

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::Admin;
use crate::app::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(metrics))
}

#[utoipa::path(
    get,
    path = "/metrics",
    tag = "admin",
    responses((status = 200, description = "Prometheus text exposition format 0.0.4", body = String, content_type = "text/plain")),
    security(("bearer" = []))
)]
async fn metrics(State(state): State<AppState>, _admin: Admin) -> Response {
    let mut res = state.metrics.render_prometheus().into_response();
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    res
}
