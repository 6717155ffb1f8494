//! The `snapshot_and_terminate` release: the sandbox's whole control group is frozen, its
//! files archived (no process of it runs while they are read), the checkpoint recorded, then
//! its processes killed. Every recoverable failure before the checkpoint is recorded thaws
//! the sandbox before answering.

use chrono::{DateTime, Utc};

use super::chunks::{checkpoints, Written};
use super::engine::Engine;
use super::error::ApiError;
use super::faults::FaultPoint;
use super::process::Leader;
use super::state::{CheckpointFormat, Layout, SandboxRecord, StoredCheckpoint, StoredRelease};
use sagents_plugin_api::codes;
use sagents_plugin_api::spec::{ReleaseDisposition, WorkspaceMode};
use sagents_plugin_api::wire::{
    CheckpointRef, InventoryLabels, SandboxReleaseReceipt, SandboxState as S,
};

/// A snapshot release whose task ended with the provider after it recorded the checkpoint
/// and killed the sandbox, before its receipt was saved: a restart finishes it under its
/// key, so a retry is answered with the checkpoint instead of a sandbox called lost. One
/// whose processes still run, or that recorded no checkpoint, is left to be thawed.
pub(super) fn finish_interrupted_snapshot(
    layout: &Layout,
    rec: &mut SandboxRecord,
) -> std::io::Result<bool> {
    let Some(key) = rec.releasing.clone().filter(|_| rec.state == S::Suspended) else {
        return Ok(false);
    };
    if rec.awaits_kill() || rec.leader.is_some_and(|l| l.is_alive()) {
        return Ok(false);
    }
    let mut taken = None;
    for id in layout.checkpoint_ids()? {
        let Some(stored) = layout.load_checkpoint(&id)? else {
            continue;
        };
        let c = &stored.checkpoint;
        if c.sandbox_id == rec.r#ref.sandbox_id
            && c.generation == rec.generation
            && layout.checkpoint_data(&stored).exists()
        {
            taken = Some(stored.checkpoint);
        }
    }
    let Some(checkpoint) = taken else {
        return Ok(false);
    };
    let now = Utc::now();
    rec.leader = None;
    rec.state = S::Terminated;
    rec.generation += 1;
    rec.revision += 1;
    rec.updated_at = now;
    rec.releasing = None;
    if rec.workspace_mode == WorkspaceMode::Isolated {
        let _ = std::fs::remove_dir_all(&rec.dir);
    }
    let receipt = SandboxReleaseReceipt {
        r#ref: rec.r#ref.clone(),
        disposition: ReleaseDisposition::SnapshotAndTerminate,
        state: S::Terminated,
        checkpoint: Some(checkpoint),
        compute_released: true,
        duplicate: false,
        released_at: now,
    };
    rec.releases.insert(
        key,
        StoredRelease {
            disposition: ReleaseDisposition::SnapshotAndTerminate,
            receipt,
        },
    );
    Ok(true)
}

impl Engine {
    /// The checkpoint, once recorded. If the kill after it fails the sandbox is left as it
    /// is (`suspended` while its processes exist) and the checkpoint is still returned.
    pub(super) async fn snapshot_and_terminate(
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
                codes::SANDBOX_LOST,
                "the sandbox has no processes",
            ));
        };
        if let Err(e) = self.pause(&rec.r#ref.sandbox_id, leader).await {
            let cause = format!("pausing the sandbox failed: {e}");
            return Err(self.recover_after_failed_snapshot(rec, cause));
        }
        rec.state = S::Suspended;
        rec.revision += 1;
        if let Err(e) = self.save(rec) {
            let cause = format!("saving the sandbox state failed: {}", e.body.message);
            return Err(self.recover_after_failed_snapshot(rec, cause));
        }
        let checkpoint_id = format!("ckp_{}", uuid::Uuid::now_v7().simple());
        let info = match self.archive(rec, &checkpoint_id).await {
            Ok(info) => info,
            Err(cause) => return Err(self.recover_after_failed_snapshot(rec, cause)),
        };
        let checkpoint = CheckpointRef {
            checkpoint_id,
            provider_id: self.cfg.provider_id.clone(),
            sandbox_id: rec.r#ref.sandbox_id.clone(),
            generation: rec.generation,
            // Not the bytes newly written: those would tell whether the host already held a file.
            size_bytes: info.logical_bytes,
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
            format: CheckpointFormat::Manifest,
        };
        if let Err(e) = self.layout.save_checkpoint(&stored) {
            let _ = std::fs::remove_file(self.layout.manifest(&checkpoint.checkpoint_id));
            let cause = format!("recording the checkpoint failed: {e}");
            return Err(self.recover_after_failed_snapshot(rec, cause));
        }
        if let Err(cause) = self.kill_keeping(rec, Some(&checkpoint)).await {
            tracing::warn!(sandbox_id = %rec.r#ref.sandbox_id, checkpoint_id = %checkpoint.checkpoint_id, %cause, "the checkpoint is saved but the sandbox could not be killed");
            if !leader.is_alive() {
                rec.state = S::Lost;
            }
        }
        Ok(checkpoint)
    }

    /// Writes the sandbox's files as checkpoint `id`, in the blocking pool.
    async fn archive(&self, rec: &SandboxRecord, id: &str) -> Result<Written, String> {
        let fault = self.faults.decide(FaultPoint::Snapshot);
        if let Some(delay) = fault.delay {
            let r = &rec.r#ref;
            tracing::info!(sandbox_id = %r.sandbox_id, owner_run_id = %r.owner_run_id, delay_ms = delay.as_millis() as u64, "snapshot delayed (injected fault)");
            tokio::time::sleep(delay).await;
        }
        if fault.hold {
            self.faults.hold().await;
        }
        if fault.action.is_some() {
            return Err("archiving failed (injected fault)".into());
        }
        let (dir, id, sbx, layout) = (
            rec.dir.clone(),
            id.to_owned(),
            rec.r#ref.sandbox_id.clone(),
            self.layout.clone(),
        );
        match tokio::task::spawn_blocking(move || checkpoints::take(&layout, &dir, &id, &sbx)).await
        {
            Ok(Ok(info)) => Ok(info),
            Ok(Err(e)) => Err(format!("archiving failed: {e}")),
            Err(e) => Err(format!("archiving failed: {e}")),
        }
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
                    codes::SANDBOX_LOST,
                    format!("snapshot failed ({cause}) and the sandbox could not be resumed ({resume_cause})"),
                )
            }
        };
        self.save_or_warn(rec);
        err
    }

    /// A sandbox found `suspended` under its lock was left frozen by a release that did not
    /// finish (its task ended early): it runs again before anything else is done.
    pub(super) fn thaw_leftover(&self, rec: &mut SandboxRecord) {
        let thawed = rec
            .leader
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ESRCH))
            .and_then(|l| self.resume(&rec.r#ref.sandbox_id, l));
        rec.state = match thawed {
            Ok(()) => S::Ready,
            Err(e) => {
                tracing::warn!(sandbox_id = %rec.r#ref.sandbox_id, error = %e, "a sandbox left frozen could not be thawed");
                S::Lost
            }
        };
        rec.revision += 1;
        rec.updated_at = Utc::now();
        self.save_or_warn(rec);
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
