//! Clients of the registered providers, built from the registry and reused for a while, so
//! a re-registered provider (new URL or token) is picked up without a restart.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::outcome;
use crate::providers::client::{ProviderCallError, ProviderClient};
use crate::service::providers;
use crate::store::Store;

/// How long a client is reused before its registration is read again.
pub const CLIENT_CACHE_TTL: Duration = Duration::from_secs(30);

struct Cached {
    client: ProviderClient,
    fetched: Instant,
}

pub struct ProviderClients {
    store: Store,
    cache: Mutex<HashMap<String, Cached>>,
}

impl ProviderClients {
    pub fn new(store: Store) -> Self {
        Self {
            store,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// An unregistered provider is a `Config` error: retrying helps once it is registered.
    pub async fn get(&self, provider_id: &str) -> Result<ProviderClient, ProviderCallError> {
        {
            let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = cache.get(provider_id) {
                if c.fetched.elapsed() < CLIENT_CACHE_TTL {
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
        let client = providers::client_for(&record)?;
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.insert(
            provider_id.to_owned(),
            Cached {
                client: client.clone(),
                fetched: Instant::now(),
            },
        );
        Ok(client)
    }

    /// A provider that cannot be reached may have moved, and one that refuses our token may
    /// have a new one: read its registration again next time.
    pub fn forget_on(&self, provider_id: &str, e: &ProviderCallError) {
        let stale = match e {
            ProviderCallError::Unreachable(_) | ProviderCallError::Config(_) => true,
            ProviderCallError::Refused { status, .. } => outcome::is_auth_refusal(*status),
            _ => false,
        };
        if stale {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            cache.remove(provider_id);
        }
    }
}
