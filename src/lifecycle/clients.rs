//! Clients of the registered providers, built from the registry and reused for a while, so
//! a re-registered provider (new URL or token) is picked up without a restart. A client kept
//! across a re-read of an unchanged registration keeps what was learnt of its provider (that
//! it speaks plugin API v3); a changed registration starts afresh.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::outcome;
use crate::config::Config;
use crate::providers::client::{
    ClientConfig, ProviderCallError, ProviderClient, Timeouts, UncertainKind,
};
use crate::store::Store;

/// How long a client is reused before its registration is read again.
pub const CLIENT_CACHE_TTL: Duration = Duration::from_secs(30);

struct Cached {
    client: ProviderClient,
    fetched: Option<Instant>,
}

pub struct ProviderClients {
    store: Store,
    config: ClientConfig,
    cache: Mutex<HashMap<String, Cached>>,
}

impl ProviderClients {
    pub fn new(store: Store) -> Self {
        Self::with_config(store, ClientConfig::default())
    }

    pub fn with_config(store: Store, config: ClientConfig) -> Self {
        Self {
            store,
            config,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Clients with the per-operation timeouts of the service's settings.
    pub fn from_config(store: Store, config: &Config) -> Self {
        let client = ClientConfig {
            timeouts: Timeouts {
                release: config.provider_release_timeout(),
                restore: config.provider_restore_timeout(),
                provision: config.provider_provision_timeout(),
                attach: config.provider_attach_timeout(),
                ..Timeouts::default()
            },
            ..ClientConfig::default()
        };
        Self::with_config(store, client)
    }

    /// The timeouts every client is built with (request contexts carry the same deadlines).
    pub fn timeouts(&self) -> &Timeouts {
        &self.config.timeouts
    }

    /// An unregistered provider is a `Config` error: retrying helps once it is registered.
    pub async fn get(&self, provider_id: &str) -> Result<ProviderClient, ProviderCallError> {
        {
            let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = cache.get(provider_id) {
                if c.fetched.is_some_and(|t| t.elapsed() < CLIENT_CACHE_TTL) {
                    return Ok(c.client.clone());
                }
            }
        }
        let record = self
            .store
            .get_provider(provider_id)
            .await
            .map_err(|e| ProviderCallError::Unreachable(format!("reading the provider: {e}")))?
            .ok_or_else(|| {
                ProviderCallError::Config(format!("provider `{provider_id}` is not registered"))
            })?;
        let fresh = ProviderClient::with_config(
            &record.base_url,
            Some(&record.token),
            self.config.clone(),
        )?;
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let client = match cache.get(provider_id) {
            Some(old) if old.client.same_endpoint(&fresh) => old.client.clone(),
            _ => fresh,
        };
        cache.insert(
            provider_id.to_owned(),
            Cached {
                client: client.clone(),
                fetched: Some(Instant::now()),
            },
        );
        Ok(client)
    }

    /// A provider that cannot be reached may have moved, and one that refuses our token may
    /// have a new one: read its registration again next time.
    pub fn forget_on(&self, provider_id: &str, e: &ProviderCallError) {
        let stale = match e {
            ProviderCallError::Unreachable(_) | ProviderCallError::Config(_) => true,
            ProviderCallError::Refused { status, .. }
            | ProviderCallError::Uncertain {
                kind: UncertainKind::NotProviderAnswer { status },
                ..
            } => outcome::is_auth_refusal(*status),
            _ => false,
        };
        if stale {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = cache.get_mut(provider_id) {
                c.fetched = None;
            }
        }
    }
}
