//! `POST /v3/sandboxes/{id}/release`: idempotent by `(sandbox_id, idempotency_key)`.
//!
//! A failed snapshot honours the recoverable/terminal contract: the sandbox is frozen before
//! archiving (its whole control group, so no process of it runs while its files are read),
//! and a recoverable error is returned only once it runs again; if it cannot be resumed the
//! error is terminal, names both causes, and the sandbox is reported `lost`.

use chrono::{DateTime, Utc};

use super::engine::{check_key, reconcile, Engine};
use super::error::ApiError;
use super::faults::FaultPoint;
use super::process::Leader;
use super::state::{SandboxRecord, StoredCheckpoint, StoredRelease};
use sagents_plugin_api::spec::{ReleaseDisposition as D, WorkspaceMode};
use sagents_plugin_api::wire::{
    CheckpointRef, InventoryLabels, ReleaseRequest, SandboxReleaseReceipt, SandboxState as S,
};

impl Engine {
    pub async fn release(
        &self,
        id: &str,
        req: &ReleaseRequest,
    ) -> Result<SandboxReleaseReceipt, ApiError> {
        let r = &req.request;
        if r.r#ref.sandbox_id != id {
            return Err(ApiError::invalid(
                "validation.failed",
                "request.ref.sandbox_id does not match the sandbox in the path",
            ));
        }
        check_key(&r.idempotency_key)?;
        let slot = self.slot(id)?;
        let mut rec = slot.lock().await;
        if let Some(stored) = rec.releases.get(&r.idempotency_key) {
            if stored.disposition != r.disposition {
                return Err(ApiError::conflict(
                    "idempotency.key_reused",
                    format!(
                        "idempotency_key was used for a `{}` release of this sandbox",
                        stored.disposition
                    ),
                ));
            }
            let mut receipt = stored.receipt.clone();
            receipt.duplicate = true;
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
        let checkpoint = match (r.disposition, rec.state) {
            (D::Detach, S::Ready) => {
                rec.attached_clients = 0;
                None
            }
            (D::Terminate, S::Terminated) => None,
            (D::Terminate, _) => {
                self.terminate(&mut rec).await?;
                None
            }
            (D::SnapshotAndTerminate, S::Ready) => {
                Some(self.snapshot_and_terminate(&mut rec).await?)
            }
            (_, S::Terminated) => {
                return Err(ApiError::conflict(
                    "sandbox.terminated",
                    format!(
                        "the sandbox is terminated; `{}` is impossible",
                        r.disposition
                    ),
                ))
            }
            (_, state) => {
                return Err(ApiError::terminal(
                    "sandbox.lost",
                    format!(
                        "the sandbox is {state}: its processes are gone; only `terminate` applies"
                    ),
                ))
            }
        };
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
        self.save(&rec)?;
        Ok(receipt)
    }

    /// Kills the process group and removes the compute; an active workspace keeps its files.
    async fn terminate(&self, rec: &mut SandboxRecord) -> Result<(), ApiError> {
        let id = rec.r#ref.sandbox_id.clone();
        if let Some(leader) = rec.leader {
            // A frozen group dies only once thawed; this kills it, then thaws it.
            if let Some(cg) = self.cgroup(&id) {
                cg.kill();
            }
            if let Err(e) = leader.kill_group().await {
                rec.state = S::Lost;
                rec.revision += 1;
                self.save(rec)?;
                return Err(ApiError::terminal(
                    "sandbox.kill_failed",
                    format!("the sandbox's processes could not be killed: {e}"),
                ));
            }
        }
        rec.leader = None;
        self.drop_bounds(&id);
        if rec.workspace_mode == WorkspaceMode::Isolated {
            self.discard_dir(rec);
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

    async fn snapshot_and_terminate(
        &self,
        rec: &mut SandboxRecord,
    ) -> Result<CheckpointRef, ApiError> {
        if rec.workspace_mode == WorkspaceMode::ActiveWorkspace {
            return Err(ApiError::invalid(
                "release.disposition_unsupported",
                "an active workspace keeps its files on the host: release it with `terminate`",
            ));
        }
        let Some(leader) = rec.leader else {
            return Err(ApiError::terminal(
                "sandbox.lost",
                "the sandbox has no processes",
            ));
        };
        if let Err(e) = self.pause(&rec.r#ref.sandbox_id, leader).await {
            rec.state = S::Lost;
            rec.revision += 1;
            self.save(rec)?;
            return Err(ApiError::terminal(
                "sandbox.lost",
                format!("pausing the sandbox failed: {e}"),
            ));
        }
        rec.state = S::Suspended;
        rec.revision += 1;
        self.save(rec)?;
        let checkpoint_id = format!("ckp_{}", uuid::Uuid::now_v7().simple());
        let archive = self.layout.archive(&checkpoint_id);
        let packed = if self.faults.step_fails(FaultPoint::Snapshot) {
            Err("archiving failed (injected fault)".to_string())
        } else {
            let dir = rec.dir.clone();
            match tokio::task::spawn_blocking(move || super::archive::pack(&dir, &archive)).await {
                Ok(Ok(info)) => Ok(info),
                Ok(Err(e)) => Err(format!("archiving failed: {e}")),
                Err(e) => Err(format!("archiving failed: {e}")),
            }
        };
        let info = match packed {
            Ok(info) => info,
            Err(cause) => return Err(self.recover_after_failed_snapshot(rec, cause)),
        };
        let checkpoint = CheckpointRef {
            checkpoint_id,
            provider_id: self.cfg.provider_id.clone(),
            sandbox_id: rec.r#ref.sandbox_id.clone(),
            generation: rec.generation,
            size_bytes: info.size_bytes,
            digest: Some(info.digest),
            created_at: DateTime::from_timestamp_millis(Utc::now().timestamp_millis())
                .unwrap_or_default(),
        };
        let stored = StoredCheckpoint {
            checkpoint: checkpoint.clone(),
            labels: Some(InventoryLabels {
                owner_run_id: rec.r#ref.owner_run_id.clone(),
                tenant_id: rec.r#ref.tenant_id.clone(),
            }),
        };
        if let Err(e) = self.layout.save_checkpoint(&stored) {
            let cause = format!("recording the checkpoint failed: {e}");
            return Err(self.recover_after_failed_snapshot(rec, cause));
        }
        self.terminate(rec).await?;
        Ok(checkpoint)
    }

    /// Brings a paused sandbox back; recoverable only if it runs again.
    fn recover_after_failed_snapshot(&self, rec: &mut SandboxRecord, cause: String) -> ApiError {
        let resumed = if self.faults.step_fails(FaultPoint::Resume) {
            Err("resuming failed (injected fault)".to_string())
        } else {
            rec.leader
                .ok_or_else(|| "the sandbox has no processes".to_string())
                .and_then(|l| {
                    self.resume(&rec.r#ref.sandbox_id, l)
                        .map_err(|e| format!("resuming failed: {e}"))
                })
        };
        rec.revision += 1;
        rec.updated_at = Utc::now();
        let err = match resumed {
            Ok(()) => {
                rec.state = S::Ready;
                ApiError::recoverable(
                    "sandbox.snapshot_failed",
                    format!("snapshot failed, the sandbox is running again: {cause}"),
                )
            }
            Err(resume_cause) => {
                rec.state = S::Lost;
                ApiError::terminal(
                    "sandbox.lost",
                    format!("snapshot failed ({cause}) and the sandbox could not be resumed ({resume_cause})"),
                )
            }
        };
        if let Err(e) = self.save(rec) {
            tracing::warn!(sandbox_id = %rec.r#ref.sandbox_id, error = %e, "could not persist the sandbox state");
        }
        err
    }

    /// Freezes the sandbox's control group; without a freezer, stops the processes of its
    /// PID namespace (or group).
    async fn pause(&self, id: &str, leader: Leader) -> std::io::Result<()> {
        match self.cgroup(id).filter(|cg| cg.can_freeze()) {
            Some(cg) => tokio::task::spawn_blocking(move || cg.freeze())
                .await
                .map_err(std::io::Error::other)?,
            None => leader.pause(),
        }
    }

    fn resume(&self, id: &str, leader: Leader) -> std::io::Result<()> {
        match self.cgroup(id).filter(|cg| cg.can_freeze()) {
            Some(cg) if leader.is_alive() => cg.thaw(),
            Some(_) => Err(std::io::Error::from_raw_os_error(libc::ESRCH)),
            None => leader.resume(),
        }
    }
}
