//! In-process cache of authenticated tokens, so a busy client does not cost a database
//! read per request.
//!
//! Only successful look-ups are cached, for [`TOKEN_CACHE_TTL`]. Revoking a token through
//! this replica evicts it at once; a revocation made through another replica takes effect
//! here within the TTL.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::domain::token::{hash_secret, Principal};
use crate::domain::TokenId;
use crate::store::{Store, StoreResult};

pub const TOKEN_CACHE_TTL: Duration = Duration::from_secs(5);
pub const TOKEN_CACHE_CAPACITY: usize = 10_000;

#[derive(Debug)]
pub struct TokenCache {
    ttl: Duration,
    capacity: usize,
    entries: Mutex<HashMap<String, (Principal, Instant)>>,
}

impl Default for TokenCache {
    fn default() -> Self {
        Self::new(TOKEN_CACHE_TTL, TOKEN_CACHE_CAPACITY)
    }
}

impl TokenCache {
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            ttl,
            capacity: capacity.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The principal of a bearer secret, or `None` for an unknown or revoked one.
    pub async fn authenticate(
        &self,
        store: &Store,
        secret: &str,
    ) -> StoreResult<Option<Principal>> {
        let hash = hash_secret(secret);
        if let Some(p) = self.get(&hash) {
            if p.expires_at.is_none_or(|at| at > store.now()) {
                return Ok(Some(p));
            }
        }
        let found = store.authenticate(&hash).await?;
        if let Some(p) = &found {
            self.put(hash, p.clone());
        }
        Ok(found)
    }

    fn get(&self, hash: &str) -> Option<Principal> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(hash)
            .filter(|(_, at)| at.elapsed() < self.ttl)
            .map(|(p, _)| p.clone())
    }

    fn put(&self, hash: String, principal: Principal) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= self.capacity {
            let ttl = self.ttl;
            entries.retain(|_, (_, at)| at.elapsed() < ttl);
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        entries.insert(hash, (principal, Instant::now()));
    }

    pub fn evict(&self, token_id: &TokenId) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.retain(|_, (p, _)| &p.token_id != token_id);
    }

    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::token::Role;

    fn principal() -> Principal {
        Principal {
            token_id: TokenId::new(),
            role: Role::Frontend,
            expires_at: None,
            tenant_id: Some("t".into()),
        }
    }

    #[test]
    fn entries_expire_are_bounded_and_evicted_by_token() {
        let cache = TokenCache::new(Duration::from_secs(60), 2);
        let (a, b, c) = (principal(), principal(), principal());
        cache.put("ha".into(), a.clone());
        cache.put("hb".into(), b.clone());
        assert_eq!(cache.get("ha"), Some(a.clone()));
        cache.put("hc".into(), c.clone());
        assert!(cache.len() <= 2);
        assert_eq!(cache.get("hc"), Some(c.clone()));
        cache.evict(&c.token_id);
        assert_eq!(cache.get("hc"), None);

        let short = TokenCache::new(Duration::ZERO, 10);
        short.put("ha".into(), a);
        assert_eq!(short.get("ha"), None);
    }
}
