//! Frontend: replying to a pending interaction.

use axum::extract::State;
use axum::Json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::Frontend;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, PathIds};
use super::state::AppState;
use crate::domain::commands::ReplyInteraction;
use crate::domain::{InteractionId, SessionId};
use crate::store::ReplyOutcome;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(reply))
}

#[utoipa::path(
    post,
    path = "/v1/sessions/{session_id}/interactions/{interaction_id}/reply",
    tag = "interactions",
    params(
        ("session_id" = SessionId, Path, description = "The session"),
        ("interaction_id" = InteractionId, Path, description = "A pending interaction of the session"),
    ),
    request_body = ReplyInteraction,
    responses(
        (status = 200, description = "The interaction is resolved and its run is resuming; a replay of the same reply gets the same answer", body = ReplyOutcome),
        (status = 404, description = "`session.not_found` or `interaction.not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`interaction.not_pending` (already answered differently, expired or cancelled), `interaction.revision_mismatch` (stale `expected_revision`) or `interaction.expired`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`request.invalid` on `decision`: not one of `allowed_decisions`", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["frontend"]))
)]
async fn reply(
    State(state): State<AppState>,
    auth: Frontend,
    ids: PathIds,
    ApiJson(cmd): ApiJson<ReplyInteraction>,
) -> Result<Json<ReplyOutcome>, ApiError> {
    let session_id: SessionId = ids.get("session_id")?;
    let interaction_id: InteractionId = ids.get("interaction_id")?;
    let outcome = state
        .store
        .reply_interaction(
            auth.scope(),
            &session_id,
            &interaction_id,
            &cmd,
            auth.resolver(),
        )
        .await?;
    Ok(Json(outcome))
}
