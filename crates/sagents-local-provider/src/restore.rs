//! `POST /v3/restores`: a new ready sandbox, one generation on, holding a checkpoint's files.

use std::path::Path;
use std::time::Instant;

use chrono::Utc;

use super::chunks::WrittenFiles;
use super::create::Begin;
use super::engine::{check_key, check_name, check_spec, internal, Engine};
use super::error::ApiError;
use super::faults::FaultPoint;
use super::inventory::valid_checkpoint_id;
use super::paths::OpenDir;
use super::state::{fingerprint, CreateIntent, SandboxRecord, StoredCheckpoint};
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
        let _key = self
            .locks
            .lock(&format!("restore:{}", req.idempotency_key))
            .await;
        // Held from reading the checkpoint to unpacking it, so a delete waits for it.
        let _checkpoint = self
            .locks
            .lock(&format!("checkpoint:{}", req.checkpoint.checkpoint_id))
            .await;
        let id = match self
            .begin_create("restore", &req.idempotency_key, &fp)
            .await?
        {
            Begin::Replay(h) => return Ok((*h, false)),
            Begin::Create(id) => id,
        };
        let ckp_id = &req.checkpoint.checkpoint_id;
        let stored = match valid_checkpoint_id(ckp_id) {
            true => self
                .layout
                .load_checkpoint(ckp_id)
                .map_err(|e| internal("reading the checkpoint", e))?,
            false => None,
        }
        .ok_or_else(|| ApiError::not_found("checkpoint", ckp_id))?;
        let ckp = &stored.checkpoint;
        if req.checkpoint.digest.is_some() && req.checkpoint.digest != ckp.digest {
            return Err(ApiError::invalid(
                "checkpoint.mismatch",
                "checkpoint.digest does not match the stored checkpoint",
            ));
        }
        let tenant_id = match (stored.labels.clone(), self.slot(&ckp.sandbox_id)) {
            (Some(labels), _) => labels.tenant_id,
            (None, Ok(s)) => s.lock().await.r#ref.tenant_id.clone(),
            (None, Err(_)) => String::new(),
        };
        let intent = CreateIntent {
            scope: "restore".into(),
            key: req.idempotency_key.clone(),
            fingerprint: fp,
            dir: self.layout.sandbox_dirs().join(&id),
            sandbox_id: id,
            workspace_mode: WorkspaceMode::Isolated,
            undone: false,
        };
        self.record_intent(&intent).await?;
        let mut stages = Stages::new();
        let made = self
            .restore_steps(req, &intent, stored, tenant_id, &mut stages)
            .await;
        if made.is_ok() {
            stages.log(&intent.sandbox_id);
        }
        self.settle(&intent, made)
    }

    async fn restore_steps(
        &self,
        req: &RestoreRequest,
        intent: &CreateIntent,
        stored: StoredCheckpoint,
        tenant_id: String,
        stages: &mut Stages,
    ) -> Result<(SandboxHandle, bool), ApiError> {
        let ckp = stored.checkpoint.clone();
        let dir = intent.dir.clone();
        let kept = self.restore_warm(&stored, &dir).await;
        let warm = kept.is_some();
        let (written, owner) = match kept {
            Some(kept) => (kept.files, kept.owner),
            None => (self.unpack_checkpoint(stored, &dir).await?, None),
        };
        stages.files(warm);
        self.crash_after(FaultPoint::CreateFiles)?;
        let opened = OpenDir::open(&dir).map_err(|e| internal("opening the sandbox", e))?;
        // A kept tree is its predecessor's, owned by that sandbox's uid: the same uid again
        // needs no hand-over, so the fingerprints of the walk that checked it still hold.
        let leader = self
            .spawn_leader(opened, &intent.sandbox_id, &req.spec.resources, owner)
            .await?;
        self.crash_after(FaultPoint::CreateLeader)?;
        stages.mark(1);
        let exact = owner.is_some() && leader.host_uid.is_none_or(|u| owner == Some((u, u)));
        stages.handed_over = !exact;
        let (layout, sbx, target) = (self.layout.clone(), intent.sandbox_id.clone(), dir.clone());
        let ckp_id = ckp.checkpoint_id.clone();
        let _ = tokio::task::spawn_blocking(move || {
            super::chunks::checkpoints::remember(&layout, &sbx, &ckp_id, &target, written, exact)
        })
        .await;
        stages.mark(2);
        let now = Utc::now();
        let rec = SandboxRecord {
            r#ref: SandboxRef {
                sandbox_id: intent.sandbox_id.clone(),
                provider_id: self.cfg.provider_id.clone(),
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
            failed_releases: Default::default(),
            releasing: None,
            forgotten: false,
        };
        let done = self.finish_create(rec, intent).await;
        stages.mark(3);
        done
    }

    /// Writes the checkpoint's files into `dir` (from its blobs, or its archive for one of
    /// the earlier format), one of at most `restore_concurrency` at once: a burst on a few
    /// cores finishes its first restores early instead of all of them late. Returns the
    /// fingerprints of the files written.
    async fn unpack_checkpoint(
        &self,
        stored: StoredCheckpoint,
        dir: &Path,
    ) -> Result<WrittenFiles, ApiError> {
        std::fs::create_dir_all(dir).map_err(|e| internal("creating the sandbox", e))?;
        let _slot = self
            .unpack_slots
            .acquire()
            .await
            .map_err(|e| internal("waiting to unpack", e))?;
        let (layout, target) = (self.layout.clone(), dir.to_path_buf());
        tokio::task::spawn_blocking(move || {
            super::chunks::checkpoints::bring_back(&layout, &stored, &target)
        })
        .await
        .map_err(|e| internal("restoring the files", e))?
        .map_err(|e| match e {
            super::archive::UnpackError::DigestMismatch
            | super::archive::UnpackError::Malformed(_) => {
                ApiError::terminal("checkpoint.corrupt", e.to_string())
            }
            super::archive::UnpackError::Unsafe(_) => {
                ApiError::invalid("checkpoint.unsafe", e.to_string())
            }
            super::archive::UnpackError::Io(io) if io.kind() == std::io::ErrorKind::NotFound => {
                ApiError::terminal("checkpoint.missing", "the checkpoint's files are gone")
            }
            other => internal("restoring the files", other),
        })
    }
}

/// How long each step of one restore took, logged once it answered: the files (a kept tree
/// checked and moved, or a checkpoint unpacked), the sandbox's start (with every file handed
/// to its uid, unless a kept tree's uid was free again), the fingerprints saved, the record
/// saved.
struct Stages {
    last: Instant,
    warm: bool,
    handed_over: bool,
    ms: [f64; 4],
}

impl Stages {
    fn new() -> Self {
        Stages {
            last: Instant::now(),
            warm: false,
            handed_over: true,
            ms: [0.0; 4],
        }
    }

    fn files(&mut self, warm: bool) {
        self.warm = warm;
        self.mark(0);
    }

    fn mark(&mut self, i: usize) {
        let now = Instant::now();
        self.ms[i] = (now - self.last).as_secs_f64() * 1000.0;
        self.last = now;
    }

    fn log(&self, sandbox_id: &str) {
        let r = |x: f64| (x * 100.0).round() / 100.0;
        tracing::info!(
            %sandbox_id,
            warm = self.warm,
            handed_over = self.handed_over,
            files_ms = r(self.ms[0]),
            start_ms = r(self.ms[1]),
            fingerprints_ms = r(self.ms[2]),
            record_ms = r(self.ms[3]),
            "restore stages"
        );
    }
}
