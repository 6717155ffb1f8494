//! API tokens, roles and the authenticated principal.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use super::validate::ValidationError;
use super::TokenId;
use sagents_text_enum::text_enum;

text_enum! {
    pub enum Role as "role" {
        Frontend => "frontend",
        Runtime => "runtime",
        Admin => "admin",
        Metrics => "metrics",
    }
}

impl Role {
    /// Frontend and runtime tokens belong to a tenant; admin and metrics tokens see all.
    pub fn tenant_bound(self) -> bool {
        matches!(self, Role::Frontend | Role::Runtime)
    }
}

pub const DEFAULT_TENANT: &str = "default";
const SECRET_PREFIX: &str = "sag_";

/// A token as listed to operators: never the secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TokenInfo {
    pub id: TokenId,
    pub role: Role,
    pub tenant_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// After this instant the token is refused; never, when absent.
    pub expires_at: Option<DateTime<Utc>>,
    /// Who uses it, as people should read it (kept with the decisions it makes).
    pub name: Option<String>,
}

/// A token to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewToken {
    pub role: Role,
    pub tenant: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub name: Option<String>,
}

/// The longest display name of a token, in characters.
pub const MAX_TOKEN_NAME_CHARS: usize = 128;

/// A token's display name: 1 to 128 characters, none of them a control character.
pub fn check_name(name: &str) -> Result<(), ValidationError> {
    let n = name.chars().count();
    if !(1..=MAX_TOKEN_NAME_CHARS).contains(&n) || name.chars().any(char::is_control) {
        return Err(ValidationError::new(
            "name",
            format!(
                "must be 1 to {MAX_TOKEN_NAME_CHARS} characters, none of them a control character"
            ),
        ));
    }
    Ok(())
}

/// Who is calling, as resolved from a bearer token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub token_id: TokenId,
    pub role: Role,
    /// `None` only for admin and metrics tokens, which are not bound to a tenant.
    pub tenant_id: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
    /// The token's display name, if it has one.
    pub name: Option<String>,
}

impl Principal {
    /// Whether this principal may see a resource owned by `tenant`.
    pub fn can_see_tenant(&self, tenant: &str) -> bool {
        match &self.tenant_id {
            Some(own) => own == tenant,
            None => self.role == Role::Admin,
        }
    }
}

/// A freshly minted secret (`sag_` + 43 url-safe base64 characters) and its stored hash.
pub fn new_secret() -> (String, String) {
    use base64::Engine;
    let bytes: [u8; 32] = rand::random();
    let secret = format!(
        "{SECRET_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let hash = hash_secret(&secret);
    (secret, hash)
}

/// Tokens are stored as SHA-256 hex digests; the secret itself is never stored.
pub fn hash_secret(secret: &str) -> String {
    hex::encode(secret_digest(secret))
}

/// The SHA-256 of a secret, as bytes.
pub fn secret_digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_random_and_hash_stably() {
        let (a, ha) = new_secret();
        let (b, _) = new_secret();
        assert_ne!(a, b);
        assert!(a.starts_with("sag_"));
        assert_eq!(hash_secret(&a), ha);
        assert_eq!(ha.len(), 64);
    }

    #[test]
    fn tenant_visibility() {
        let p = Principal {
            token_id: TokenId::new(),
            role: Role::Frontend,
            tenant_id: Some("t1".into()),
            expires_at: None,
            name: None,
        };
        assert!(p.can_see_tenant("t1"));
        assert!(!p.can_see_tenant("t2"));
        let admin = Principal {
            token_id: TokenId::new(),
            role: Role::Admin,
            tenant_id: None,
            expires_at: None,
            name: None,
        };
        assert!(admin.can_see_tenant("t2"));
    }
}
