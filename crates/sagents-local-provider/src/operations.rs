//! Releases and restores are operations that outlive the request that asked for them. The
//! first call of a key starts the work in a task of its own, which owns it to the end; the
//! call, and every repeat of the key while it runs, only waits for it, at most the provider's
//! `operation_wait`, then answers `202 Accepted` (`operation.in_progress`, `Retry-After`).
//! A dropped connection drops a waiter, never the work. Once the work ends, the next call of
//! the key answers what the work recorded (the receipt, the restored sandbox, a terminal
//! error); a recoverable error recorded nothing, so that call tries again. A stopping provider
//! abandons the running operations as a killed one would; its next start settles them.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::engine::{check_key, Engine};
use super::error::ApiError;
use super::release::check_release;
use super::state::fingerprint;
use sagents_plugin_api::codes::OPERATION_IN_PROGRESS;
use sagents_plugin_api::wire::{
    OperationPending, ReleaseRequest, RestoreRequest, SandboxHandle, SandboxReleaseReceipt,
};

pub(super) type ReleaseOutcome = Result<SandboxReleaseReceipt, ApiError>;
/// The handle and whether this call created the sandbox.
pub(super) type RestoreOutcome = Result<(SandboxHandle, bool), ApiError>;

/// How long a `202` asks the caller to wait before asking again.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

struct Running<T> {
    id: u64,
    fingerprint: String,
    done: watch::Receiver<Option<T>>,
    abort: AbortHandle,
}

type Table<T> = Arc<Mutex<HashMap<String, Running<T>>>>;

/// The operations of one kind that are running, by key.
pub(super) struct Operations<T> {
    running: Table<T>,
    next_id: AtomicU64,
}

impl<T> Default for Operations<T> {
    fn default() -> Self {
        Self {
            running: Arc::new(Mutex::new(HashMap::new())),
            next_id: AtomicU64::new(0),
        }
    }
}

/// Removes its operation from the table when its task ends, however it ends.
struct Deregister<T> {
    running: Table<T>,
    key: String,
    id: u64,
}

impl<T> Drop for Deregister<T> {
    fn drop(&mut self) {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if running.get(&self.key).is_some_and(|r| r.id == self.id) {
            running.remove(&self.key);
        }
    }
}

/// A wait on one operation.
pub(super) struct Ticket<T> {
    done: watch::Receiver<Option<T>>,
    /// The call joined an operation another call started.
    pub joined: bool,
}

pub(super) enum Waited<T> {
    Done(T),
    /// Still running after the wait.
    Pending,
    /// Abandoned before it ended (the provider is stopping).
    Abandoned,
}

impl<T: Clone + Send + Sync + 'static> Operations<T> {
    /// Joins the operation running under `key`, or starts `work` in a task of its own. `None`
    /// when the key runs an operation asked with another fingerprint.
    pub fn start_or_join<F>(
        &self,
        key: &str,
        fingerprint: &str,
        work: impl FnOnce() -> F,
    ) -> Option<Ticket<T>>
    where
        F: Future<Output = T> + Send + 'static,
    {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = running.get(key) {
            return (r.fingerprint == fingerprint).then(|| Ticket {
                done: r.done.clone(),
                joined: true,
            });
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = watch::channel(None);
        let deregister = Deregister {
            running: self.running.clone(),
            key: key.to_owned(),
            id,
        };
        let work = work();
        let task = tokio::spawn(async move {
            let _deregister = deregister;
            tx.send_replace(Some(work.await));
        });
        running.insert(
            key.to_owned(),
            Running {
                id,
                fingerprint: fingerprint.to_owned(),
                done: rx.clone(),
                abort: task.abort_handle(),
            },
        );
        Some(Ticket {
            done: rx,
            joined: false,
        })
    }

    /// Abandons every running operation.
    pub fn abort_all(&self) {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        for r in running.values() {
            r.abort.abort();
        }
    }

    /// How many operations are running.
    pub fn len(&self) -> usize {
        self.running.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl<T: Clone> Ticket<T> {
    pub async fn wait(mut self, bound: Duration) -> Waited<T> {
        match tokio::time::timeout(bound, self.done.wait_for(Option::is_some)).await {
            Ok(Ok(done)) => match done.clone() {
                Some(v) => Waited::Done(v),
                None => Waited::Abandoned,
            },
            Ok(Err(_)) => Waited::Abandoned,
            Err(_) => Waited::Pending,
        }
    }
}

/// What a release or restore call answers.
pub enum Answer<T> {
    Done(T),
    Pending(OperationPending),
}

fn pending(operation: &str, key: &str) -> OperationPending {
    OperationPending {
        code: OPERATION_IN_PROGRESS.into(),
        operation: operation.into(),
        idempotency_key: key.into(),
        retry_after_ms: u64::try_from(RETRY_AFTER.as_millis()).unwrap_or(u64::MAX),
    }
}

fn abandoned(operation: &str) -> ApiError {
    ApiError::internal(format!(
        "the {operation} was abandoned by a stopping provider; ask again with the same key"
    ))
}

fn key_reused(operation: &str) -> ApiError {
    ApiError::conflict(
        "idempotency.key_reused",
        format!("idempotency_key names a running {operation} asked with a different request"),
    )
}

impl Engine {
    /// `POST /v3/sandboxes/{id}/release` as an operation: its receipt (`duplicate: true` for a
    /// call that joined a running one), or `202` while it runs on.
    pub async fn release_operation(
        self: &Arc<Self>,
        id: &str,
        req: ReleaseRequest,
    ) -> Result<Answer<SandboxReleaseReceipt>, ApiError> {
        let r = &req.request;
        check_release(id, r)?;
        let key = format!("{id}\0{}", r.idempotency_key);
        let (engine, sandbox_id, request) = (self.clone(), id.to_owned(), req.clone());
        let ticket = self
            .release_ops
            .start_or_join(&key, &r.disposition.to_string(), move || async move {
                engine.release(&sandbox_id, &request).await
            })
            .ok_or_else(|| key_reused("release"))?;
        let joined = ticket.joined;
        match ticket.wait(self.cfg.operation_wait).await {
            Waited::Done(Ok(mut receipt)) => {
                receipt.duplicate |= joined;
                Ok(Answer::Done(receipt))
            }
            Waited::Done(Err(e)) => Err(e),
            Waited::Pending => Ok(Answer::Pending(pending("release", &r.idempotency_key))),
            Waited::Abandoned => Err(abandoned("release")),
        }
    }

    /// `POST /v3/restores` as an operation: the restored sandbox (created only for the call
    /// that started it), or `202` while it runs on.
    pub async fn restore_operation(
        self: &Arc<Self>,
        req: RestoreRequest,
    ) -> Result<Answer<(SandboxHandle, bool)>, ApiError> {
        check_key(&req.idempotency_key)?;
        let fp = fingerprint(&(&req.checkpoint.checkpoint_id, &req.spec, &req.owner_run_id));
        let (engine, request) = (self.clone(), req.clone());
        let ticket = self
            .restore_ops
            .start_or_join(&req.idempotency_key, &fp, move || async move {
                engine.restore(&request).await
            })
            .ok_or_else(|| key_reused("restore"))?;
        let joined = ticket.joined;
        match ticket.wait(self.cfg.operation_wait).await {
            Waited::Done(Ok((handle, created))) => Ok(Answer::Done((handle, created && !joined))),
            Waited::Done(Err(e)) => Err(e),
            Waited::Pending => Ok(Answer::Pending(pending("restore", &req.idempotency_key))),
            Waited::Abandoned => Err(abandoned("restore")),
        }
    }

    /// Abandons the running releases and restores, as a killed provider would.
    pub fn abandon_operations(&self) {
        self.release_ops.abort_all();
        self.restore_ops.abort_all();
    }

    /// How many releases and restores are running.
    pub fn running_operations(&self) -> usize {
        self.release_ops.len() + self.restore_ops.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_repeat_joins_and_a_slow_one_is_pending() {
        let ops = Operations::<u32>::default();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let first = ops
            .start_or_join("k", "a", || async move {
                let _ = rx.await;
                7
            })
            .unwrap();
        assert!(!first.joined);
        let again = ops.start_or_join("k", "a", || async { 0 }).unwrap();
        assert!(again.joined);
        assert!(ops.start_or_join("k", "b", || async { 0 }).is_none());
        assert!(matches!(
            first.wait(Duration::from_millis(10)).await,
            Waited::Pending
        ));
        tx.send(()).unwrap();
        assert!(matches!(
            again.wait(Duration::from_secs(5)).await,
            Waited::Done(7)
        ));
        while ops.len() > 0 {
            tokio::task::yield_now().await;
        }
        let next = ops.start_or_join("k", "b", || async { 9 }).unwrap();
        assert!(!next.joined, "a finished operation is not joined");
        assert!(matches!(
            next.wait(Duration::from_secs(5)).await,
            Waited::Done(9)
        ));
    }

    #[tokio::test]
    async fn an_abandoned_operation_says_so_and_leaves_the_table() {
        let ops = Operations::<u32>::default();
        let t = ops
            .start_or_join("k", "a", std::future::pending::<u32>)
            .unwrap();
        ops.abort_all();
        assert!(matches!(
            t.wait(Duration::from_secs(5)).await,
            Waited::Abandoned
        ));
        assert_eq!(ops.len(), 0);
    }
}
