//! The audit trail: a tenant's hash-chained records of decisions, expiries, cancels and
//! operators' changes.

use axum::extract::State;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::Auditor;
use super::error::{ApiError, Problem};
use super::extract::ApiQuery;
use super::state::AppState;
use crate::domain::audit::{AuditRecord, SYSTEM_CHAIN};
use crate::domain::token::Role;
use crate::store::MAX_AUDIT_PAGE;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_audit))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// The chain: a tenant id, or `*` for changes that belong to no tenant (an admin's
    /// default); a frontend token reads its own tenant's (and may name only that one).
    #[param(pattern = "^([A-Za-z0-9._:-]{1,128}|\\*)$")]
    pub tenant: Option<String>,
    /// The `next_cursor` of the previous page (the last sequence seen).
    #[param(pattern = "^[0-9]{1,18}$")]
    pub cursor: Option<String>,
    /// Only records at or after this instant.
    pub since: Option<DateTime<Utc>>,
    /// At most this many records (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

/// A page of one chain, in sequence order.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuditPage {
    pub records: Vec<AuditRecord>,
    /// Pass as `cursor` for the records after these; null when this page is the last.
    pub next_cursor: Option<String>,
}

#[utoipa::path(
    get,
    path = "/v1/audit",
    tag = "audit",
    params(AuditQuery),
    responses(
        (status = 200, description = "The chain's records after the cursor, oldest first. Each holds the hash of the one before it: `sagents audit verify` checks an export", body = AuditPage),
        (status = 403, description = "`auth.forbidden`: a frontend token naming another tenant's chain", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`request.invalid`: a malformed `tenant` or `cursor`, `limit` out of range", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["admin"]), ("bearer" = ["frontend"]))
)]
async fn list_audit(
    State(state): State<AppState>,
    auth: Auditor,
    ApiQuery(query): ApiQuery<AuditQuery>,
) -> Result<Json<AuditPage>, ApiError> {
    let limit = query.limit.unwrap_or(100);
    if !(1..=MAX_AUDIT_PAGE).contains(&limit) {
        return Err(ApiError::invalid("limit", "must be between 1 and 1000"));
    }
    let tenant = match (auth.principal.role, query.tenant) {
        (Role::Admin, Some(t)) => t,
        (Role::Admin, None) => SYSTEM_CHAIN.to_owned(),
        (_, asked) => {
            let own = auth.tenant()?;
            if asked.as_deref().is_some_and(|t| t != own) {
                return Err(ApiError::forbidden(
                    "a frontend token reads its own tenant's chain only",
                ));
            }
            own.to_owned()
        }
    };
    let after = match &query.cursor {
        Some(c) => c
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| ApiError::invalid("cursor", "not a cursor this service issued"))?,
        None => 0,
    };
    let records = state
        .store
        .list_audit(&tenant, after, query.since, limit)
        .await?;
    let next_cursor = (records.len() == limit as usize)
        .then(|| records.last().map(|r| r.sequence.to_string()))
        .flatten();
    Ok(Json(AuditPage {
        records,
        next_cursor,
    }))
}
