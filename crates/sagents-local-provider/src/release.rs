//! `POST /v3/sandboxes/{id}/release`: idempotent by `(sandbox_id, idempotency_key)`. It runs
//! as an operation of its own (`operations.rs`): the request only waits for it.
//!
//! The recoverable/terminal contract: a recoverable error is returned only once the sandbox
//! runs again; if it cannot be resumed the error is terminal, names both causes, is answered
//! again for its key, and the sandbox is reported `lost`. A receipt names every checkpoint
//! that exists: when the kill after a saved archive fails, the receipt names the checkpoint
//! with `compute_released: false`, and a retry of its key tries the kill again.

use chrono::Utc;

use super::engine::{check_key, reconcile, Engine};
use super::error::ApiError;
use super::faults::FaultPoint;
use super::state::{SandboxRecord, StoredFailure, StoredRelease};
use sagents_plugin_api::codes;
use sagents_plugin_api::spec::{ReleaseDisposition as D, WorkspaceMode};
use sagents_plugin_api::wire::{
    CheckpointRef, ReleaseRequest, ReleaseSpec, SandboxReleaseReceipt, SandboxState as S,
};

pub(super) fn check_release(id: &str, r: &ReleaseSpec) -> Result<(), ApiError> {
    if r.r#ref.sandbox_id != id {
        return Err(ApiError::invalid(
            "validation.failed",
            "request.ref.sandbox_id does not match the sandbox in the path",
        ));
    }
    check_key(&r.idempotency_key)
}

fn key_reused(disposition: D) -> ApiError {
    ApiError::conflict(
        "idempotency.key_reused",
        format!("idempotency_key was used for a `{disposition}` release of this sandbox"),
    )
}

impl Engine {
    pub async fn release(
        &self,
        id: &str,
        req: &ReleaseRequest,
    ) -> Result<SandboxReleaseReceipt, ApiError> {
        let r = &req.request;
        check_release(id, r)?;
        let slot = self.slot(id)?;
        let mut rec = slot.lock().await;
        if let Some(receipt) = self.answer_again(&mut rec, r).await? {
            return Ok(receipt);
        }
        if reconcile(&mut rec) {
            self.save(&rec)?;
        }
        if let Some(expected) = r.expected_revision {
            if expected != rec.revision {
                return Err(ApiError::conflict(
                    "sandbox.revision_conflict",
                    format!(
                        "expected revision {expected}, the sandbox is at {}",
                        rec.revision
                    ),
                ));
            }
        }
        if rec.state == S::Suspended && r.disposition != D::Terminate {
            self.thaw_leftover(&mut rec);
        }
        if r.disposition == D::SnapshotAndTerminate {
            rec.releasing = Some(r.idempotency_key.clone());
        }
        let done = self.release_as(&mut rec, r.disposition).await;
        rec.releasing = None;
        match done {
            Ok(checkpoint) => Ok(self.record_receipt(&mut rec, r, checkpoint)),
            Err(e) => {
                if codes::is_terminal(&e.body) {
                    rec.failed_releases.insert(
                        r.idempotency_key.clone(),
                        StoredFailure {
                            disposition: r.disposition,
                            error: e.body.clone(),
                        },
                    );
                    self.save_or_warn(&rec);
                }
                Err(e)
            }
        }
    }

    /// The recorded outcome of the key, if any; a receipt whose kill failed tries it again.
    async fn answer_again(
        &self,
        rec: &mut SandboxRecord,
        r: &ReleaseSpec,
    ) -> Result<Option<SandboxReleaseReceipt>, ApiError> {
        let key = &r.idempotency_key;
        if let Some(failed) = rec.failed_releases.get(key) {
            if failed.disposition != r.disposition {
                return Err(key_reused(failed.disposition));
            }
            return Err(ApiError {
                status: axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                body: failed.error.clone(),
            });
        }
        let Some(stored) = rec.releases.get(key).cloned() else {
            return Ok(None);
        };
        if stored.disposition != r.disposition {
            return Err(key_reused(stored.disposition));
        }
        let mut receipt = stored.receipt;
        if !receipt.compute_released && receipt.checkpoint.is_some() && rec.state != S::Terminated {
            match self.kill(rec).await {
                Ok(()) => {
                    rec.revision += 1;
                    rec.updated_at = Utc::now();
                    receipt.state = rec.state;
                    receipt.compute_released = true;
                    rec.releases.insert(
                        key.clone(),
                        StoredRelease {
                            disposition: stored.disposition,
                            receipt: receipt.clone(),
                        },
                    );
                    self.save_or_warn(rec);
                }
                Err(cause) => {
                    tracing::warn!(sandbox_id = %rec.r#ref.sandbox_id, %cause, "the sandbox of a saved checkpoint could not be killed again")
                }
            }
        }
        receipt.duplicate = true;
        Ok(Some(receipt))
    }

    /// Does the disposition's work; the checkpoint it saved, if any.
    async fn release_as(
        &self,
        rec: &mut SandboxRecord,
        disposition: D,
    ) -> Result<Option<CheckpointRef>, ApiError> {
        match (disposition, rec.state) {
            (D::Detach, S::Ready) => {
                rec.attached_clients = 0;
                Ok(None)
            }
            (D::Terminate, S::Terminated) => Ok(None),
            (D::Terminate, _) => match self.kill(rec).await {
                Ok(()) => Ok(None),
                Err(cause) => {
                    rec.state = S::Lost;
                    rec.revision += 1;
                    self.save_or_warn(rec);
                    Err(ApiError::terminal(codes::SANDBOX_KILL_FAILED, cause))
                }
            },
            (D::SnapshotAndTerminate, S::Ready) => self.snapshot_and_terminate(rec).await.map(Some),
            (_, S::Terminated) => Err(ApiError::conflict(
                codes::SANDBOX_TERMINATED,
                format!("the sandbox is terminated; `{disposition}` is impossible"),
            )),
            (_, state) => Err(ApiError::terminal(
                codes::SANDBOX_LOST,
                format!("the sandbox is {state}: its processes are gone; only `terminate` applies"),
            )),
        }
    }

    /// Records the receipt under the key. A failed state save does not take back what was
    /// done: the receipt is answered and kept in memory, and the next save writes it.
    fn record_receipt(
        &self,
        rec: &mut SandboxRecord,
        r: &ReleaseSpec,
        checkpoint: Option<CheckpointRef>,
    ) -> SandboxReleaseReceipt {
        let now = Utc::now();
        rec.revision += 1;
        rec.updated_at = now;
        let receipt = SandboxReleaseReceipt {
            r#ref: rec.r#ref.clone(),
            disposition: r.disposition,
            state: rec.state,
            checkpoint,
            compute_released: rec.state == S::Terminated,
            duplicate: false,
            released_at: now,
        };
        rec.releases.insert(
            r.idempotency_key.clone(),
            StoredRelease {
                disposition: r.disposition,
                receipt: receipt.clone(),
            },
        );
        self.save_or_warn(rec);
        receipt
    }

    pub(super) fn save_or_warn(&self, rec: &SandboxRecord) {
        if let Err(e) = self.save(rec) {
            tracing::warn!(sandbox_id = %rec.r#ref.sandbox_id, error = %e, "could not persist the sandbox state");
        }
    }

    /// Kills the process group and removes the compute; an active workspace keeps its files.
    /// On failure the record is left as it was and the cause returned.
    pub(super) async fn kill(&self, rec: &mut SandboxRecord) -> Result<(), String> {
        self.kill_keeping(rec, None).await
    }

    /// [`Engine::kill`]; an isolated sandbox's files are kept in the warm cache for
    /// `checkpoint`, when given, instead of being discarded.
    pub(super) async fn kill_keeping(
        &self,
        rec: &mut SandboxRecord,
        checkpoint: Option<&CheckpointRef>,
    ) -> Result<(), String> {
        let id = rec.r#ref.sandbox_id.clone();
        if let Some(leader) = rec.leader {
            if self.faults.step_fails(FaultPoint::Kill) {
                return Err("the sandbox's processes could not be killed (injected fault)".into());
            }
            // A frozen group dies only once thawed; this kills it, then thaws it.
            if let Some(cg) = self.cgroup(&id) {
                cg.kill();
            }
            leader
                .kill_group()
                .await
                .map_err(|e| format!("the sandbox's processes could not be killed: {e}"))?;
        }
        rec.leader = None;
        self.drop_bounds(&id);
        if rec.workspace_mode == WorkspaceMode::Isolated {
            match checkpoint {
                Some(c) => self.keep_or_discard(rec, c).await,
                None => self.discard_dir(rec),
            }
        }
        rec.state = S::Terminated;
        rec.generation += 1;
        Ok(())
    }

    /// Moves the files out of the way at once and deletes them in the background.
    pub(super) fn discard_dir(&self, rec: &SandboxRecord) {
        let trash = self.layout.trash().join(format!(
            "{}-{}",
            rec.r#ref.sandbox_id,
            uuid::Uuid::now_v7().simple()
        ));
        let target = if std::fs::rename(&rec.dir, &trash).is_ok() {
            trash
        } else {
            rec.dir.clone()
        };
        tokio::task::spawn_blocking(move || {
            let _ = std::fs::remove_dir_all(target);
        });
    }
}
