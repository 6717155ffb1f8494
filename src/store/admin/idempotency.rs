use chrono::{DateTime, Duration, Utc};

use crate::clock::to_millis;
use crate::store::engine::tx::WriteTx;
use crate::store::engine::{rows, Store, StoreResult};

/// The `Idempotency-Key` a request runs under, once `idempotency_begin` started it: a write
/// given it stores its answer under the key in its own transaction, so a request that took
/// effect is answered again, never run twice, even if its replica dies before
/// `idempotency_finish`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyClaim {
    pub scope: String,
    pub key: String,
}

/// How an answer is stored under its key: the content type, a newline, the body bytes.
pub fn stored_answer(content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content_type.len() + 1 + body.len());
    out.extend_from_slice(content_type.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(body);
    out
}

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
    /// An entry is in flight for at most `deadline`, the longest its request may run: after
    /// that its request is gone (finished, timed out, or its replica died) and a retry takes
    /// the key over and runs normally.
    pub async fn idempotency_begin(
        &self,
        scope: &str,
        key: &str,
        request_hash: &str,
        deadline: Duration,
    ) -> StoreResult<IdempotencyBegin> {
        let mut tx = self.write_tx().await?;
        let result = self
            .idempotency_begin_in(&mut tx, scope, key, request_hash, deadline)
            .await;
        tx.finish(self, result).await
    }

    pub async fn idempotency_finish(
        &self,
        scope: &str,
        key: &str,
        status: u16,
        body: &[u8],
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE idempotency_keys SET state = 'done', response_status = $3, \
             response_body = $4, updated_at = $5 WHERE scope = $1 AND key = $2",
        )
        .bind(scope)
        .bind(key)
        .bind(i64::from(status))
        .bind(body)
        .bind(to_millis(self.now()))
        .execute(&self.inner.write)
        .await?;
        Ok(())
    }

    pub async fn idempotency_abort(&self, scope: &str, key: &str) -> StoreResult<()> {
        sqlx::query(
            "DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2 AND state = 'in_flight'",
        )
        .bind(scope)
        .bind(key)
        .execute(&self.inner.write)
        .await?;
        Ok(())
    }

    /// Stores `status` and `value` as JSON as the answer of each key in `answers`, in the
    /// transaction of the write that made them.
    pub(in crate::store) async fn idempotency_answer_in<T: serde::Serialize>(
        &self,
        tx: &mut WriteTx,
        status: u16,
        answers: &[(&IdempotencyClaim, &T)],
    ) -> StoreResult<()> {
        for (claim, value) in answers {
            let body = rows::to_json(value)?;
            let stored = stored_answer("application/json", body.as_bytes());
            self.idempotency_stored_in(tx, claim, status, &stored)
                .await?;
        }
        Ok(())
    }

    /// Stores `stored` (see [`stored_answer`]) with `status` as the key's answer, in `tx`.
    pub(in crate::store) async fn idempotency_stored_in(
        &self,
        tx: &mut WriteTx,
        claim: &IdempotencyClaim,
        status: u16,
        stored: &[u8],
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE idempotency_keys SET state = 'done', response_status = $3, \
             response_body = $4, updated_at = $5 \
             WHERE scope = $1 AND key = $2 AND state = 'in_flight'",
        )
        .bind(claim.scope.as_str())
        .bind(claim.key.as_str())
        .bind(i64::from(status))
        .bind(stored)
        .bind(to_millis(tx.now))
        .execute(tx.conn())
        .await?;
        Ok(())
    }

    /// Forgets finished entries older than `max_age`; returns how many.
    pub async fn purge_idempotency(&self, max_age: chrono::Duration) -> StoreResult<u64> {
        let done =
            sqlx::query("DELETE FROM idempotency_keys WHERE state = 'done' AND updated_at < $1")
                .bind(to_millis(
                    self.now()
                        .checked_sub_signed(max_age)
                        .unwrap_or(DateTime::<Utc>::MIN_UTC),
                ))
                .execute(&self.inner.write)
                .await?;
        Ok(done.rows_affected())
    }

    async fn idempotency_begin_in(
        &self,
        tx: &mut WriteTx,
        scope: &str,
        key: &str,
        request_hash: &str,
        deadline: Duration,
    ) -> StoreResult<IdempotencyBegin> {
        let now = tx.now;
        let inserted = sqlx::query(
            "INSERT INTO idempotency_keys (scope, key, request_hash, state, created_at, \
             updated_at) VALUES ($1, $2, $3, 'in_flight', $4, $4) \
             ON CONFLICT (scope, key) DO NOTHING",
        )
        .bind(scope)
        .bind(key)
        .bind(request_hash)
        .bind(to_millis(now))
        .execute(tx.conn())
        .await?;
        if inserted.rows_affected() == 1 {
            return Ok(IdempotencyBegin::Started);
        }
        let row = sqlx::query(
            "SELECT request_hash, state, response_status, response_body FROM idempotency_keys \
             WHERE scope = $1 AND key = $2",
        )
        .bind(scope)
        .bind(key)
        .fetch_one(tx.conn())
        .await?;
        let outcome = if rows::text(&row, "request_hash")? != request_hash {
            IdempotencyBegin::Mismatch
        } else if rows::text(&row, "state")? == "done" {
            let status = rows::opt_int(&row, "response_status")?.unwrap_or(200);
            IdempotencyBegin::Replay {
                status: u16::try_from(status).unwrap_or(200),
                body: sqlx::Row::try_get::<Option<Vec<u8>>, _>(&row, "response_body")?
                    .unwrap_or_default(),
            }
        } else {
            let taken = sqlx::query(
                "UPDATE idempotency_keys SET created_at = $3, updated_at = $3 \
                 WHERE scope = $1 AND key = $2 AND state = 'in_flight' AND updated_at <= $4",
            )
            .bind(scope)
            .bind(key)
            .bind(to_millis(now))
            .bind(to_millis(now.checked_sub_signed(deadline).unwrap_or(now)))
            .execute(tx.conn())
            .await?;
            if taken.rows_affected() == 1 {
                IdempotencyBegin::Started
            } else {
                IdempotencyBegin::InFlight
            }
        };
        Ok(outcome)
    }
}
