//! Secrets at rest: provider tokens are sealed with AES-256-GCM under the first key of
//! `SAGENTS_SECRET_KEY` (or of the key file); every configured key opens what it sealed, so a
//! key can be rotated without downtime (see the README's "Secret keys").
//!
//! Sealed value: `sealed:v1:<key id>:<base64url(nonce ‖ ciphertext ‖ tag)>`; the key id is the
//! first 4 bytes of the key's SHA-256, in hex; the row's context (e.g. `provider:local`) is
//! the associated data, so a sealed value copied to another row does not open.

use std::fmt;

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use sha2::{Digest, Sha256};

const PREFIX: &str = "sealed:v1:";
const KEY_LEN: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("a secret key must be 32 bytes in base64 (`sagents secrets generate-key` makes one); key {0} is not")]
    BadKey(usize),
    #[error("the secret key file: {0}")]
    KeyFile(String),
    #[error("the value is sealed under key `{0}`, which is not configured")]
    UnknownKey(String),
    #[error("the sealed value is damaged or belongs to another row")]
    Damaged,
    #[error("the system's random source failed")]
    Random,
}

struct Key {
    id: String,
    key: LessSafeKey,
}

/// The configured keys, the sealing one first; with none, values are kept as they are.
#[derive(Default)]
pub struct Sealer {
    keys: Vec<Key>,
}

impl Sealer {
    /// No keys: values are stored as given.
    pub const fn none() -> Self {
        Sealer { keys: Vec::new() }
    }
}

impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|k| k.id.as_str()).collect();
        f.debug_struct("Sealer").field("key_ids", &ids).finish()
    }
}

fn decode_key(text: &str) -> Option<[u8; KEY_LEN]> {
    [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|e| e.decode(text).ok())
        .and_then(|bytes| bytes.try_into().ok())
}

/// A fresh random key, in the form `SAGENTS_SECRET_KEY` takes.
pub fn generate_key() -> Result<String, SealError> {
    let mut key = [0u8; KEY_LEN];
    SystemRandom::new()
        .fill(&mut key)
        .map_err(|_| SealError::Random)?;
    Ok(STANDARD.encode(key))
}

impl Sealer {
    /// Keys separated by commas or newlines, the sealing one first; blank entries are skipped.
    pub fn from_keys(text: &str) -> Result<Self, SealError> {
        let mut keys = Vec::new();
        for (i, entry) in text
            .split([',', '\n'])
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .enumerate()
        {
            let bytes = decode_key(entry).ok_or(SealError::BadKey(i + 1))?;
            let id = hex::encode(&Sha256::digest(bytes)[..4]);
            let unbound =
                UnboundKey::new(&AES_256_GCM, &bytes).map_err(|_| SealError::BadKey(i + 1))?;
            keys.push(Key {
                id,
                key: LessSafeKey::new(unbound),
            });
        }
        Ok(Sealer { keys })
    }

    pub fn is_enabled(&self) -> bool {
        !self.keys.is_empty()
    }

    /// The id of the sealing key.
    pub fn current_key_id(&self) -> Option<&str> {
        self.keys.first().map(|k| k.id.as_str())
    }

    /// `plain` sealed under the first key for `context`; unchanged when no key is configured.
    pub fn seal(&self, context: &str, plain: &str) -> Result<String, SealError> {
        let Some(key) = self.keys.first() else {
            return Ok(plain.to_owned());
        };
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| SealError::Random)?;
        let mut data = plain.as_bytes().to_vec();
        key.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context.as_bytes()),
                &mut data,
            )
            .map_err(|_| SealError::Damaged)?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Ok(format!(
            "{PREFIX}{}:{}",
            key.id,
            URL_SAFE_NO_PAD.encode(out)
        ))
    }

    /// The plain value of a stored one: a sealed value opens under its key; a value stored
    /// before sealing was configured is returned as it is.
    pub fn open(&self, context: &str, stored: &str) -> Result<String, SealError> {
        let Some(rest) = stored.strip_prefix(PREFIX) else {
            return Ok(stored.to_owned());
        };
        let (id, body) = rest.split_once(':').ok_or(SealError::Damaged)?;
        let key = self
            .keys
            .iter()
            .find(|k| k.id == id)
            .ok_or_else(|| SealError::UnknownKey(id.to_owned()))?;
        let mut data = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| SealError::Damaged)?;
        if data.len() < NONCE_LEN {
            return Err(SealError::Damaged);
        }
        let mut sealed = data.split_off(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(&data).map_err(|_| SealError::Damaged)?;
        let plain = key
            .key
            .open_in_place(nonce, Aad::from(context.as_bytes()), &mut sealed)
            .map_err(|_| SealError::Damaged)?;
        String::from_utf8(plain.to_vec()).map_err(|_| SealError::Damaged)
    }

    /// Whether `stored` is already as [`Sealer::seal`] would store it now (sealed under the
    /// first key, or plain when there is none).
    pub fn is_current(&self, stored: &str) -> bool {
        match self.current_key_id() {
            None => !stored.starts_with(PREFIX),
            Some(id) => stored
                .strip_prefix(PREFIX)
                .and_then(|r| r.split_once(':'))
                .is_some_and(|(kid, _)| kid == id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> String {
        generate_key().unwrap()
    }

    #[test]
    fn a_sealed_value_opens_only_under_its_key_and_context() {
        let (a, b) = (key(), key());
        let sealer = Sealer::from_keys(&a).unwrap();
        let sealed = sealer.seal("provider:local", "ptok").unwrap();
        assert!(sealed.starts_with("sealed:v1:"));
        assert!(!sealed.contains("ptok"));
        assert_ne!(sealed, sealer.seal("provider:local", "ptok").unwrap());
        assert_eq!(sealer.open("provider:local", &sealed).unwrap(), "ptok");
        assert_eq!(
            sealer.open("provider:other", &sealed),
            Err(SealError::Damaged)
        );
        let other = Sealer::from_keys(&b).unwrap();
        assert!(matches!(
            other.open("provider:local", &sealed),
            Err(SealError::UnknownKey(_))
        ));
        let mut tampered = sealed.clone();
        tampered.pop();
        tampered.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert_eq!(
            sealer.open("provider:local", &tampered),
            Err(SealError::Damaged)
        );
    }

    #[test]
    fn rotation_opens_old_values_and_seals_with_the_first_key() {
        let (old, new) = (key(), key());
        let before = Sealer::from_keys(&old).unwrap();
        let sealed = before.seal("provider:p", "t").unwrap();
        let during = Sealer::from_keys(&format!("{new},{old}")).unwrap();
        assert_eq!(during.open("provider:p", &sealed).unwrap(), "t");
        assert!(!during.is_current(&sealed));
        let resealed = during.seal("provider:p", "t").unwrap();
        assert!(during.is_current(&resealed));
        let after = Sealer::from_keys(&format!("{new}\n")).unwrap();
        assert_eq!(after.open("provider:p", &resealed).unwrap(), "t");
    }

    #[test]
    fn without_keys_values_stay_plain_and_plain_values_always_open() {
        let none = Sealer::default();
        assert!(!none.is_enabled());
        assert_eq!(none.seal("c", "t").unwrap(), "t");
        assert!(none.is_current("t"));
        let some = Sealer::from_keys(&key()).unwrap();
        assert_eq!(some.open("c", "legacy").unwrap(), "legacy");
        assert!(!some.is_current("legacy"));
    }

    #[test]
    fn bad_keys_are_refused_by_position() {
        assert_eq!(
            Sealer::from_keys("c2hvcnQ=").unwrap_err(),
            SealError::BadKey(1)
        );
        assert_eq!(
            Sealer::from_keys(&format!("{}, not base64!", key())).unwrap_err(),
            SealError::BadKey(2)
        );
        assert!(!format!("{:?}", Sealer::from_keys(&key()).unwrap()).contains('='));
    }
}
