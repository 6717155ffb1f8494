//! Bearer-token authentication and role checks, as extractors.

use std::marker::PhantomData;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};

use super::error::ApiError;
use super::state::AppState;
use crate::domain::interaction::Resolver;
use crate::domain::token::{Principal, Role};

const MAX_SECRET_LEN: usize = 512;

/// Resolves the caller of a request: 401 when the token is missing, unknown or revoked.
pub async fn authenticate(headers: &HeaderMap, state: &AppState) -> Result<Principal, ApiError> {
    look_up(bearer_secret(headers)?, state).await
}

/// The secret of `Authorization: Bearer <secret>`: 401 when missing or malformed.
fn bearer_secret(headers: &HeaderMap) -> Result<&str, ApiError> {
    let value = headers.get(header::AUTHORIZATION).ok_or_else(|| {
        ApiError::unauthorized("this endpoint needs `Authorization: Bearer <token>`")
    })?;
    value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, secret)| secret.trim())
        .filter(|s| !s.is_empty() && s.len() <= MAX_SECRET_LEN)
        .ok_or_else(|| ApiError::unauthorized("the Authorization header must be `Bearer <token>`"))
}

async fn look_up(secret: &str, state: &AppState) -> Result<Principal, ApiError> {
    state
        .tokens
        .authenticate(&state.store, secret)
        .await?
        .ok_or_else(|| ApiError::unauthorized("the token is unknown or revoked"))
}

pub trait RoleMarker: Send + Sync + 'static {
    /// The roles allowed, the first named in a refusal.
    const ROLES: &'static [Role];
}

#[derive(Debug)]
pub struct FrontendRole;
#[derive(Debug)]
pub struct RuntimeRole;
#[derive(Debug)]
pub struct AdminRole;
#[derive(Debug)]
pub struct ObserverRole;
#[derive(Debug)]
pub struct AuditorRole;

impl RoleMarker for FrontendRole {
    const ROLES: &'static [Role] = &[Role::Frontend];
}
impl RoleMarker for RuntimeRole {
    const ROLES: &'static [Role] = &[Role::Runtime];
}
impl RoleMarker for AdminRole {
    const ROLES: &'static [Role] = &[Role::Admin];
}
impl RoleMarker for ObserverRole {
    const ROLES: &'static [Role] = &[Role::Admin, Role::Metrics];
}
impl RoleMarker for AuditorRole {
    const ROLES: &'static [Role] = &[Role::Admin, Role::Frontend];
}

/// An authenticated caller holding role `R` (403 for any other role).
#[derive(Debug)]
pub struct Auth<R> {
    pub principal: Principal,
    role: PhantomData<R>,
}

pub type Frontend = Auth<FrontendRole>;
pub type Runtime = Auth<RuntimeRole>;
pub type Admin = Auth<AdminRole>;
/// Reads metrics: an admin or a read-only `metrics` token (a Prometheus scraper's).
pub type Observer = Auth<ObserverRole>;
/// Reads the audit trail: an admin (any chain) or a frontend (its tenant's).
pub type Auditor = Auth<AuditorRole>;

impl<R: RoleMarker> FromRequestParts<AppState> for Auth<R> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let principal = match parts.extensions.get::<Principal>() {
            Some(p) => p.clone(),
            None => {
                let secret = bearer_secret(&parts.headers)?;
                match state.tokens.cached(secret, &state.store) {
                    Some(p) => p,
                    // Boxed: a long-poll should not carry a token lookup's state while it waits.
                    None => Box::pin(look_up(secret, state)).await?,
                }
            }
        };
        if !R::ROLES.contains(&principal.role) {
            let wanted: Vec<String> = R::ROLES.iter().map(|r| format!("`{r}`")).collect();
            return Err(ApiError::forbidden(format!(
                "this endpoint needs a {} token, not a `{}` token",
                wanted.join(" or "),
                principal.role
            )));
        }
        Ok(Self {
            principal,
            role: PhantomData,
        })
    }
}

impl<R> Auth<R> {
    /// The tenant scope for store calls (`None` only for admin tokens).
    pub fn scope(&self) -> Option<&str> {
        self.principal.tenant_id.as_deref()
    }

    /// The caller's tenant, for creating things that belong to one.
    pub fn tenant(&self) -> Result<&str, ApiError> {
        self.scope()
            .ok_or_else(|| ApiError::forbidden("this token is not bound to a tenant"))
    }

    pub fn actor(&self) -> String {
        format!("token:{}", self.principal.token_id)
    }

    /// The caller as the answerer of an interaction: its actor id and its token's name.
    pub fn resolver(&self) -> Resolver {
        Resolver {
            id: self.actor(),
            name: self.principal.name.clone(),
        }
    }
}
