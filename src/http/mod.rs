//! The HTTP API: one file per resource, the error type, extractors, layers and the OpenAPI
//! document.

pub mod admin_attention;
pub mod admin_lifecycle;
pub mod admin_providers;
pub mod admin_tenants;
pub mod admin_tokens;
pub mod auth;
pub mod commands;
pub mod envelope;
pub mod error;
pub mod events_stream;
pub mod extract;
pub mod health;
pub mod hot_path;
pub mod idempotency;
pub mod idle;
pub mod inbox;
pub mod interactions;
pub mod jobs;
pub mod layers;
pub mod metrics;
pub mod openapi;
pub mod openapi_contract;
pub mod request_id;
pub mod runs;
pub mod runtime;
pub mod serve;
pub mod sessions;
pub mod side;
pub mod state;
pub mod strict;
pub mod ui;

use axum::extract::DefaultBodyLimit;
use axum::Router;
use tower::ServiceBuilder;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

use crate::http::state::AppState;
use crate::telemetry::request_line::RequestLog;
use openapi::ApiDoc;

/// Every documented route, without state or layers.
pub fn api_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(sessions::router())
        .merge(events_stream::router())
        .merge(inbox::router())
        .merge(interactions::router())
        .merge(runs::router())
        .merge(runtime::router())
        .merge(jobs::router())
        .merge(admin_tokens::router())
        .merge(admin_lifecycle::router())
        .merge(admin_attention::router())
        .merge(admin_providers::router())
        .merge(admin_tenants::router())
        .merge(health::router())
        .merge(metrics::router())
}

/// The OpenAPI document of the service with the default configuration (the committed one).
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    openapi::complete(api_router().into_openapi())
}

/// The OpenAPI document of a service with `config`, as served at `/openapi.json`: the
/// default one with the configured long-poll bound.
pub fn openapi_document_for(config: &crate::config::Config) -> utoipa::openapi::OpenApi {
    let mut doc = openapi_document();
    openapi_contract::set_long_poll_limit(&mut doc, config.long_poll_max_seconds);
    doc
}

/// The whole service as a connection calls it: the router, with the snapshot read served
/// beside it ([`hot_path`]) in the same envelope.
pub fn app(state: AppState, request_log: Option<RequestLog>) -> hot_path::App {
    let envelope = envelope::EnvelopeLayer::new(state.metrics.clone(), request_log);
    let router = router(state.clone(), envelope.clone());
    hot_path::app(state, router, &envelope)
}

/// Every route: docs and the layers every request goes through.
fn router(state: AppState, envelope: envelope::EnvelopeLayer) -> Router {
    let (routes, _) = api_router().split_for_parts();
    let body_limit = state.config.body_limit();
    routes
        .merge(SwaggerUi::new("/docs").url("/openapi.json", openapi_document_for(&state.config)))
        .merge(ui::router())
        .fallback(layers::fallback)
        // One stack, outermost first: a route then boxes (and clones per request) one
        // service instead of one per layer.
        .layer(
            ServiceBuilder::new()
                .layer(DefaultBodyLimit::max(body_limit))
                .layer(envelope)
                .layer(idempotency::IdempotencyLayer::new(state.clone())),
        )
        .with_state(state)
}
