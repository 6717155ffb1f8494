use super::{Store, StoreResult};

/// What to do with a request carrying an `Idempotency-Key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyBegin {
    /// First time: run it, then `idempotency_finish` (or `idempotency_abort` on a 5xx).
    Started,
    /// Same key, same request, finished: send this stored response.
    Replay { status: u16, body: Vec<u8> },
    /// Same key, same request, still running elsewhere.
    InFlight,
    /// Same key, different request.
    Mismatch,
}

impl Store {
    /// `scope` separates callers (the token id); `request_hash` covers method, path and body.
    /// An in-flight entry older than 5 minutes is considered abandoned and taken over.
    pub async fn idempotency_begin(
        &self,
        scope: &str,
        key: &str,
        request_hash: &str,
    ) -> StoreResult<IdempotencyBegin> {
        todo!()
    }

    pub async fn idempotency_finish(
        &self,
        scope: &str,
        key: &str,
        status: u16,
        body: &[u8],
    ) -> StoreResult<()> {
        todo!()
    }

    pub async fn idempotency_abort(&self, scope: &str, key: &str) -> StoreResult<()> {
        todo!()
    }

    /// Forgets finished entries older than `max_age`; returns how many.
    pub async fn purge_idempotency(&self, max_age: chrono::Duration) -> StoreResult<u64> {
        todo!()
    }
}
