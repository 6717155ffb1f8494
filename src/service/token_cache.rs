//! In-process cache of authenticated tokens, so a busy client does not cost a database
//! read per request.
//!
//! Only successful look-ups are cached, for [`TOKEN_CACHE_TTL`]. Revoking a token through
//! this replica evicts it at once; a revocation made through another replica takes effect
//! here within the TTL.
//!
//! Each thread also keeps the last secret it found here, so a client polling on a keep-alive
//! connection costs neither a SHA-256 nor the shared lock. Every eviction makes all of them
//! stale, and each lives no longer than the entry it was found in.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// Tells this cache's entries in a thread's [`Last`] from another cache's.
    nonce: u64,
    /// Bumped by every eviction, which makes every thread's [`Last`] stale.
    evictions: AtomicU64,
}

/// The secret a thread authenticated last and what the cache said of it: a client polling
/// on a keep-alive connection sends the same secret again and again.
struct Last {
    nonce: u64,
    evictions: u64,
    secret: String,
    principal: Principal,
    at: Instant,
}

thread_local! {
    static LAST: RefCell<Option<Last>> = const { RefCell::new(None) };
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
            nonce: rand::random(),
            evictions: AtomicU64::new(0),
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
        self.known(secret)
            .filter(|p| p.expires_at.is_none_or(|at| at > store.now()))
    }

    /// The principal of a fresh entry: this thread's last secret's, else the map's.
    fn known(&self, secret: &str) -> Option<Principal> {
        self.last(secret).or_else(|| {
            let evictions = self.evictions.load(Ordering::Acquire);
            let (principal, at) = self.entry(&secret_digest(secret))?;
            self.remember(secret, &principal, at, evictions);
            Some(principal)
        })
    }

    fn entry(&self, digest: &Digest) -> Option<(Principal, Instant)> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(digest)
            .filter(|(_, at)| at.elapsed() < self.ttl)
            .cloned()
    }

    /// The principal of the secret this thread found last, while that entry is fresh and
    /// nothing was evicted since.
    fn last(&self, secret: &str) -> Option<Principal> {
        LAST.with(|last| {
            let last = last.try_borrow().ok()?;
            let last = last.as_ref()?;
            let fresh = last.nonce == self.nonce
                && last.evictions == self.evictions.load(Ordering::Acquire)
                && same_secret(&last.secret, secret)
                && last.at.elapsed() < self.ttl;
            fresh.then(|| last.principal.clone())
        })
    }

    /// Replaces this thread's last secret in place: a thread that serves many tokens in turn
    /// reuses the secret's buffer instead of allocating one per request.
    fn remember(&self, secret: &str, principal: &Principal, at: Instant, evictions: u64) {
        LAST.with(|last| {
            let Ok(mut last) = last.try_borrow_mut() else {
                return;
            };
            match last.as_mut() {
                Some(last) => {
                    last.secret.clear();
                    last.secret.push_str(secret);
                    last.principal.clone_from(principal);
                    (last.nonce, last.evictions, last.at) = (self.nonce, evictions, at);
                }
                None => {
                    *last = Some(Last {
                        nonce: self.nonce,
                        evictions,
                        secret: secret.to_owned(),
                        principal: principal.clone(),
                        at,
                    });
                }
            }
        });
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
        self.evictions.fetch_add(1, Ordering::AcqRel);
    }

    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Compares in time that depends on the lengths only, so a response's timing tells nothing
/// of how much of a guessed secret matched.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |diff, (x, y)| diff | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::token::Role;

    impl TokenCache {
        fn get(&self, digest: &Digest) -> Option<Principal> {
            self.entry(digest).map(|(p, _)| p)
        }
    }

    fn principal() -> Principal {
        Principal {
            token_id: TokenId::new(),
            role: Role::Frontend,
            expires_at: None,
            name: None,
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

    #[test]
    fn a_threads_last_secret_is_served_until_an_eviction_and_only_by_its_cache() {
        let cache = TokenCache::new(Duration::from_secs(60), 10);
        let a = principal();
        cache.put(secret_digest("sec-a"), a.clone());
        assert_eq!(cache.known("sec-a"), Some(a.clone()));
        // Gone from the map, still this thread's last secret.
        cache.entries.lock().unwrap().clear();
        assert_eq!(cache.known("sec-a"), Some(a.clone()));
        assert_eq!(cache.known("sec-b"), None);
        assert_eq!(TokenCache::default().known("sec-a"), None);

        cache.put(secret_digest("sec-a"), a.clone());
        assert_eq!(cache.known("sec-a"), Some(a.clone()));
        cache.evict(&a.token_id);
        assert_eq!(cache.known("sec-a"), None);

        // Two tokens in turn on one thread: each replaces the other as the last one.
        let b = principal();
        cache.put(secret_digest("sec-a"), a.clone());
        cache.put(secret_digest("sec-bb"), b.clone());
        for _ in 0..2 {
            assert_eq!(cache.known("sec-a"), Some(a.clone()));
            assert_eq!(cache.known("sec-bb"), Some(b.clone()));
        }

        let short = TokenCache::new(Duration::ZERO, 10);
        short.put(secret_digest("sec-a"), a);
        assert_eq!(short.known("sec-a"), None);
    }

    #[test]
    fn secrets_compare_equal_only_when_equal() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
        assert!(same_secret("", ""));
    }
}
