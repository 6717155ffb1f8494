//! Operator: what each tenant is allowed beyond the defaults.

use axum::extract::State;
use axum::Json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::Admin;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, Command, PathIds};
use super::state::AppState;
use crate::domain::tenant::{TenantPolicy, TenantPolicyInfo};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_tenant_policy, put_tenant_policy))
}

impl Command for TenantPolicy {}

#[utoipa::path(
    get,
    path = "/v1/admin/tenants/{tenant}/policy",
    tag = "admin",
    params(("tenant" = String, Path, description = "A tenant id, as its tokens carry it", pattern = "^[A-Za-z0-9._:-]{1,128}$")),
    responses(
        (status = 200, description = "The tenant's policy; the defaults (nothing allowed, `updated_at` null) when none was set", body = TenantPolicyInfo),
        (status = 422, description = "`request.invalid` on `tenant`: a malformed tenant id; on `interaction_expiry.*`: a deadline or warning out of range, a deadline decision longer than 128 characters", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["admin"]))
)]
async fn get_tenant_policy(
    State(state): State<AppState>,
    _admin: Admin,
    ids: PathIds,
) -> Result<Json<TenantPolicyInfo>, ApiError> {
    let tenant = ids.text("tenant")?;
    Ok(Json(state.store.tenant_policy(tenant).await?))
}

#[utoipa::path(
    put,
    path = "/v1/admin/tenants/{tenant}/policy",
    tag = "admin",
    params(("tenant" = String, Path, description = "A tenant id, as its tokens carry it", pattern = "^[A-Za-z0-9._:-]{1,128}$")),
    request_body = TenantPolicy,
    responses(
        (status = 200, description = "The tenant's policy, replaced as a whole; it holds for runs created from now on", body = TenantPolicyInfo),
        (status = 422, description = "`request.invalid` on `tenant`: a malformed tenant id; on `interaction_expiry.*`: a deadline or warning out of range, a deadline decision longer than 128 characters", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["admin"]))
)]
async fn put_tenant_policy(
    State(state): State<AppState>,
    admin: Admin,
    ids: PathIds,
    ApiJson(policy): ApiJson<TenantPolicy>,
) -> Result<Json<TenantPolicyInfo>, ApiError> {
    let tenant = ids.text("tenant")?;
    let by = admin.resolver();
    Ok(Json(
        state.store.put_tenant_policy(tenant, &policy, by).await?,
    ))
}
