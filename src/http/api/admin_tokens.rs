//! Operator: API tokens (created with their secret shown once, listed, revoked).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::Admin;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, CheckContext, Command, PathIds};
use super::idempotency::ReplayWith;
use super::state::AppState;
use crate::domain::token::{self, NewToken, Role, TokenInfo};
use crate::domain::TokenId;
use crate::service::tokens::tenant_for;
use crate::store::{IdempotencyClaim, TokenReplay};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_token, list_tokens))
        .routes(routes!(revoke_token))
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    pub role: Role,
    /// Tenant of a frontend or runtime token (default `default`); admin and metrics tokens
    /// take none.
    #[serde(default)]
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub tenant: Option<String>,
    /// Seconds until the token expires (at most ten years); it never expires when absent.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 315_360_000)]
    pub ttl_seconds: Option<i64>,
    /// Who uses it, as people should read it: kept beside the token's id with each decision
    /// it makes (`resolved_by_name`).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 128)]
    pub name: Option<String>,
}

/// The longest a token may live.
pub const MAX_TOKEN_TTL_SECONDS: i64 = 315_360_000;

impl Command for CreateToken {
    fn check(&self, _: &CheckContext) -> Result<(), ApiError> {
        tenant_for(self.role, self.tenant.as_deref())?;
        if let Some(name) = &self.name {
            token::check_name(name)?;
        }
        if self
            .ttl_seconds
            .is_some_and(|s| !(1..=MAX_TOKEN_TTL_SECONDS).contains(&s))
        {
            return Err(ApiError::invalid(
                "ttl_seconds",
                format!("must be 1 to {MAX_TOKEN_TTL_SECONDS}"),
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CreatedToken {
    #[serde(flatten)]
    pub token: TokenInfo,
    /// The bearer secret. It is shown only in this response and stored only as a hash.
    pub secret: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TokenList {
    pub tokens: Vec<TokenInfo>,
}

#[utoipa::path(
    post,
    path = "/v1/admin/tokens",
    tag = "admin",
    request_body = CreateToken,
    responses(
        (status = 201, description = "The token with its secret, shown once", body = CreatedToken),
        (status = 409, description = "`token.already_created`: a replay under the same `Idempotency-Key`; the secret is never shown again, the detail names the token", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`request.invalid` on `tenant` (malformed, or given for an admin or metrics token), on `ttl_seconds` (out of range) or on `name` (empty, too long or with a control character)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["admin"]))
)]
async fn create_token(
    State(state): State<AppState>,
    admin: Admin,
    key: Option<Extension<IdempotencyClaim>>,
    ApiJson(cmd): ApiJson<CreateToken>,
) -> Result<Response, ApiError> {
    let tenant = tenant_for(cmd.role, cmd.tenant.as_deref())?;
    let stored = |t: &TokenInfo| ReplayWith::problem(&already_created(t)).stored();
    let key = key
        .as_ref()
        .map(|Extension(k)| (k, &stored as TokenReplay<'_>));
    let (token, secret) = state
        .store
        .create_token_keyed(
            &NewToken {
                role: cmd.role,
                tenant,
                expires_at: expiry(&state, cmd.ttl_seconds),
                name: cmd.name,
            },
            admin.resolver(),
            key,
        )
        .await?;
    let replay = ReplayWith::problem(&already_created(&token));
    let mut res = (StatusCode::CREATED, Json(CreatedToken { token, secret })).into_response();
    res.extensions_mut().insert(replay);
    Ok(res)
}

/// What a replay of a token's creation answers: the secret is never shown again.
fn already_created(token: &TokenInfo) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "token.already_created",
        format!(
            "this Idempotency-Key already created token {}; its secret was shown only once \
             (revoke the token and create another if the secret was lost)",
            token.id
        ),
    )
}

fn expiry(state: &AppState, ttl_seconds: Option<i64>) -> Option<chrono::DateTime<chrono::Utc>> {
    ttl_seconds.map(|s| state.store.now() + chrono::Duration::seconds(s))
}

#[utoipa::path(
    get,
    path = "/v1/admin/tokens",
    tag = "admin",
    responses((status = 200, description = "Every token, never its secret", body = TokenList)),
    security(("bearer" = ["admin"]))
)]
async fn list_tokens(
    State(state): State<AppState>,
    _admin: Admin,
) -> Result<Json<TokenList>, ApiError> {
    Ok(Json(TokenList {
        tokens: state.store.list_tokens().await?,
    }))
}

#[utoipa::path(
    delete,
    path = "/v1/admin/tokens/{token_id}",
    tag = "admin",
    params(("token_id" = TokenId, Path, description = "The token to revoke")),
    responses(
        (status = 200, description = "The token, revoked (revoking twice changes nothing)", body = TokenInfo),
        (status = 404, description = "`token.not_found`", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["admin"]))
)]
async fn revoke_token(
    State(state): State<AppState>,
    admin: Admin,
    ids: PathIds,
) -> Result<Json<TokenInfo>, ApiError> {
    let token_id: TokenId = ids.get("token_id")?;
    let info = state
        .store
        .revoke_token(&token_id, admin.resolver())
        .await?;
    state.tokens.evict(&token_id);
    state.streams.revoked(&token_id);
    Ok(Json(info))
}
