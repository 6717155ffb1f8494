//! Frontend: the inbox, the tenant's pending interactions across its sessions.

use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::Frontend;
use super::commands::check_wait;
use super::error::{ApiError, Problem};
use super::extract::{ApiQuery, IfNoneMatch};
use super::state::AppState;
use crate::service::inbox::{read_inbox, InboxOutcome, InboxPage, InboxRead};
use crate::store::InboxCursor;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_inbox))
}

/// Which interactions the inbox lists.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum InboxStatus {
    Pending,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InboxQuery {
    /// Only `pending` (the default).
    #[param(inline)]
    pub status: Option<InboxStatus>,
    /// The `next_cursor` of the previous page.
    #[param(pattern = "^[0-9]{1,15}\\.int_[0-9a-f]{32}$")]
    pub cursor: Option<String>,
    /// At most this many interactions (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// With `If-None-Match`: hold the request up to this many seconds while the page is
    /// unchanged (0 to the long-poll limit, `SAGENTS_LONG_POLL_MAX_SECONDS`).
    #[param(minimum = 0, maximum = 60)]
    pub wait_seconds: Option<u32>,
}

#[utoipa::path(
    get,
    path = "/v1/interactions",
    tag = "interactions",
    params(
        ("If-None-Match" = Option<String>, Header, description = "The ETag of a page you hold; `304` while it is current"),
        InboxQuery,
    ),
    responses(
        (status = 200, description = "The tenant's pending interactions across its sessions, newest first", body = InboxPage, headers(
            ("ETag" = String, description = "A digest of the page"),
            ("Cache-Control" = String, description = "`no-cache`"),
        )),
        (status = 304, description = "Not modified: the `If-None-Match` ETag is current (after waiting, when asked to): no interaction of the tenant became or stopped being pending in a way that changes this page", headers(
            ("ETag" = String, description = "A digest of the page"),
        )),
        (status = 422, description = "`request.invalid`: `status` other than `pending`, `limit` out of range, a `cursor` this service did not issue, `wait_seconds` above the long-poll limit", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["frontend"]))
)]
async fn list_inbox(
    State(state): State<AppState>,
    auth: Frontend,
    ApiQuery(query): ApiQuery<InboxQuery>,
    IfNoneMatch(if_none_match): IfNoneMatch,
) -> Result<Response, ApiError> {
    let limit = query.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid("limit", "must be between 1 and 1000"));
    }
    let cursor: Option<InboxCursor> = match &query.cursor {
        Some(c) => Some(
            c.parse()
                .map_err(|e| ApiError::invalid("cursor", format!("{e}")))?,
        ),
        None => None,
    };
    check_wait(
        "wait_seconds",
        query.wait_seconds,
        state.config.long_poll_max_seconds,
    )?;
    let InboxStatus::Pending = query.status.unwrap_or(InboxStatus::Pending);
    let outcome = read_inbox(
        &state.store,
        &state.shutdown,
        &state.metrics,
        InboxRead {
            tenant: auth.tenant()?,
            cursor: cursor.as_ref(),
            limit,
            if_none_match: if_none_match.as_deref(),
            wait: Duration::from_secs(query.wait_seconds.unwrap_or(0).into()),
        },
    )
    .await?;
    let (mut res, etag) = match outcome {
        InboxOutcome::NotModified { etag } => (StatusCode::NOT_MODIFIED.into_response(), etag),
        InboxOutcome::Current { etag, page } => (Json(page).into_response(), etag),
    };
    let h = res.headers_mut();
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, etag);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(res)
}
