//! In-process cache of authenticated tokens, so a busy client does not cost a database
//! read per request.
//!
//! Only successful look-ups are cached, for [`TOKEN_CACHE_TTL`]. Revoking a token through
//! this replica evicts it at once; a revocation made through another replica takes effect
//! here within the TTL.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::domain::token::{secret_digest, Principal};
use crate::domain::TokenId;
use crate::store::{Store, StoreResult};

pub const TOKEN_CACHE_TTL: Duration = Duration::from_secs(5);
pub const TOKEN_CACHE_CAPACITY: usize = 10_000;

/// The SHA-256 of a secret: the key of the cache, and in hex the key of the tokens table.
type Digest = [u8; 32];

#[derive(Debug)]
pub struct TokenCache {
    ttl: Duration,
    capacity: usize,
    entries: Mutex<HashMap<Digest, (Principal, Instant)>>,
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
        if let Some(p) = self.cached(secret, store) {
            return Ok(Some(p));
        }
        let digest = secret_digest(secret);
        let found = store.authenticate(&hex::encode(digest)).await?;
        if let Some(p) = &found {
            self.put(digest, p.clone());
        }
        Ok(found)
    }

    /// The principal of a bearer secret if this cache knows it and it has not expired; no
    /// database read.
    pub fn cached(&self, secret: &str, store: &Store) -> Option<Principal> {
        self.get(&secret_digest(secret))
            .filter(|p| p.expires_at.is_none_or(|at| at > store.now()))
    }

    fn get(&self, digest: &Digest) -> Option<Principal> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(digest)
            .filter(|(_, at)| at.elapsed() < self.ttl)
            .map(|(p, _)| p.clone())
    }

    fn put(&self, digest: Digest, principal: Principal) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= self.capacity {
            let ttl = self.ttl;
            entries.retain(|_, (_, at)| at.elapsed() < ttl);
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        entries.insert(digest, (principal, Instant::now()));
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
        cache.put([1; 32], a.clone());
        cache.put([2; 32], b.clone());
        assert_eq!(cache.get(&[1; 32]), Some(a.clone()));
        cache.put([3; 32], c.clone());
        assert!(cache.len() <= 2);
        assert_eq!(cache.get(&[3; 32]), Some(c.clone()));
        cache.evict(&c.token_id);
        assert_eq!(cache.get(&[3; 32]), None);

        let short = TokenCache::new(Duration::ZERO, 10);
        short.put([1; 32], a);
        assert_eq!(short.get(&[1; 32]), None);
    }
}
