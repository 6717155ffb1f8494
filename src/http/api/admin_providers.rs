//! Operator: sandbox providers (registered after a v3 capability check, listed without tokens).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::Admin;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, Command};
use super::state::AppState;
use crate::service::providers::{
    self, ProviderInfo, RegisterProvider, RegistryError, RegistryErrorClass,
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(register_provider, list_providers))
}

impl Command for RegisterProvider {}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProviderList {
    pub providers: Vec<ProviderInfo>,
}

impl From<RegistryError> for ApiError {
    fn from(e: RegistryError) -> Self {
        let status = match e.class() {
            RegistryErrorClass::Unprocessable => StatusCode::UNPROCESSABLE_ENTITY,
            RegistryErrorClass::BadGateway => StatusCode::BAD_GATEWAY,
            RegistryErrorClass::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            RegistryErrorClass::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        };
        match e {
            RegistryError::Invalid(v) => v.into(),
            RegistryError::Store(s) => s.into(),
            RegistryError::CorruptRecord(_) => {
                tracing::error!(error = %e, "provider registry failure");
                ApiError::internal()
            }
            other => ApiError::new(status, other.code(), other.to_string()),
        }
    }
}

#[utoipa::path(
    post,
    path = "/v1/admin/providers",
    tag = "admin",
    request_body = RegisterProvider,
    responses(
        (status = 201, description = "The provider, registered (or re-registered) after its capabilities were checked", body = ProviderInfo),
        (status = 422, description = "`provider.api_version_unsupported`: not plugin API v3 or no `execution.sandbox` capability (no fallback); `provider.refused`: the provider refused our token; `request.invalid`: a malformed id or URL", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "`provider.unreachable`: the capabilities could not be fetched", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["admin"]))
)]
async fn register_provider(
    State(state): State<AppState>,
    admin: Admin,
    ApiJson(cmd): ApiJson<RegisterProvider>,
) -> Result<(StatusCode, Json<ProviderInfo>), ApiError> {
    let info = providers::register_provider(&state.store, &cmd, admin.resolver()).await?;
    Ok((StatusCode::CREATED, Json(info)))
}

#[utoipa::path(
    get,
    path = "/v1/admin/providers",
    tag = "admin",
    responses((status = 200, description = "Every registered provider, never its token", body = ProviderList)),
    security(("bearer" = ["admin"]))
)]
async fn list_providers(
    State(state): State<AppState>,
    _admin: Admin,
) -> Result<Json<ProviderList>, ApiError> {
    Ok(Json(ProviderList {
        providers: providers::list_providers(&state.store).await?,
    }))
}
