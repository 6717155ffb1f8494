//! Runtime workers: claiming runs (long-polled) and keeping their leases.

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::Runtime;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, PathIds};
use super::idempotency::{ReplayWith, IDEMPOTENCY_KEY};
use super::state::AppState;
use crate::domain::claim::ClaimResponse;
use crate::domain::commands::{ClaimRequest, Heartbeat};
use crate::domain::LeaseId;
use crate::service::claims::{self, claim, ClaimWait, CLAIM_RETRY_INTERVAL};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(claim_runs))
        .routes(routes!(heartbeat))
}

#[utoipa::path(
    post,
    path = "/v1/runtime/claims",
    tag = "runtime",
    request_body = ClaimRequest,
    responses(
        (status = 200, description = "Claimed runs, each with a fresh lease; an empty list when nothing was ready by the deadline (or the service is shutting down)", body = ClaimResponse),
        (status = 422, description = "`request.invalid`: e.g. `wait_seconds` above the long-poll limit or `max` outside 1..=100", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["runtime"]))
)]
async fn claim_runs(
    State(state): State<AppState>,
    auth: Runtime,
    headers: HeaderMap,
    ApiJson(cmd): ApiJson<ClaimRequest>,
) -> Result<Response, ApiError> {
    let claims = claim(
        &state.store,
        &state.shutdown,
        &state.metrics,
        ClaimWait {
            tenant: auth.scope(),
            worker_id: &cmd.worker_id,
            max: cmd.max.unwrap_or(1),
            ttl: state.config.lease_ttl(),
            wait: Duration::from_secs(cmd.wait_seconds.unwrap_or(0).into()),
            poll: CLAIM_RETRY_INTERVAL,
            grants: &state.grants,
        },
    )
    .await?;
    // A stored answer keeps no grant: a replay's runtime heartbeats the lease for a fresh one.
    let stored = headers.contains_key(IDEMPOTENCY_KEY).then(|| {
        let mut stored = ClaimResponse {
            claims: claims.clone(),
        };
        for sandbox in stored.claims.iter_mut().filter_map(|c| c.sandbox.as_mut()) {
            sandbox.grant.clear();
        }
        ReplayWith::json(StatusCode::OK, &stored)
    });
    let mut res = Json(ClaimResponse { claims }).into_response();
    if let Some(stored) = stored {
        res.extensions_mut().insert(stored);
    }
    Ok(res)
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HeartbeatResponse {
    /// The lease now expires at this time.
    pub expires_at: DateTime<Utc>,
    /// A fresh grant for the run's sandbox, expiring with the extended lease; use it in place
    /// of the claim's. Null when the run has no ready sandbox (none, or it is being released),
    /// and in an `Idempotency-Key` replay (no grant is stored): heartbeat again for one.
    pub grant: Option<String>,
}

#[utoipa::path(
    post,
    path = "/v1/runtime/leases/{lease_id}/heartbeat",
    tag = "runtime",
    params(("lease_id" = LeaseId, Path, description = "A lease you hold")),
    request_body = Heartbeat,
    responses(
        (status = 200, description = "The lease is extended by the lease TTL; a sandbox-backed run gets a fresh grant to match", body = HeartbeatResponse),
        (status = 404, description = "`lease.not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`lease.lost`: the fencing token is stale or the lease expired; stop working on the run", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["runtime"]))
)]
async fn heartbeat(
    State(state): State<AppState>,
    auth: Runtime,
    ids: PathIds,
    ApiJson(cmd): ApiJson<Heartbeat>,
) -> Result<Response, ApiError> {
    let lease_id: LeaseId = ids.get("lease_id")?;
    let renewed = claims::heartbeat(
        &state.store,
        &state.grants,
        auth.scope(),
        &lease_id,
        cmd.fencing_token,
        state.config.lease_ttl(),
    )
    .await?;
    let stored = HeartbeatResponse {
        expires_at: renewed.expires_at,
        grant: None,
    };
    let mut res = Json(HeartbeatResponse {
        expires_at: renewed.expires_at,
        grant: renewed.grant,
    })
    .into_response();
    res.extensions_mut()
        .insert(ReplayWith::json(StatusCode::OK, &stored));
    Ok(res)
}
