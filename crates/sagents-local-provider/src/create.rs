//! Creating a sandbox (`POST /v3/sandboxes` here; restores share the steps) exactly once per
//! idempotency key, even when the provider is killed half-way: the key's intent (the sandbox
//! id it creates) is recorded before anything of the sandbox exists, and removed once the
//! answer is recorded. A retry with the key, and the next start, remove whatever an
//! interrupted attempt left behind; the retry then creates the sandbox again under that id.

use std::path::Path;

use chrono::Utc;

use super::engine::{check_key, check_name, check_spec, internal, Engine};
use super::error::ApiError;
use super::faults::FaultPoint;
use super::paths::{self, OpenDir};
use super::process;
use super::state::{fingerprint, CreateIntent, Layout, SandboxRecord, StoredRequest};
use super::undo::undo;
use sagents_plugin_api::spec::WorkspaceMode;
use sagents_plugin_api::wire::{ProvisionRequest, SandboxHandle, SandboxRef, SandboxState};

fn key_reused(scope: &str) -> ApiError {
    ApiError::conflict(
        "idempotency.key_reused",
        format!("idempotency_key was already used for a different {scope} request"),
    )
}

/// What a create call does: answer from the record, or create this sandbox.
pub(super) enum Begin {
    Replay(Box<SandboxHandle>),
    Create(String),
}

impl Engine {
    pub(super) fn replay(
        &self,
        scope: &str,
        key: &str,
        fp: &str,
    ) -> Result<Option<SandboxHandle>, ApiError> {
        let stored = self
            .layout
            .load_request(scope, key)
            .map_err(|e| internal("reading the idempotency record", e))?;
        match stored {
            Some(s) if s.fingerprint == fp => Ok(Some(s.handle)),
            Some(_) => Err(key_reused(scope)),
            None => Ok(None),
        }
    }

    /// A replayed answer carries a grant only while its sandbox generation still runs.
    pub(super) async fn with_fresh_grant(&self, mut handle: SandboxHandle) -> SandboxHandle {
        if let Ok(slot) = self.slot(&handle.r#ref.sandbox_id) {
            let rec = slot.lock().await;
            if rec.generation == handle.generation {
                handle.grant = self.handle_of(&rec).grant;
            }
        }
        handle
    }

    /// Under the create lock: the recorded answer for the key, or the sandbox id to create
    /// (an interrupted attempt's, once what it left behind is gone).
    pub(super) async fn begin_create(
        &self,
        scope: &str,
        key: &str,
        fp: &str,
    ) -> Result<Begin, ApiError> {
        if let Some(h) = self.replay(scope, key, fp)? {
            return Ok(Begin::Replay(Box::new(self.with_fresh_grant(h).await)));
        }
        let intent = self
            .layout
            .load_intent(scope, key)
            .map_err(|e| internal("reading the creation intent", e))?;
        match intent {
            Some(i) if i.fingerprint != fp => Err(key_reused(scope)),
            Some(i) => {
                if !i.undone {
                    undo(&self.layout, &i, &process::tagged_leaders())
                        .map_err(|e| internal("removing an interrupted creation", e))?;
                }
                Ok(Begin::Create(i.sandbox_id))
            }
            None => Ok(Begin::Create(format!(
                "sbx_{}",
                uuid::Uuid::now_v7().simple()
            ))),
        }
    }

    pub(super) async fn record_intent(&self, intent: &CreateIntent) -> Result<(), ApiError> {
        let i = intent.clone();
        self.on_disk("recording the creation", move |l| l.save_intent(&i))
            .await?;
        self.crash_after(FaultPoint::CreateIntent)
    }

    /// Runs `f` on the layout on a blocking thread: its writes wait for the disk (fsync),
    /// which would hold one of the few threads every request is served on.
    pub(super) async fn on_disk<T: Send + 'static>(
        &self,
        what: &'static str,
        f: impl FnOnce(&Layout) -> std::io::Result<T> + Send + 'static,
    ) -> Result<T, ApiError> {
        let layout = self.layout.clone();
        tokio::task::spawn_blocking(move || f(&layout))
            .await
            .map_err(|e| internal(what, std::io::Error::other(e)))?
            .map_err(|e| internal(what, e))
    }

    pub(super) fn crash_after(&self, step: FaultPoint) -> Result<(), ApiError> {
        match self.faults.crashes_after(step) {
            true => Err(ApiError::crashed(step)),
            false => Ok(()),
        }
    }

    /// A failed creation removes what it made and its intent; a crash leaves them.
    pub(super) fn settle(
        &self,
        intent: &CreateIntent,
        made: Result<(SandboxHandle, bool), ApiError>,
    ) -> Result<(SandboxHandle, bool), ApiError> {
        if let Err(e) = &made {
            if !e.is_crash() {
                let undone = undo(&self.layout, intent, &process::tagged_leaders())
                    .and_then(|_| self.layout.remove_intent(&intent.scope, &intent.key));
                if let Err(u) = undone {
                    tracing::warn!(sandbox_id = %intent.sandbox_id, error = %u, "could not remove a failed creation");
                }
            }
        }
        made
    }

    /// Whether a live sandbox's folder is `dir`, lies inside it, or holds it. Only those
    /// sandboxes are waited for: another's snapshot holds its lock for seconds.
    async fn workspace_in_use(&self, dir: &Path) -> bool {
        let overlapping = self.slots_by_folder(|d| d.starts_with(dir) || dir.starts_with(d));
        for slot in overlapping {
            let rec = slot.lock().await;
            if rec.state.holds_compute() && rec.state != SandboxState::Lost {
                return true;
            }
        }
        false
    }

    /// `WORKSPACE_ROOT/<tenant>`, created if missing: the only place a tenant's active
    /// workspaces may lie.
    fn tenant_workspaces(&self, tenant_id: &str) -> Result<std::path::PathBuf, ApiError> {
        if tenant_id.bytes().all(|b| b == b'.') {
            return Err(ApiError::invalid(
                "validation.failed",
                "tenant_id: must not be `.` or `..` for an active workspace",
            ));
        }
        let dir = self.cfg.workspace_root.join(tenant_id);
        std::fs::create_dir_all(&dir)
            .map_err(|e| internal("creating the tenant's workspace folder", e))?;
        Ok(dir)
    }

    /// `POST /v3/sandboxes`; the bool is false for a replay.
    pub async fn provision(
        &self,
        req: &ProvisionRequest,
    ) -> Result<(SandboxHandle, bool), ApiError> {
        check_spec(&req.spec)?;
        check_name("owner_run_id", &req.owner_run_id)?;
        check_name("tenant_id", &req.tenant_id)?;
        check_key(&req.idempotency_key)?;
        let fp = fingerprint(&(&req.spec, &req.owner_run_id, &req.tenant_id));
        let _key = self
            .locks
            .lock(&format!("provision:{}", req.idempotency_key))
            .await;
        let id = match self
            .begin_create("provision", &req.idempotency_key, &fp)
            .await?
        {
            Begin::Replay(h) => return Ok((*h, false)),
            Begin::Create(id) => id,
        };
        let mut _workspaces = None;
        let mut opened = None;
        let dir = match (&req.spec.workspace_mode, &req.spec.host_workspace) {
            (WorkspaceMode::ActiveWorkspace, Some(host)) => {
                let tenant_root = self.tenant_workspaces(&req.tenant_id)?;
                let ws = paths::resolve_workspace(&tenant_root, host).map_err(|e| {
                    ApiError::invalid(
                        "sandbox.workspace_outside_root",
                        format!(
                            "sandbox_spec.host_workspace: {e}; it must lie inside the workspace root's folder for tenant `{}`",
                            req.tenant_id
                        ),
                    )
                })?;
                // One lock for all: overlapping workspaces have different names.
                _workspaces = Some(self.locks.lock("workspaces").await);
                if self.workspace_in_use(&ws.path).await {
                    return Err(ApiError::conflict(
                        "sandbox.workspace_in_use",
                        "another live sandbox has this workspace, a folder inside it or a folder holding it mounted",
                    ));
                }
                let dir = ws.path.clone();
                opened = Some(ws);
                dir
            }
            _ => self.layout.sandbox_dirs().join(&id),
        };
        let intent = CreateIntent {
            scope: "provision".into(),
            key: req.idempotency_key.clone(),
            fingerprint: fp,
            sandbox_id: id,
            workspace_mode: req.spec.workspace_mode,
            dir,
            undone: false,
        };
        self.record_intent(&intent).await?;
        let made = self.provision_steps(req, &intent, opened).await;
        self.settle(&intent, made)
    }

    async fn provision_steps(
        &self,
        req: &ProvisionRequest,
        intent: &CreateIntent,
        workspace: Option<OpenDir>,
    ) -> Result<(SandboxHandle, bool), ApiError> {
        let dir = intent.dir.clone();
        let opened = match workspace {
            Some(ws) => ws,
            None => {
                std::fs::create_dir_all(&dir).map_err(|e| internal("creating the sandbox", e))?;
                OpenDir::open(&dir).map_err(|e| internal("opening the sandbox", e))?
            }
        };
        self.crash_after(FaultPoint::CreateFiles)?;
        let leader = self
            .spawn_leader(opened, &intent.sandbox_id, &req.spec.resources, None)
            .await?;
        self.crash_after(FaultPoint::CreateLeader)?;
        let now = Utc::now();
        let rec = SandboxRecord {
            r#ref: SandboxRef {
                sandbox_id: intent.sandbox_id.clone(),
                provider_id: self.cfg.provider_id.clone(),
                provider_version: env!("CARGO_PKG_VERSION").into(),
                tenant_id: req.tenant_id.clone(),
                owner_run_id: req.owner_run_id.clone(),
                spec_hash: req.spec.spec_hash.clone(),
                policy_hash: req.spec.policy_hash.clone(),
            },
            state: SandboxState::Ready,
            revision: 1,
            generation: 1,
            attached_clients: 0,
            workspace_mode: req.spec.workspace_mode,
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
        self.finish_create(rec, intent).await
    }

    /// Saves the sandbox, then the key's answer, then drops the intent.
    pub(super) async fn finish_create(
        &self,
        rec: SandboxRecord,
        intent: &CreateIntent,
    ) -> Result<(SandboxHandle, bool), ApiError> {
        self.may_save(&rec)?;
        let saved = rec.clone();
        self.on_disk("saving the sandbox state", move |l| l.save_sandbox(&saved))
            .await?;
        self.crash_after(FaultPoint::CreateState)?;
        let mut stored = self.handle_of(&rec);
        stored.grant = None;
        let (scope, key) = (intent.scope.clone(), intent.key.clone());
        let request = StoredRequest {
            fingerprint: intent.fingerprint.clone(),
            handle: stored,
        };
        self.on_disk("saving the idempotency record", move |l| {
            l.save_request(&scope, &key, &request)
        })
        .await?;
        let handle = self.handle_of(&rec);
        self.insert(rec);
        self.crash_after(FaultPoint::CreateRecord)?;
        let (scope, key) = (intent.scope.clone(), intent.key.clone());
        let removed = self
            .on_disk("removing the intent", move |l| {
                l.remove_intent(&scope, &key)
            })
            .await;
        if let Err(e) = removed {
            tracing::warn!(sandbox_id = %intent.sandbox_id, error = %e, "could not remove a finished creation's intent");
        }
        Ok((handle, true))
    }
}
