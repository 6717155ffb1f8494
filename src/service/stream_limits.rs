//! The event streams each token holds open on this replica: at most a configured number, and
//! each one ends soon after its token is revoked (on any replica) or expires.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::domain::token::Principal;
use crate::domain::TokenId;
use crate::store::Store;

/// How often an open stream's token is checked; a revoked or expired token's streams end
/// within this (and one database read), well inside 5 s.
pub const TOKEN_RECHECK: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
struct Entry {
    open: usize,
    /// When the token was last found live in the database; `None`: never, or revoked here.
    checked: Option<Instant>,
}

#[derive(Debug)]
pub struct StreamRegistry {
    max_per_token: usize,
    tokens: Mutex<HashMap<TokenId, Entry>>,
}

/// One open stream's place in its token's count, given back when dropped.
#[derive(Debug)]
pub struct StreamSlot {
    registry: Arc<StreamRegistry>,
    token_id: TokenId,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut tokens = self.registry.lock();
        if let Some(entry) = tokens.get_mut(&self.token_id) {
            entry.open = entry.open.saturating_sub(1);
            if entry.open == 0 {
                tokens.remove(&self.token_id);
            }
        }
    }
}

impl StreamRegistry {
    pub fn new(max_per_token: usize) -> Arc<Self> {
        Arc::new(Self {
            max_per_token,
            tokens: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TokenId, Entry>> {
        self.tokens.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for one more stream of `token_id`; `None` when it already holds the most.
    pub fn try_open(self: &Arc<Self>, token_id: &TokenId) -> Option<StreamSlot> {
        let mut tokens = self.lock();
        let entry = tokens.entry(token_id.clone()).or_insert_with(|| Entry {
            open: 0,
            checked: Some(Instant::now()),
        });
        if entry.open >= self.max_per_token {
            return None;
        }
        entry.open += 1;
        Some(StreamSlot {
            registry: self.clone(),
            token_id: token_id.clone(),
        })
    }

    /// Streams open for `token_id` on this replica.
    pub fn open(&self, token_id: &TokenId) -> usize {
        self.lock().get(token_id).map_or(0, |e| e.open)
    }

    /// A revocation through this replica: its streams end at their next check, without
    /// waiting for the database.
    pub fn revoked(&self, token_id: &TokenId) {
        if let Some(entry) = self.lock().get_mut(token_id) {
            entry.checked = None;
        }
    }

    /// Whether `principal` may still stream: not expired by the store's clock and, at most
    /// [`TOKEN_RECHECK`] ago, found unrevoked in the database (one read per token, however
    /// many streams it holds). A failed read ends the stream: the client resumes from its
    /// last event once it can authenticate again.
    pub async fn still_live(&self, store: &Store, principal: &Principal) -> bool {
        if principal.expires_at.is_some_and(|at| at <= store.now()) {
            return false;
        }
        let fresh = {
            let tokens = self.lock();
            match tokens.get(&principal.token_id).map(|e| e.checked) {
                Some(Some(at)) => at.elapsed() < TOKEN_RECHECK,
                Some(None) => return false,
                None => false,
            }
        };
        if fresh {
            return true;
        }
        let live = match store.token_is_live(&principal.token_id).await {
            Ok(live) => live,
            Err(e) => {
                tracing::warn!(error = %e, "event stream ends: its token could not be checked");
                false
            }
        };
        if let Some(entry) = self.lock().get_mut(&principal.token_id) {
            entry.checked = live.then(Instant::now);
        }
        live
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_holds_at_most_its_cap_and_dropped_slots_are_given_back() {
        let registry = StreamRegistry::new(2);
        let (a, b) = (TokenId::new(), TokenId::new());
        let first = registry.try_open(&a).unwrap();
        let second = registry.try_open(&a).unwrap();
        assert!(
            registry.try_open(&a).is_none(),
            "a third stream of one token"
        );
        assert!(
            registry.try_open(&b).is_some(),
            "another token is not counted"
        );
        assert_eq!(registry.open(&a), 2);
        drop(first);
        let third = registry.try_open(&a).unwrap();
        drop((second, third));
        assert_eq!(registry.open(&a), 0);
        assert!(
            registry.lock().get(&a).is_none(),
            "nothing kept for a token with none open"
        );
    }
}
