//! Frontend: sessions, their snapshot (conditional and long-polled) and their event log.

use std::time::Duration;

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::Frontend;
use super::commands::check_wait;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiQuery, IfNoneMatch, PathIds};
use super::state::AppState;
use crate::domain::commands::CreateSession;
use crate::domain::ids::IdParseError;
use crate::domain::session::Session;
use crate::domain::snapshot::{etag_for, Snapshot};
use crate::domain::SessionId;
use crate::service::snapshot::{read_snapshot, SnapshotOutcome, SnapshotRead};
use crate::store::{IdempotencyClaim, SessionEvent};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_session, list_sessions))
        .routes(routes!(get_snapshot))
        .routes(routes!(list_events))
}

#[utoipa::path(
    post,
    path = "/v1/sessions",
    tag = "sessions",
    request_body = CreateSession,
    responses(
        (status = 201, description = "The new session", body = Session),
        (status = 422, description = "`request.invalid`: e.g. a `parent_session_id` of another tenant", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["frontend"]))
)]
async fn create_session(
    State(state): State<AppState>,
    auth: Frontend,
    key: Option<Extension<IdempotencyClaim>>,
    ApiJson(cmd): ApiJson<CreateSession>,
) -> Result<(StatusCode, Json<Session>), ApiError> {
    let key = key.as_ref().map(|Extension(k)| k);
    let session = state
        .store
        .create_session_keyed(auth.tenant()?, &cmd, key)
        .await?;
    Ok((StatusCode::CREATED, Json(session)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SessionsQuery {
    /// The `next_cursor` of the previous page.
    #[param(value_type = Option<SessionId>)]
    pub cursor: Option<String>,
    /// At most this many sessions (1 to 1000, default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SessionPage {
    /// Newest first.
    pub sessions: Vec<Session>,
    /// Pass as `cursor` for the next page; absent on the last one.
    pub next_cursor: Option<SessionId>,
}

#[utoipa::path(
    get,
    path = "/v1/sessions",
    tag = "sessions",
    params(SessionsQuery),
    responses(
        (status = 200, description = "The tenant's sessions, newest first: how a frontend whose create answer was lost finds its session", body = SessionPage),
        (status = 404, description = "`session.not_found`: the cursor names no session of the tenant", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`request.invalid`: `limit` out of range", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["frontend"]))
)]
async fn list_sessions(
    State(state): State<AppState>,
    auth: Frontend,
    ApiQuery(query): ApiQuery<SessionsQuery>,
) -> Result<Json<SessionPage>, ApiError> {
    let limit = query.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid("limit", "must be between 1 and 1000"));
    }
    let cursor: Option<SessionId> = match &query.cursor {
        Some(c) => Some(c.parse().map_err(|_| ApiError::not_found("session"))?),
        None => None,
    };
    let sessions = state
        .store
        .list_sessions(auth.tenant()?, cursor.as_ref(), limit)
        .await?;
    let next_cursor = (sessions.len() == limit as usize)
        .then(|| sessions.last().map(|s| s.id.clone()))
        .flatten();
    Ok(Json(SessionPage {
        sessions,
        next_cursor,
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SnapshotQuery {
    /// With `If-None-Match`: hold the request up to this many seconds while the snapshot
    /// is unchanged (0 to the long-poll limit, `SAGENTS_LONG_POLL_MAX_SECONDS`).
    #[param(minimum = 0, maximum = 60)]
    pub wait_seconds: Option<u32>,
}

#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/snapshot",
    tag = "sessions",
    params(
        ("session_id" = SessionId, Path, description = "The session"),
        ("If-None-Match" = Option<String>, Header, description = "The ETag of a snapshot you hold; `304` while it is current"),
        SnapshotQuery,
    ),
    responses(
        (status = 200, description = "The snapshot", body = Snapshot, headers(
            ("ETag" = String, description = "`\"<revision>\"`"),
            ("Cache-Control" = String, description = "`no-cache`"),
        )),
        (status = 304, description = "Not modified: the `If-None-Match` ETag is current (after waiting, when asked to)", headers(
            ("ETag" = String, description = "`\"<revision>\"`"),
        )),
        (status = 404, description = "`session.not_found`: no such session for this tenant", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`request.invalid`: `wait_seconds` is above the long-poll limit", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["frontend"]))
)]
async fn get_snapshot(
    State(state): State<AppState>,
    auth: Frontend,
    ids: PathIds,
    ApiQuery(query): ApiQuery<SnapshotQuery>,
    IfNoneMatch(if_none_match): IfNoneMatch,
) -> Result<Response, ApiError> {
    snapshot_answer(&state, &auth, ids.get("session_id")?, query, if_none_match).await
}

/// `GET /v1/sessions/{session_id}/snapshot` as [`crate::http::server::hot_path`] serves it: the handler's
/// extractors in the handler's order, so a refusal is the router's refusal.
pub(crate) async fn get_snapshot_direct(
    state: AppState,
    session_id: Result<SessionId, IdParseError>,
    mut parts: Parts,
) -> Result<Response, ApiError> {
    let auth = Frontend::from_request_parts(&mut parts, &state).await?;
    let ApiQuery(query) = ApiQuery::from_request_parts(&mut parts, &state).await?;
    let IfNoneMatch(if_none_match) = IfNoneMatch::from_request_parts(&mut parts, &state).await?;
    drop(parts);
    snapshot_answer(&state, &auth, session_id?, query, if_none_match).await
}

async fn snapshot_answer(
    state: &AppState,
    auth: &Frontend,
    session_id: SessionId,
    query: SnapshotQuery,
    if_none_match: Option<String>,
) -> Result<Response, ApiError> {
    check_wait(
        "wait_seconds",
        query.wait_seconds,
        state.config.long_poll_max_seconds,
    )?;
    let outcome = read_snapshot(
        &state.store,
        &state.shutdown,
        &state.metrics,
        SnapshotRead {
            tenant: auth.scope(),
            session_id: &session_id,
            if_none_match: if_none_match.as_deref(),
            wait: Duration::from_secs(query.wait_seconds.unwrap_or(0).into()),
        },
    )
    .await?;
    let (mut res, revision) = match outcome {
        SnapshotOutcome::NotModified { revision } => {
            (StatusCode::NOT_MODIFIED.into_response(), revision)
        }
        SnapshotOutcome::Current(encoded) => {
            let res = (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                encoded.json.clone(),
            )
                .into_response();
            (res, encoded.revision())
        }
    };
    let h = res.headers_mut();
    if let Ok(etag) = HeaderValue::from_str(&etag_for(revision)) {
        h.insert(header::ETAG, etag);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(res)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Only events with a greater sequence (default 0: from the start).
    #[param(minimum = 0)]
    pub after: Option<i64>,
    /// At most this many events (1 to 1000, default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

impl EventsQuery {
    /// `(after, limit)` with their defaults, or a 422 naming the field out of range.
    pub fn page(&self) -> Result<(i64, u32), ApiError> {
        let after = self.after.unwrap_or(0);
        if after < 0 {
            return Err(ApiError::invalid("after", "must not be negative"));
        }
        let limit = self.limit.unwrap_or(100);
        if !(1..=1000).contains(&limit) {
            return Err(ApiError::invalid("limit", "must be between 1 and 1000"));
        }
        Ok((after, limit))
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EventPage {
    /// Oldest first.
    pub events: Vec<SessionEvent>,
    /// Pass as `after` to read on; equals the request's `after` when there is nothing new.
    pub next_after: i64,
}

#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/events",
    tag = "sessions",
    params(("session_id" = SessionId, Path, description = "The session"), EventsQuery),
    responses(
        (status = 200, description = "A page of the session's audit log", body = EventPage),
        (status = 404, description = "`session.not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`request.invalid`: `after` or `limit` out of range", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["frontend"]))
)]
async fn list_events(
    State(state): State<AppState>,
    auth: Frontend,
    ids: PathIds,
    ApiQuery(query): ApiQuery<EventsQuery>,
) -> Result<Json<EventPage>, ApiError> {
    let session_id: SessionId = ids.get("session_id")?;
    let (after, limit) = query.page()?;
    let events = state
        .store
        .list_events(auth.scope(), &session_id, after, limit)
        .await?;
    let next_after = events.last().map_or(after, |e| e.sequence);
    Ok(Json(EventPage { events, next_after }))
}
