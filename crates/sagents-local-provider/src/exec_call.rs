//! `POST /v3/sandboxes/{id}/exec` on the engine: the grant, the sandbox's state, its slots
//! and disk quota are checked, then the command runs in the sandbox (`exec.rs`).

use std::time::Duration;

use super::engine::{internal, reconcile, Engine};
use super::error::ApiError;
use super::exec::{self, ExecPlan, Place};
use super::paths;
use super::process::Limits;
use sagents_plugin_api::wire::{ExecRequest, ExecResponse, SandboxState};

/// Refuses an exec once the sandbox's files take `mb` MiB or more.
async fn check_disk(dir: &std::path::Path, mb: u64) -> Result<(), ApiError> {
    let dir = dir.to_path_buf();
    let used = tokio::task::spawn_blocking(move || super::archive::disk_usage(&dir))
        .await
        .map_err(|e| internal("measuring the sandbox's files", e))?;
    if used >= mb.saturating_mul(1024 * 1024) {
        return Err(ApiError::conflict(
            "sandbox.disk_quota_exceeded",
            format!("the sandbox's files take {used} bytes; its quota is {mb} MiB"),
        ));
    }
    Ok(())
}

impl Engine {
    /// `POST /v3/sandboxes/{id}/exec`, guarded by `grant`, which must name the sandbox's
    /// current generation.
    pub async fn exec(
        &self,
        id: &str,
        grant: &str,
        req: &ExecRequest,
    ) -> Result<ExecResponse, ApiError> {
        let (leader, dir, resources, cgroup) = {
            let slot = self.slot(id)?;
            let mut rec = slot.lock().await;
            if reconcile(&mut rec) {
                self.save(&rec)?;
            }
            if rec.state == SandboxState::Terminated {
                return Err(ApiError::forbidden(
                    "grant.refused",
                    "the sandbox's compute was terminated; its grants are no longer valid",
                ));
            }
            self.cfg
                .grants
                .verify(
                    grant,
                    &self.cfg.provider_id,
                    id,
                    rec.generation,
                    self.cfg.clock.now(),
                )
                .map_err(|e| ApiError::forbidden("grant.invalid", e.to_string()))?;
            let leader = match (rec.state, rec.leader) {
                (SandboxState::Ready, Some(l)) => l,
                (state, _) => {
                    return Err(ApiError::conflict(
                        "sandbox.not_running",
                        format!("the sandbox is {state}"),
                    ))
                }
            };
            (
                leader,
                rec.dir.clone(),
                rec.resources.clone(),
                self.cgroup(id),
            )
        };
        let _slot = self.exec_slots.take(id)?;
        if req.timeout_seconds == 0 || req.timeout_seconds > exec::MAX_TIMEOUT_SECONDS {
            return Err(ApiError::invalid(
                "validation.failed",
                format!("timeout_seconds must be 1 to {}", exec::MAX_TIMEOUT_SECONDS),
            ));
        }
        let cwd = paths::resolve_cwd(&dir, req.cwd.as_deref())
            .map_err(|e| ApiError::invalid("exec.cwd_invalid", format!("cwd: {e}")))?;
        if let Some(mb) = resources.disk_mb {
            check_disk(&dir, mb).await?;
        }
        let timeout = Duration::from_secs(req.timeout_seconds);
        let home = dir.canonicalize().unwrap_or(dir.clone());
        let rel = cwd.strip_prefix(&home).unwrap_or(std::path::Path::new(""));
        let place = match &self.cfg.sandboxer {
            Some(sandboxer) => Place::Isolated {
                sandboxer,
                leader,
                cwd: rel,
            },
            None => Place::Host {
                cwd: &cwd,
                home: &dir,
                process_group: leader.pid,
            },
        };
        exec::run(ExecPlan {
            argv: &req.argv,
            place,
            env: req.env.as_ref(),
            stdin: req.stdin.as_deref(),
            timeout,
            limits: Limits::from_resources(&resources, timeout),
            cgroup,
        })
        .await
        .map_err(|e| match e {
            exec::ExecError::Spawn(_) | exec::ExecError::Wait(_) => {
                ApiError::invalid("exec.failed", e.to_string())
            }
            other => ApiError::invalid("validation.failed", other.to_string()),
        })
    }
}
