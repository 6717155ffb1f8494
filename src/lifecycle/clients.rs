//! Clients of the registered providers, built from the registry and reused for a while, so
//! a re-registered provider (new URL or token) is picked up without a restart. A client kept
//! across a re-read of an unchanged registration keeps what was learnt of its provider (that
//! it speaks plugin API v3); a changed registration starts afresh.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::outcome;
use crate::config::Config;
use crate::providers::client::{
    CallOptions, ClientConfig, ProviderCallError, ProviderClient, Timeouts, UncertainKind,
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
    unanswered: Unanswered,
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
            unanswered: Unanswered::default(),
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

    /// Notes whether a call reached the provider; true when it answers after a call that did
    /// not (its waiting runs need not wait out their backoff).
    pub fn note_answer(&self, provider_id: &str, answered: Option<bool>) -> bool {
        self.unanswered.note(provider_id, answered)
    }

    /// Asks every provider whose last call got no answer for its capabilities; returns those
    /// that answer again.
    pub async fn probe_unanswered(&self, opts: &CallOptions) -> Vec<String> {
        let ids = self.unanswered.list();
        let mut back = Vec::new();
        for id in ids {
            let answered = match self.get(&id).await {
                Ok(client) => client.capabilities(opts).await.map(|_| ()),
                Err(e) => Err(e),
            };
            if self.note_answer(&id, reached_provider(&answered)) {
                back.push(id);
            }
        }
        back
    }
}

/// Providers whose last call got no answer from them (refused, cut, an ingress's page).
#[derive(Default)]
struct Unanswered(Mutex<HashSet<String>>);

impl Unanswered {
    fn note(&self, provider_id: &str, answered: Option<bool>) -> bool {
        let mut set = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match answered {
            Some(true) => set.remove(provider_id),
            Some(false) => {
                set.insert(provider_id.to_owned());
                false
            }
            None => false,
        }
    }

    fn list(&self) -> Vec<String> {
        let set = self.0.lock().unwrap_or_else(|e| e.into_inner());
        set.iter().cloned().collect()
    }
}

/// Whether a call reached the provider: `Some(false)` when something else answered or
/// nothing did, `None` when it says nothing of the provider (a slow answer, a bad setting).
pub fn reached_provider<T>(result: &Result<T, ProviderCallError>) -> Option<bool> {
    match result {
        Ok(_) => Some(true),
        Err(ProviderCallError::Unreachable(_)) => Some(false),
        Err(ProviderCallError::Uncertain { kind, .. }) => match kind {
            UncertainKind::ConnectionLost | UncertainKind::NotProviderAnswer { .. } => Some(false),
            UncertainKind::Timeout => None,
            _ => Some(true),
        },
        Err(ProviderCallError::Config(_)) => None,
        Err(_) => Some(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uncertain(kind: UncertainKind) -> Result<(), ProviderCallError> {
        Err(ProviderCallError::Uncertain {
            kind,
            message: String::new(),
        })
    }

    #[test]
    fn only_a_call_that_got_no_answer_marks_a_provider_unanswered() {
        assert_eq!(reached_provider(&Ok::<(), _>(())), Some(true));
        let refused = Err(ProviderCallError::Unreachable("refused".into()));
        assert_eq!(reached_provider::<()>(&refused), Some(false));
        let page = uncertain(UncertainKind::NotProviderAnswer { status: 502 });
        assert_eq!(reached_provider(&page), Some(false));
        assert_eq!(
            reached_provider(&uncertain(UncertainKind::ConnectionLost)),
            Some(false)
        );
        assert_eq!(reached_provider(&uncertain(UncertainKind::Timeout)), None);
        let unknown = uncertain(UncertainKind::UnknownError { status: 500 });
        assert_eq!(reached_provider(&unknown), Some(true));
    }

    #[test]
    fn a_provider_is_back_once_after_it_did_not_answer() {
        let unanswered = Unanswered::default();
        assert!(!unanswered.note("p", Some(true)), "never missing");
        assert!(!unanswered.note("p", Some(false)));
        assert!(!unanswered.note("p", None), "a slow answer says nothing");
        assert_eq!(unanswered.list(), ["p"]);
        assert!(unanswered.note("p", Some(true)));
        assert!(!unanswered.note("p", Some(true)), "back once");
        assert!(unanswered.list().is_empty());
    }
}
