//! HTTP: the API ([`api`]: resources, extractors, errors, OpenAPI) and the server that
//! carries it ([`server`]: connections, the envelope, the hot path), joined here by the
//! router.

pub mod api;
pub mod server;

use axum::extract::DefaultBodyLimit;
use axum::Router;
use tower::ServiceBuilder;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

use crate::telemetry::request_line::RequestLog;
use api::openapi::{self, ApiDoc};
use api::state::AppState;
use api::{
    admin_attention, admin_lifecycle, admin_providers, admin_tenants, admin_tokens, audit,
    events_stream, health, idempotency, inbox, interactions, jobs, metrics, openapi_contract, runs,
    runtime, sessions, ui,
};
use server::cors::CorsGateLayer;
use server::deadline::DeadlineLayer;
use server::{envelope, hot_path, layers, stack};

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
        .merge(audit::router())
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
/// beside it ([`hot_path`]) in the same envelope, CORS and timeout, and sensitive headers and
/// compression around both ([`stack`]).
pub fn app(state: AppState, request_log: Option<RequestLog>) -> stack::Layered {
    let layers = hot_path::RouteLayers {
        envelope: envelope::EnvelopeLayer::new(state.metrics.clone(), request_log),
        cors: CorsGateLayer::new(&state.config),
        deadline: DeadlineLayer::new(&state.config),
    };
    let router = router(state.clone(), layers.clone());
    stack::layered(hot_path::app(state, router, &layers))
}

/// Every route: docs and the layers every request goes through.
fn router(state: AppState, layers: hot_path::RouteLayers) -> Router {
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
                .layer(layers.envelope)
                .layer(layers.cors)
                .layer(layers.deadline)
                .layer(idempotency::IdempotencyLayer::new(state.clone())),
        )
        .with_state(state)
}
