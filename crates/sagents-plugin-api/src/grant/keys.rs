//! Text forms of Ed25519 grant keys: `ed25519-pub:` or `ed25519-priv:` + base64url of the
//! 32 key bytes, unpadded. Surrounding whitespace is ignored.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use ed25519_dalek::{SigningKey, VerifyingKey};

const PUBLIC_PREFIX: &str = "ed25519-pub:";
const PRIVATE_PREFIX: &str = "ed25519-priv:";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error(
        "this is a grant private key; a provider takes the public key (`sagents grant public-key`)"
    )]
    PrivateGivenForPublic,
    #[error("this is a grant public key; signing needs the private key")]
    PublicGivenForPrivate,
    #[error("a grant {0} key must read `{1}` followed by 32 bytes in unpadded base64url")]
    Malformed(&'static str, &'static str),
    #[error("the grant public key is not a valid Ed25519 point")]
    NotOnCurve,
}

fn key_bytes(text: &str, prefix: &'static str, what: &'static str) -> Result<[u8; 32], KeyError> {
    let bad = || KeyError::Malformed(what, prefix);
    let body = text.trim().strip_prefix(prefix).ok_or_else(bad)?;
    let bytes = B64.decode(body).map_err(|_| bad())?;
    bytes.try_into().map_err(|_| bad())
}

pub(super) fn parse_public_key(text: &str) -> Result<VerifyingKey, KeyError> {
    if text.trim().starts_with(PRIVATE_PREFIX) {
        return Err(KeyError::PrivateGivenForPublic);
    }
    let bytes = key_bytes(text, PUBLIC_PREFIX, "public")?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| KeyError::NotOnCurve)
}

pub(super) fn parse_private_key(text: &str) -> Result<SigningKey, KeyError> {
    if text.trim().starts_with(PUBLIC_PREFIX) {
        return Err(KeyError::PublicGivenForPrivate);
    }
    key_bytes(text, PRIVATE_PREFIX, "private").map(|b| SigningKey::from_bytes(&b))
}

pub(super) fn public_key_text(key: &VerifyingKey) -> String {
    format!("{PUBLIC_PREFIX}{}", B64.encode(key.as_bytes()))
}

pub(super) fn private_key_text(key: &SigningKey) -> String {
    format!("{PRIVATE_PREFIX}{}", B64.encode(key.to_bytes()))
}
