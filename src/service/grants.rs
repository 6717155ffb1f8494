//! The key that signs grants: the configured shared secret or Ed25519 key, else the Ed25519
//! key stored in the database (generated there on first use, the same for every replica,
//! sealed under `SAGENTS_SECRET_KEY` when one is set).

use std::path::PathBuf;

use crate::config::{Config, Secret};
use crate::providers::grant::{GrantSigner, KeyError};
use crate::store::{Store, StoreError};

/// The settings row holding the generated signing key.
pub const SIGNING_KEY_SETTING: &str = "grant_signing_key";

#[derive(Debug, thiserror::Error)]
pub enum GrantKeyError {
    #[error("reading the grant signing key {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the grant signing key: {0}")]
    Key(#[from] KeyError),
    #[error(
        "grants take either SAGENTS_GRANT_SECRET or SAGENTS_GRANT_SIGNING_KEY(_FILE), not both"
    )]
    SecretAndKey,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A fresh Ed25519 signing key.
pub fn generate() -> GrantSigner {
    GrantSigner::ed25519(&rand::random::<[u8; 32]>())
}

/// The signer the configuration names, if it names one.
pub fn configured(config: &Config) -> Result<Option<GrantSigner>, GrantKeyError> {
    let present = |s: &Option<Secret>| {
        s.as_ref()
            .map(|s| s.expose().to_owned())
            .filter(|s| !s.trim().is_empty())
    };
    let secret = present(&config.grant_secret);
    let key_file = (config.grant_signing_key_file.as_ref()).filter(|p| !p.as_os_str().is_empty());
    let key_given = key_file.is_some() || present(&config.grant_signing_key).is_some();
    match secret {
        Some(_) if key_given => return Err(GrantKeyError::SecretAndKey),
        Some(secret) => return Ok(Some(GrantSigner::hmac(secret.as_bytes()))),
        None => {}
    }
    let text = match key_file {
        Some(path) => {
            Some(
                std::fs::read_to_string(path).map_err(|source| GrantKeyError::Read {
                    path: path.clone(),
                    source,
                })?,
            )
        }
        None => present(&config.grant_signing_key),
    };
    Ok(text
        .map(|t| GrantSigner::from_private_key_text(&t))
        .transpose()?)
}

/// The configured signer, else the database's.
pub async fn signer(config: &Config, store: &Store) -> Result<GrantSigner, GrantKeyError> {
    if let Some(signer) = configured(config)? {
        return Ok(signer);
    }
    let fresh = generate().private_key_text().unwrap_or_default();
    // Sealed like provider tokens when a secret key is configured.
    let stored = store
        .secret_setting_or_init(SIGNING_KEY_SETTING, &fresh)
        .await?;
    Ok(GrantSigner::from_private_key_text(&stored)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_picks_the_kind() {
        let mut c = Config::with_database("sqlite://x");
        assert!(configured(&c).unwrap().is_none());
        c.grant_secret = Some("s".parse().unwrap());
        assert!(matches!(
            configured(&c).unwrap(),
            Some(GrantSigner::Hmac(_))
        ));
        c.grant_secret = None;
        let key = generate().private_key_text().unwrap();
        c.grant_signing_key = Some(key.parse().unwrap());
        assert!(matches!(
            configured(&c).unwrap(),
            Some(GrantSigner::Ed25519(_))
        ));
        c.grant_signing_key = Some("ed25519-pub:AAAA".parse().unwrap());
        assert!(matches!(
            configured(&c),
            Err(GrantKeyError::Key(KeyError::PublicGivenForPrivate))
        ));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("grant.key");
        std::fs::write(&path, format!("{key}\n")).unwrap();
        c.grant_signing_key = None;
        c.grant_signing_key_file = Some(path);
        let from_file = configured(&c).unwrap().unwrap();
        assert_eq!(from_file.private_key_text(), Some(key));
        c.grant_secret = Some("s".parse().unwrap());
        assert!(matches!(configured(&c), Err(GrantKeyError::SecretAndKey)));
        // An empty variable counts as unset.
        c.grant_secret = Some("".parse().unwrap());
        assert!(configured(&c).unwrap().is_some());
    }
}
