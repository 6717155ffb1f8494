//! Grants: signed tokens that let their holder run commands in one sandbox generation until
//! they expire. The service mints them ([`GrantSigner`]); a provider checks them
//! ([`GrantVerifier`]).
//!
//! Two kinds, told apart by the token's prefix (see `docs/GRANTS.md`):
//! - `sgr2`: Ed25519. The service holds the private key, providers only the public key, so a
//!   provider cannot mint.
//! - `sgr1`: HMAC-SHA256 with a secret shared by the service and the provider (either can mint).
//!
//! Token: PREFIX + `.` + base64url(JSON claims) + `.` + base64url(signature over the first
//! two parts), unpadded. The claims name the provider the grant is for (its audience), so a
//! grant opens nothing on another provider that happens to hold a sandbox of the same id.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use chrono::{DateTime, Utc};
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::wire::Grant;

mod keys;
pub use keys::KeyError;

const HMAC_PREFIX: &str = "sgr1";
const ED25519_PREFIX: &str = "sgr2";
const MAX_TOKEN_LEN: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantClaims {
    /// The provider the grant is for: the id the service registered it under. Grants minted
    /// before audiences existed have none and are refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    pub sandbox_id: String,
    pub generation: u64,
    /// Unix milliseconds.
    pub expires_at_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    #[error("the grant is malformed")]
    Malformed,
    #[error("the grant is a `{got}` token; this verifier takes `{want}` tokens")]
    WrongKind {
        got: &'static str,
        want: &'static str,
    },
    #[error("the grant's signature does not match")]
    BadSignature,
    #[error("the grant expired at {0}")]
    Expired(DateTime<Utc>),
    #[error("the grant names no provider; ask the service for a fresh one")]
    NoAudience,
    #[error("the grant is for provider `{granted}`, not this one (`{this}`)")]
    WrongAudience { granted: String, this: String },
    #[error("the grant is for sandbox `{granted}`, not `{asked}`")]
    WrongSandbox { granted: String, asked: String },
    #[error("the grant is for generation {granted} of the sandbox, which is now at generation {current}")]
    WrongGeneration { granted: u64, current: u64 },
}

/// Mints grants: the service's side.
#[derive(Clone)]
pub enum GrantSigner {
    /// Shared secret: whoever verifies can also mint.
    Hmac(Vec<u8>),
    Ed25519(SigningKey),
}

impl std::fmt::Debug for GrantSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GrantSigner::Hmac(_) => f.write_str("GrantSigner::Hmac(***)"),
            GrantSigner::Ed25519(k) => write!(
                f,
                "GrantSigner::Ed25519({})",
                keys::public_key_text(&k.verifying_key())
            ),
        }
    }
}

/// Checks grants: a provider's side.
#[derive(Clone)]
pub enum GrantVerifier {
    Hmac(Vec<u8>),
    Ed25519(VerifyingKey),
}

impl std::fmt::Debug for GrantVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GrantVerifier::Hmac(_) => f.write_str("GrantVerifier::Hmac(***)"),
            GrantVerifier::Ed25519(k) => {
                write!(f, "GrantVerifier::Ed25519({})", keys::public_key_text(k))
            }
        }
    }
}

fn mac(secret: &[u8], data: &[u8]) -> Hmac<Sha256> {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    m.update(data);
    m
}

impl GrantSigner {
    pub fn hmac(secret: &[u8]) -> Self {
        GrantSigner::Hmac(secret.to_vec())
    }

    /// An Ed25519 signer from its 32-byte private key (seed).
    pub fn ed25519(seed: &[u8; 32]) -> Self {
        GrantSigner::Ed25519(SigningKey::from_bytes(seed))
    }

    /// An Ed25519 signer from its text form, `ed25519-priv:` + base64url(seed).
    pub fn from_private_key_text(text: &str) -> Result<Self, KeyError> {
        keys::parse_private_key(text).map(GrantSigner::Ed25519)
    }

    /// The text form of an Ed25519 signer's private key; `None` for a shared secret.
    pub fn private_key_text(&self) -> Option<String> {
        match self {
            GrantSigner::Hmac(_) => None,
            GrantSigner::Ed25519(k) => Some(keys::private_key_text(k)),
        }
    }

    /// What a provider needs to check this signer's grants.
    pub fn verifier(&self) -> GrantVerifier {
        match self {
            GrantSigner::Hmac(s) => GrantVerifier::Hmac(s.clone()),
            GrantSigner::Ed25519(k) => GrantVerifier::Ed25519(k.verifying_key()),
        }
    }

    /// Signs a grant for `sandbox_id` at `generation` on the provider `audience`, valid until
    /// `expires_at`.
    pub fn mint(
        &self,
        audience: &str,
        sandbox_id: &str,
        generation: u64,
        expires_at: DateTime<Utc>,
    ) -> Grant {
        let claims = GrantClaims {
            audience: Some(audience.to_owned()),
            sandbox_id: sandbox_id.to_owned(),
            generation,
            expires_at_ms: expires_at.timestamp_millis(),
        };
        let body = serde_json::to_vec(&claims).unwrap_or_default();
        let prefix = match self {
            GrantSigner::Hmac(_) => HMAC_PREFIX,
            GrantSigner::Ed25519(_) => ED25519_PREFIX,
        };
        let signed = format!("{prefix}.{}", B64.encode(body));
        let signature = match self {
            GrantSigner::Hmac(secret) => {
                B64.encode(mac(secret, signed.as_bytes()).finalize().into_bytes())
            }
            GrantSigner::Ed25519(key) => B64.encode(key.sign(signed.as_bytes()).to_bytes()),
        };
        Grant {
            token: format!("{signed}.{signature}"),
            sandbox_id: sandbox_id.to_owned(),
            generation,
            expires_at: DateTime::from_timestamp_millis(claims.expires_at_ms).unwrap_or_default(),
        }
    }
}

fn kind_of(prefix: &str) -> Option<&'static str> {
    match prefix {
        HMAC_PREFIX => Some(HMAC_PREFIX),
        ED25519_PREFIX => Some(ED25519_PREFIX),
        _ => None,
    }
}

impl GrantVerifier {
    pub fn hmac(secret: &[u8]) -> Self {
        GrantVerifier::Hmac(secret.to_vec())
    }

    /// An Ed25519 verifier from the text form of the service's public key,
    /// `ed25519-pub:` + base64url(key).
    pub fn from_public_key_text(text: &str) -> Result<Self, KeyError> {
        keys::parse_public_key(text).map(GrantVerifier::Ed25519)
    }

    /// The text form of an Ed25519 verifier's public key; `None` for a shared secret.
    pub fn public_key_text(&self) -> Option<String> {
        match self {
            GrantVerifier::Hmac(_) => None,
            GrantVerifier::Ed25519(k) => Some(keys::public_key_text(k)),
        }
    }

    /// A signer from the same key, when there is one: only a shared secret mints.
    pub fn signer(&self) -> Option<GrantSigner> {
        match self {
            GrantVerifier::Hmac(s) => Some(GrantSigner::Hmac(s.clone())),
            GrantVerifier::Ed25519(_) => None,
        }
    }

    fn prefix(&self) -> &'static str {
        match self {
            GrantVerifier::Hmac(_) => HMAC_PREFIX,
            GrantVerifier::Ed25519(_) => ED25519_PREFIX,
        }
    }

    /// Checks the signature only and returns the claims.
    pub fn decode(&self, token: &str) -> Result<GrantClaims, GrantError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(GrantError::Malformed);
        }
        let (signed, signature) = token.rsplit_once('.').ok_or(GrantError::Malformed)?;
        let (prefix, body) = signed.split_once('.').ok_or(GrantError::Malformed)?;
        let got = kind_of(prefix).ok_or(GrantError::Malformed)?;
        if got != self.prefix() {
            return Err(GrantError::WrongKind {
                got,
                want: self.prefix(),
            });
        }
        let signature = B64.decode(signature).map_err(|_| GrantError::Malformed)?;
        match self {
            GrantVerifier::Hmac(secret) => mac(secret, signed.as_bytes())
                .verify_slice(&signature)
                .map_err(|_| GrantError::BadSignature)?,
            GrantVerifier::Ed25519(key) => {
                let signature = ed25519_dalek::Signature::from_slice(&signature)
                    .map_err(|_| GrantError::Malformed)?;
                key.verify_strict(signed.as_bytes(), &signature)
                    .map_err(|_| GrantError::BadSignature)?
            }
        }
        let body = B64.decode(body).map_err(|_| GrantError::Malformed)?;
        serde_json::from_slice(&body).map_err(|_| GrantError::Malformed)
    }

    /// Accepts `token` only if its signature checks out, it is unexpired at `now`, it is for
    /// the provider `audience`, and it names `sandbox_id` at its `current_generation`.
    pub fn verify(
        &self,
        token: &str,
        audience: &str,
        sandbox_id: &str,
        current_generation: u64,
        now: DateTime<Utc>,
    ) -> Result<GrantClaims, GrantError> {
        let claims = self.decode(token)?;
        if claims.expires_at_ms <= now.timestamp_millis() {
            return Err(GrantError::Expired(
                DateTime::from_timestamp_millis(claims.expires_at_ms).unwrap_or_default(),
            ));
        }
        match claims.audience.as_deref() {
            None => return Err(GrantError::NoAudience),
            Some(granted) if granted != audience => {
                return Err(GrantError::WrongAudience {
                    granted: granted.to_owned(),
                    this: audience.to_owned(),
                })
            }
            Some(_) => {}
        }
        if claims.sandbox_id != sandbox_id {
            return Err(GrantError::WrongSandbox {
                granted: claims.sandbox_id,
                asked: sandbox_id.to_owned(),
            });
        }
        if claims.generation != current_generation {
            return Err(GrantError::WrongGeneration {
                granted: claims.generation,
                current: current_generation,
            });
        }
        Ok(claims)
    }
}

/// Whether `token` has the shape of a grant (either kind), signature unchecked.
pub fn looks_like_grant(token: &str) -> bool {
    token
        .split_once('.')
        .is_some_and(|(prefix, _)| kind_of(prefix).is_some())
}

/// Shared-secret shorthand for [`GrantSigner::mint`].
pub fn mint(
    secret: &[u8],
    audience: &str,
    sandbox_id: &str,
    generation: u64,
    expires_at: DateTime<Utc>,
) -> Grant {
    GrantSigner::hmac(secret).mint(audience, sandbox_id, generation, expires_at)
}

/// Shared-secret shorthand for [`GrantVerifier::verify`].
pub fn verify(
    secret: &[u8],
    token: &str,
    audience: &str,
    sandbox_id: &str,
    current_generation: u64,
    now: DateTime<Utc>,
) -> Result<GrantClaims, GrantError> {
    GrantVerifier::hmac(secret).verify(token, audience, sandbox_id, current_generation, now)
}

#[cfg(test)]
mod tests;
