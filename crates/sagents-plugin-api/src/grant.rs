//! Grants: HMAC-SHA256 signed tokens, keyed by a secret shared between the service and the
//! provider, that let their holder operate in one sandbox generation until they expire.
//!
//! Token: `sgr1.` + base64url(JSON claims) + `.` + base64url(HMAC-SHA256 of the first two
//! parts).

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::wire::Grant;

const PREFIX: &str = "sgr1";
const MAX_TOKEN_LEN: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantClaims {
    pub sandbox_id: String,
    pub generation: u64,
    /// Unix milliseconds.
    pub expires_at_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    #[error("the grant is malformed")]
    Malformed,
    #[error("the grant's signature does not match")]
    BadSignature,
    #[error("the grant expired at {0}")]
    Expired(DateTime<Utc>),
    #[error("the grant is for sandbox `{granted}`, not `{asked}`")]
    WrongSandbox { granted: String, asked: String },
    #[error("the grant is for generation {granted} of the sandbox, which is now at generation {current}")]
    WrongGeneration { granted: u64, current: u64 },
}

fn mac(secret: &[u8], data: &[u8]) -> Hmac<Sha256> {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    m.update(data);
    m
}

/// Signs a grant for `sandbox_id` at `generation`, valid until `expires_at`.
pub fn mint(secret: &[u8], sandbox_id: &str, generation: u64, expires_at: DateTime<Utc>) -> Grant {
    let claims = GrantClaims {
        sandbox_id: sandbox_id.to_owned(),
        generation,
        expires_at_ms: expires_at.timestamp_millis(),
    };
    let body = serde_json::to_vec(&claims).unwrap_or_default();
    let signed = format!("{PREFIX}.{}", B64.encode(body));
    let tag = mac(secret, signed.as_bytes()).finalize().into_bytes();
    Grant {
        token: format!("{signed}.{}", B64.encode(tag)),
        sandbox_id: sandbox_id.to_owned(),
        generation,
        expires_at: DateTime::from_timestamp_millis(claims.expires_at_ms).unwrap_or_default(),
    }
}

/// Checks the signature only and returns the claims.
pub fn decode(secret: &[u8], token: &str) -> Result<GrantClaims, GrantError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(GrantError::Malformed);
    }
    let (signed, tag) = token.rsplit_once('.').ok_or(GrantError::Malformed)?;
    let (prefix, body) = signed.split_once('.').ok_or(GrantError::Malformed)?;
    if prefix != PREFIX {
        return Err(GrantError::Malformed);
    }
    let tag = B64.decode(tag).map_err(|_| GrantError::Malformed)?;
    mac(secret, signed.as_bytes())
        .verify_slice(&tag)
        .map_err(|_| GrantError::BadSignature)?;
    let body = B64.decode(body).map_err(|_| GrantError::Malformed)?;
    serde_json::from_slice(&body).map_err(|_| GrantError::Malformed)
}

/// Accepts `token` only if it is signed with `secret`, unexpired at `now`, and names
/// `sandbox_id` at its `current_generation`.
pub fn verify(
    secret: &[u8],
    token: &str,
    sandbox_id: &str,
    current_generation: u64,
    now: DateTime<Utc>,
) -> Result<GrantClaims, GrantError> {
    let claims = decode(secret, token)?;
    if claims.expires_at_ms <= now.timestamp_millis() {
        return Err(GrantError::Expired(
            DateTime::from_timestamp_millis(claims.expires_at_ms).unwrap_or_default(),
        ));
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

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    const SECRET: &[u8] = b"shared-secret";

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp_millis(Utc::now().timestamp_millis()).unwrap()
    }

    #[test]
    fn a_fresh_grant_verifies() {
        let t = now();
        let g = mint(SECRET, "sbx_1", 3, t + Duration::seconds(60));
        assert_eq!(g.generation, 3);
        assert_eq!(g.expires_at, t + Duration::seconds(60));
        let claims = verify(SECRET, &g.token, "sbx_1", 3, t).unwrap();
        assert_eq!(claims.sandbox_id, "sbx_1");
    }

    #[test]
    fn tampering_is_detected() {
        let t = now();
        let g = mint(SECRET, "sbx_1", 1, t + Duration::seconds(60));
        let forged = mint(b"other-secret", "sbx_1", 1, t + Duration::seconds(60));
        assert_eq!(
            verify(SECRET, &forged.token, "sbx_1", 1, t),
            Err(GrantError::BadSignature)
        );
        // Swap in claims for another generation, keep the old signature.
        let other = mint(SECRET, "sbx_1", 2, t + Duration::seconds(60));
        let (_, old_tag) = g.token.rsplit_once('.').unwrap();
        let (other_signed, _) = other.token.rsplit_once('.').unwrap();
        let spliced = format!("{other_signed}.{old_tag}");
        assert_eq!(
            verify(SECRET, &spliced, "sbx_1", 2, t),
            Err(GrantError::BadSignature)
        );
        for junk in ["", "sgr1", "sgr1.a.b", "xyz.abc.def", "sgr1.!!.??"] {
            assert!(verify(SECRET, junk, "sbx_1", 1, t).is_err(), "{junk}");
        }
    }

    #[test]
    fn expired_grants_are_refused() {
        let t = now();
        let g = mint(SECRET, "sbx_1", 1, t + Duration::seconds(5));
        assert!(verify(SECRET, &g.token, "sbx_1", 1, t + Duration::seconds(4)).is_ok());
        assert!(matches!(
            verify(SECRET, &g.token, "sbx_1", 1, t + Duration::seconds(5)),
            Err(GrantError::Expired(_))
        ));
    }

    #[test]
    fn a_grant_names_one_sandbox_and_one_generation() {
        let t = now();
        let g = mint(SECRET, "sbx_1", 1, t + Duration::seconds(60));
        assert!(matches!(
            verify(SECRET, &g.token, "sbx_2", 1, t),
            Err(GrantError::WrongSandbox { .. })
        ));
        assert_eq!(
            verify(SECRET, &g.token, "sbx_1", 2, t),
            Err(GrantError::WrongGeneration {
                granted: 1,
                current: 2
            })
        );
    }
}
