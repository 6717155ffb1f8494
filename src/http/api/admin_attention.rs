//! Operator: releases that could not be confirmed within their attempt budget
//! (`needs_attention`), and the two decisions an operator can make about one.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::Admin;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiQuery, CheckContext, Command, PathIds};
use super::state::AppState;
use crate::domain::resource::ExecutionResourceRecord;
use crate::domain::RunId;
use crate::lifecycle::attention::{self, AttentionAction, AttentionError};
use crate::store::{AttentionItem, StoreError};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_attention))
        .routes(routes!(resolve_attention))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AttentionQuery {
    /// The `next_cursor` of the previous page.
    #[param(value_type = Option<RunId>)]
    pub cursor: Option<String>,
    /// At most this many records (1 to 1000, default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AttentionPage {
    /// Longest waiting first.
    pub items: Vec<AttentionItem>,
    /// Pass as `cursor` for the next page; absent on the last one.
    pub next_cursor: Option<RunId>,
}

#[utoipa::path(
    get,
    path = "/v1/admin/lifecycle/attention",
    tag = "admin",
    params(AttentionQuery),
    responses(
        (status = 200, description = "Execution resources `needs_attention`: releases the provider did not confirm within the attempt budget, retried slowly until resolved", body = AttentionPage),
        (status = 404, description = "`execution_resource.not_found`: the cursor names no execution resource", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`request.invalid`: `limit` out of range", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["admin"]))
)]
async fn list_attention(
    State(state): State<AppState>,
    _admin: Admin,
    ApiQuery(query): ApiQuery<AttentionQuery>,
) -> Result<Json<AttentionPage>, ApiError> {
    let limit = query.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid("limit", "must be between 1 and 1000"));
    }
    let cursor: Option<RunId> = match &query.cursor {
        Some(c) => Some(
            c.parse()
                .map_err(|_| ApiError::not_found("execution_resource"))?,
        ),
        None => None,
    };
    let items = state.store.list_attention(cursor.as_ref(), limit).await?;
    let next_cursor = (items.len() == limit as usize)
        .then(|| items.last().map(|i| i.record.run_id.clone()))
        .flatten();
    Ok(Json(AttentionPage { items, next_cursor }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveAttention {
    pub action: AttentionAction,
    /// Why, for the record's history (1 to 500 characters, not only whitespace).
    #[schema(min_length = 1, max_length = 500, pattern = "\\S")]
    pub reason: String,
}

impl Command for ResolveAttention {
    fn check(&self, _ctx: &CheckContext) -> Result<(), ApiError> {
        if self.reason.trim().is_empty() || self.reason.chars().count() > 500 {
            return Err(ApiError::invalid("reason", "must be 1 to 500 characters"));
        }
        Ok(())
    }
}

#[utoipa::path(
    post,
    path = "/v1/admin/runs/{run_id}/execution-resource/attention",
    tag = "admin",
    params(("run_id" = RunId, Path, description = "The run whose `needs_attention` record to resolve")),
    request_body = ResolveAttention,
    responses(
        (status = 200, description = "The record as stored: due at once for `retry_now`; `released` with `compute_released: false` and error `release.resolved_by_operator` for `mark_released`; for `give_up` (a bind whose error is `bind.needs_attention`) the run failed with `sandbox.bind_abandoned` and the record without compute", body = ExecutionResourceRecord),
        (status = 404, description = "`execution_resource.not_found`: no such run, or a run without a sandbox", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`execution_resource.not_in_attention`: the record is in another state (or, for `give_up`, has no bind that needs attention); `execution_resource.busy`: a worker holds the run's lease now, try again", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`request.invalid`: unknown action or empty reason", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["admin"]))
)]
async fn resolve_attention(
    State(state): State<AppState>,
    admin: Admin,
    ids: PathIds,
    ApiJson(body): ApiJson<ResolveAttention>,
) -> Result<Json<ExecutionResourceRecord>, ApiError> {
    let run_id: RunId = ids.get("run_id")?;
    let reason = body.reason.trim();
    match attention::resolve(&state.store, &run_id, body.action, reason, &admin.actor()).await {
        Ok(record) => Ok(Json(record)),
        Err(AttentionError::NotInAttention(s)) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "execution_resource.not_in_attention",
            format!("the execution resource of run `{run_id}` is `{s}`, not `needs_attention`"),
        )),
        Err(AttentionError::NoBindInAttention(s)) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "execution_resource.not_in_attention",
            format!(
                "the execution resource of run `{run_id}` (`{s}`) has no bind that needs attention"
            ),
        )),
        Err(AttentionError::Store(StoreError::NotFound(_))) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "execution_resource.not_found",
            format!("run `{run_id}` has no execution resource"),
        )),
        Err(AttentionError::Store(e)) => Err(e.into()),
        Err(AttentionError::Transition(e)) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "execution_resource.not_in_attention",
            e.to_string(),
        )),
    }
}
