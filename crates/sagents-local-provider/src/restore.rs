//! `POST /v3/restores`: a new ready sandbox, one generation on, holding a checkpoint's files.

use chrono::Utc;

use super::engine::{check_key, check_name, check_spec, internal, Engine, PROVIDER_ID};
use super::error::ApiError;
use super::inventory::valid_checkpoint_id;
use super::process;
use super::state::{fingerprint, SandboxRecord};
use sagents_plugin_api::spec::WorkspaceMode;
use sagents_plugin_api::wire::{RestoreRequest, SandboxHandle, SandboxRef, SandboxState};

impl Engine {
    /// `POST /v3/restores`: a new ready sandbox holding the checkpoint's files.
    pub async fn restore(&self, req: &RestoreRequest) -> Result<(SandboxHandle, bool), ApiError> {
        check_spec(&req.spec)?;
        if req.spec.workspace_mode != WorkspaceMode::Isolated {
            return Err(ApiError::invalid(
                "sandbox.restore_unsupported",
                "an active workspace keeps its files on the host: provision it fresh instead",
            ));
        }
        check_name("owner_run_id", &req.owner_run_id)?;
        check_key(&req.idempotency_key)?;
        let fp = fingerprint(&(&req.checkpoint.checkpoint_id, &req.spec, &req.owner_run_id));
        let _guard = self.create_lock.lock().await;
        if let Some(h) = self.replay("restore", &req.idempotency_key, &fp)? {
            return Ok((self.with_fresh_grant(h).await, false));
        }
        let ckp_id = &req.checkpoint.checkpoint_id;
        let stored = match valid_checkpoint_id(ckp_id) {
            true => self
                .layout
                .load_checkpoint(ckp_id)
                .map_err(|e| internal("reading the checkpoint", e))?,
            false => None,
        }
        .ok_or_else(|| ApiError::not_found("checkpoint", ckp_id))?;
        let ckp = stored.checkpoint;
        if req.checkpoint.digest.is_some() && req.checkpoint.digest != ckp.digest {
            return Err(ApiError::invalid(
                "checkpoint.mismatch",
                "checkpoint.digest does not match the stored checkpoint",
            ));
        }
        let tenant_id = match (stored.labels, self.slot(&ckp.sandbox_id)) {
            (Some(labels), _) => labels.tenant_id,
            (None, Ok(s)) => s.lock().await.r#ref.tenant_id.clone(),
            (None, Err(_)) => String::new(),
        };
        let id = format!("sbx_{}", uuid::Uuid::now_v7().simple());
        let dir = self.layout.sandbox_dirs().join(&id);
        std::fs::create_dir_all(&dir).map_err(|e| internal("creating the sandbox", e))?;
        let archive = self.layout.archive(&ckp.checkpoint_id);
        let (digest, target) = (ckp.digest.clone(), dir.clone());
        let unpacked = tokio::task::spawn_blocking(move || {
            super::archive::unpack(&archive, &target, digest.as_deref())
        })
        .await
        .map_err(|e| internal("restoring the files", e))
        .and_then(|r| {
            r.map_err(|e| match e {
                super::archive::UnpackError::DigestMismatch => {
                    ApiError::terminal("checkpoint.corrupt", e.to_string())
                }
                super::archive::UnpackError::Io(io)
                    if io.kind() == std::io::ErrorKind::NotFound =>
                {
                    ApiError::terminal("checkpoint.missing", "the checkpoint's archive is gone")
                }
                other => internal("restoring the files", other),
            })
        });
        let leader = unpacked.and_then(|_| {
            process::spawn_leader(&dir).map_err(|e| internal("starting the sandbox", e))
        });
        let leader = match leader {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let now = Utc::now();
        let rec = SandboxRecord {
            r#ref: SandboxRef {
                sandbox_id: id,
                provider_id: PROVIDER_ID.into(),
                provider_version: env!("CARGO_PKG_VERSION").into(),
                tenant_id,
                owner_run_id: req.owner_run_id.clone(),
                spec_hash: req.spec.spec_hash.clone(),
                policy_hash: req.spec.policy_hash.clone(),
            },
            state: SandboxState::Ready,
            revision: 1,
            generation: ckp.generation + 1,
            attached_clients: 0,
            workspace_mode: WorkspaceMode::Isolated,
            dir,
            resources: req.spec.resources.clone(),
            leader: Some(leader),
            created_at: now,
            updated_at: now,
            releases: Default::default(),
            forgotten: false,
        };
        self.finish_create(rec, "restore", &req.idempotency_key, fp)
            .await
    }
}
