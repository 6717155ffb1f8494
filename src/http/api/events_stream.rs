//! Frontend: a session's events live, as server-sent events.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde::Deserialize;
use tokio::time::{Interval, MissedTickBehavior};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::Frontend;
use super::error::{ApiError, Problem};
use super::extract::{ApiQuery, PathIds};
use super::state::AppState;
use crate::domain::token::Principal;
use crate::domain::SessionId;
use crate::service::event_stream::EventFeed;
use crate::service::stream_limits::{StreamSlot, TOKEN_RECHECK};
use crate::store::SessionEvent;

const LAST_EVENT_ID: &str = "last-event-id";

/// What ends a stream besides the feed: its token revoked or expired.
struct TokenWatch {
    state: AppState,
    principal: Principal,
    check: Interval,
    _slot: StreamSlot,
}

impl TokenWatch {
    /// Resolves once the token may no longer stream.
    async fn ended(&mut self) {
        loop {
            self.check.tick().await;
            if !self
                .state
                .streams
                .still_live(&self.state.store, &self.principal)
                .await
            {
                return;
            }
        }
    }
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(stream_events))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StreamQuery {
    /// Start after this event sequence (default 0: from the start). A `Last-Event-ID`
    /// header wins over it, so a reconnecting `EventSource` resumes where it stopped.
    #[param(minimum = 0)]
    pub after: Option<i64>,
}

/// Where the stream starts: `Last-Event-ID`, else `after`, else the beginning. A bad `after`
/// is refused even when the header wins over it.
fn start_after(headers: &HeaderMap, query: &StreamQuery) -> Result<i64, ApiError> {
    let after = non_negative("after", query.after.unwrap_or(0))?;
    let Some(v) = headers.get(LAST_EVENT_ID) else {
        return Ok(after);
    };
    let parsed = v.to_str().ok().and_then(|v| v.trim().parse::<i64>().ok());
    let Some(id) = parsed else {
        return Err(ApiError::invalid(
            "Last-Event-ID",
            "must be the id of an event of this stream (an integer)",
        ));
    };
    non_negative("Last-Event-ID", id)
}

fn non_negative(field: &str, value: i64) -> Result<i64, ApiError> {
    if value < 0 {
        return Err(ApiError::invalid(field, "must not be negative"));
    }
    Ok(value)
}

fn to_sse(event: &SessionEvent) -> Event {
    let sse = Event::default()
        .id(event.sequence.to_string())
        .event(event.r#type.as_str());
    // A SessionEvent always serializes; the fallback keeps the stream's framing intact.
    sse.json_data(event)
        .unwrap_or_else(|_| Event::default().comment("unserializable event"))
}

#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/events/stream",
    tag = "sessions",
    params(
        ("session_id" = SessionId, Path, description = "The session"),
        ("Last-Event-ID" = Option<i64>, Header, minimum = 0, description = "The `id` of the last event received; the stream resumes after it"),
        StreamQuery,
    ),
    responses(
        (status = 200, content_type = "text/event-stream", body = String, description = "The session's events in sequence order: those stored after the start, then each one as it commits (on any replica). Each has `id:` = its sequence, `event:` = its type and `data:` = the event as JSON (as in `GET /v1/sessions/{session_id}/events`). A comment line is sent when the stream has been idle for the heartbeat interval (`SAGENTS_SSE_HEARTBEAT_SECONDS`); the stream ends when the server shuts down, and within 5 s of its token's revocation (on any replica) or expiry"),
        (status = 429, description = "`stream.too_many`: the token already holds `SAGENTS_SSE_MAX_STREAMS_PER_TOKEN` open streams on this replica", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`session.not_found`: no such session for this tenant", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`request.invalid`: `after` or `Last-Event-ID` negative or not an integer", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["frontend"]))
)]
async fn stream_events(
    State(state): State<AppState>,
    auth: Frontend,
    ids: PathIds,
    ApiQuery(query): ApiQuery<StreamQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let session_id: SessionId = ids.get("session_id")?;
    let after = start_after(&headers, &query)?;
    let slot = state
        .streams
        .try_open(&auth.principal.token_id)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "stream.too_many",
                format!(
                    "this token already holds {} open event streams (SAGENTS_SSE_MAX_STREAMS_PER_TOKEN); close one first",
                    state.config.sse_max_streams_per_token
                ),
            )
        })?;
    let feed = EventFeed::open(
        &state.store,
        &state.shutdown,
        auth.scope(),
        &session_id,
        after,
    )
    .await?;
    let mut check = tokio::time::interval(TOKEN_RECHECK);
    check.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let watch = TokenWatch {
        state: state.clone(),
        principal: auth.principal,
        check,
        _slot: slot,
    };
    let events = futures::stream::unfold((feed, watch), |(mut feed, mut watch)| async move {
        // Both are cancel-safe: a token check that wins loses no event.
        let event = tokio::select! {
            event = feed.next() => event?,
            () = watch.ended() => return None,
        };
        Some((Ok(to_sse(&event)), (feed, watch)))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(state.config.sse_heartbeat())))
}
