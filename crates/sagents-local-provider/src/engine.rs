//! The provider's sandboxes: loading, inspect, attach. Creation lives in `create.rs` and
//! `restore.rs`, release in `release.rs` and `snapshot.rs`, exec in `exec_call.rs`. Each
//! sandbox has its own lock; creations share one, so idempotency keys of provisions and
//! restores are checked and recorded without races.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::{Mutex, Semaphore};

use super::cgroup::{Cgroups, Controller, Defaults};
use super::clock::Clock;
use super::doors::ExecSlots;
use super::error::ApiError;
use super::faults::{FaultPlan, FaultPoint};
use super::isolation::Sandboxer;
use super::locks::NamedLocks;
use super::operations::{Operations, ReleaseOutcome, RestoreOutcome};
use super::process;
use super::state::{Layout, SandboxRecord};
use super::undo::undo;
use super::warm::WarmCache;
use sagents_plugin_api::grant::GrantVerifier;
use sagents_plugin_api::spec::{ReleaseDisposition, ResolvedSandboxSpec, SpecError};
use sagents_plugin_api::wire::{
    AttachRequest, Capabilities, SandboxHandle, SandboxInfo, SandboxState, API_VERSION_V3,
    CAPABILITY_SANDBOX,
};

/// The provider's id unless it is started with another (`--provider-id`).
pub const PROVIDER_ID: &str = "local";
pub const GRANT_TTL: Duration = Duration::from_secs(15 * 60);
const MAX_KEY_LEN: usize = 256;
/// How long an inspect waits for an operation on its sandbox before answering from the saved record.
const INSPECT_LOCK_WAIT: Duration = Duration::from_millis(500);

pub struct EngineConfig {
    pub workspace_root: PathBuf,
    /// Checks exec grants; mints the grants of answers only when it holds a shared secret.
    pub grants: GrantVerifier,
    pub clock: Clock,
    /// `None`: sandboxes run unisolated on the host (`--isolation none`).
    pub sandboxer: Option<Sandboxer>,
    /// This provider's id: named in its answers, and the audience every grant must name.
    pub provider_id: String,
    /// Whether a sandbox may ask for the host's network.
    pub allow_host_network: bool,
    /// Commands one sandbox may run at once.
    pub max_execs_per_sandbox: usize,
    /// Routes are served without a token (`--insecure-no-auth`), as the capabilities say.
    pub unauthenticated: bool,
    /// The control groups this host lets the provider make, one per sandbox.
    pub cgroups: Cgroups,
    /// The bounds of a sandbox whose spec says nothing.
    pub defaults: Defaults,
    /// How long a release or restore call waits for its operation before answering `202`.
    pub operation_wait: Duration,
    /// The warm restore cache's budget; 0 turns it off.
    pub warm_cache_bytes: u64,
    /// Archives unpacked at once.
    pub restore_concurrency: usize,
}

#[cfg(test)]
impl EngineConfig {
    /// An unisolated engine over `root` with the defaults, for unit tests.
    pub(crate) fn for_tests(root: &std::path::Path) -> Self {
        EngineConfig {
            workspace_root: root.join("workspaces"),
            grants: GrantVerifier::hmac(b"unit-test-secret"),
            clock: Clock::system(),
            sandboxer: None,
            provider_id: crate::PROVIDER_ID.into(),
            allow_host_network: false,
            max_execs_per_sandbox: crate::DEFAULT_MAX_EXECS_PER_SANDBOX,
            unauthenticated: false,
            cgroups: Cgroups::detect(root),
            defaults: Defaults::default(),
            operation_wait: crate::DEFAULT_OPERATION_WAIT,
            warm_cache_bytes: crate::DEFAULT_WARM_CACHE_MB * 1024 * 1024,
            restore_concurrency: 2,
        }
    }
}

pub type Slot = Arc<Mutex<SandboxRecord>>;

/// A sandbox held: in memory, or terminated and read from its file on first use.
#[derive(Clone)]
pub(super) enum Entry {
    /// The record, and its folder (which never changes) readable without waiting for the
    /// record's lock, held across a snapshot.
    Resident(Slot, Arc<Path>),
    Terminated,
}

pub struct Engine {
    pub(super) cfg: EngineConfig,
    pub(super) layout: Layout,
    pub(super) faults: FaultPlan,
    sandboxes: RwLock<BTreeMap<String, Entry>>,
    /// Creations by idempotency key, checkpoints by id, active workspaces by folder.
    pub(super) locks: NamedLocks,
    pub(super) exec_slots: ExecSlots,
    /// Releases by `(sandbox_id, idempotency_key)` and restores by key, while they run.
    pub(super) release_ops: Operations<ReleaseOutcome>,
    pub(super) restore_ops: Operations<RestoreOutcome>,
    /// The host uid each sandbox with compute runs as.
    pub(super) uids: std::sync::Mutex<HashMap<String, u32>>,
    pub(super) warm: Arc<WarmCache>,
    /// One permit per archive being unpacked.
    pub(super) unpack_slots: Semaphore,
}

pub(super) fn internal(context: &str, e: impl std::fmt::Display) -> ApiError {
    ApiError::internal(format!("{context}: {e}"))
}

pub(super) fn check_key(key: &str) -> Result<(), ApiError> {
    if key.is_empty() || key.len() > MAX_KEY_LEN || key.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            "validation.failed",
            format!("idempotency_key must be 1 to {MAX_KEY_LEN} printable characters"),
        ));
    }
    Ok(())
}

pub(super) fn check_spec(spec: &ResolvedSandboxSpec) -> Result<(), ApiError> {
    spec.validate().map_err(|e| match e {
        SpecError::Unsupported(_) => ApiError::invalid("sandbox.spec_unsupported", e.to_string()),
        SpecError::Invalid { .. } => ApiError::invalid("validation.failed", e.to_string()),
    })
}

pub(super) fn check_name(field: &str, value: &str) -> Result<(), ApiError> {
    let ok = !value.is_empty()
        && value.len() <= 128
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    if ok {
        return Ok(());
    }
    Err(ApiError::invalid(
        "validation.failed",
        format!("{field}: must be 1 to 128 letters, digits, `.`, `_`, `:` or `-`"),
    ))
}

/// Refreshes a record whose processes died behind our back. Returns whether it changed.
pub(super) fn reconcile(rec: &mut SandboxRecord) -> bool {
    let live_state = matches!(
        rec.state,
        SandboxState::Ready | SandboxState::Suspended | SandboxState::Provisioning
    );
    if live_state && !rec.leader.is_some_and(|l| l.is_alive()) {
        rec.state = SandboxState::Lost;
        rec.revision += 1;
        rec.updated_at = Utc::now();
        return true;
    }
    false
}

fn resident(rec: SandboxRecord) -> (Slot, Entry) {
    let dir: Arc<Path> = Arc::from(rec.dir.as_path());
    let slot = Arc::new(Mutex::new(rec));
    (slot.clone(), Entry::Resident(slot, dir))
}

/// Drops the intents whose answer is recorded and undoes the others.
fn settle_intents(layout: &Layout) -> std::io::Result<()> {
    let mut leaders = None;
    for intent in layout.load_intents()? {
        let answered = layout
            .load_request(&intent.scope, &intent.key)?
            .map(|r| r.handle.r#ref.sandbox_id);
        if !intent.undone && answered.as_ref() != Some(&intent.sandbox_id) {
            let leaders = leaders.get_or_insert_with(process::tagged_leaders);
            if let Err(e) = undo(layout, &intent, leaders) {
                tracing::warn!(sandbox_id = %intent.sandbox_id, error = %e, "could not remove an interrupted creation");
                continue;
            }
        }
        if answered.is_some() {
            layout.remove_intent(&intent.scope, &intent.key)?;
        }
    }
    Ok(())
}

impl Engine {
    /// The fault plan this provider runs with (empty outside tests).
    pub fn faults(&self) -> &FaultPlan {
        &self.faults
    }

    /// Loads every persisted sandbox (a terminated one only by id) and reports honestly what
    /// survived: a sandbox whose processes are gone is `lost`; one paused by an interrupted
    /// release with no receipt is thawed back to `ready` (the retry of its key archives it
    /// again), one whose receipt names a checkpoint but whose kill failed stays frozen for
    /// the retry to kill; what an interrupted provision or restore left behind is removed
    /// (its intent stays, so a retry of its key creates the same sandbox id), and so is an
    /// archive left half-written.
    pub fn load(cfg: EngineConfig, layout: Layout, faults: FaultPlan) -> std::io::Result<Self> {
        settle_intents(&layout)?;
        let mut map = BTreeMap::new();
        let (mut uids, mut live) = (HashMap::new(), HashSet::new());
        for mut rec in layout.load_sandboxes()? {
            let id = rec.r#ref.sandbox_id.clone();
            let finished = super::snapshot::finish_interrupted_snapshot(&layout, &mut rec)?;
            let mut changed = finished || reconcile(&mut rec);
            if let Some(leader) = rec.leader {
                if let Some(uid) = leader.host_uid {
                    uids.insert(id.clone(), uid);
                }
                if leader.is_alive() {
                    live.insert(id.clone());
                }
            }
            if rec.state == SandboxState::Ready {
                // A release killed between its freeze and saving `suspended` left it frozen.
                let cg = cfg.cgroups.sandbox(&id);
                let thawed = match (cg.can_freeze() && cg.exists(), rec.leader) {
                    (true, _) => cg.thaw().map_err(|e| e.to_string()),
                    (false, Some(leader)) => leader.resume().map_err(|e| e.to_string()),
                    (false, None) => Ok(()),
                };
                if let Err(e) = thawed {
                    tracing::warn!(sandbox_id = %id, error = %e, "could not thaw a ready sandbox");
                }
            }
            if rec.state == SandboxState::Suspended && !rec.awaits_kill() {
                let cg = cfg.cgroups.sandbox(&id);
                let thawed = !cg.exists() || cg.thaw().is_ok();
                let resumed = thawed && rec.leader.is_some_and(|l| l.resume().is_ok());
                rec.state = if resumed {
                    SandboxState::Ready
                } else {
                    SandboxState::Lost
                };
                rec.revision += 1;
                changed = true;
            }
            if changed {
                layout.save_sandbox(&rec)?;
            }
            map.insert(rec.r#ref.sandbox_id.clone(), resident(rec).1);
        }
        for id in layout.terminated_ids()? {
            map.entry(id).or_insert(Entry::Terminated);
        }
        if let Ok(entries) = std::fs::read_dir(layout.trash()) {
            for e in entries.flatten() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        layout.remove_partial_archives()?;
        let warm = WarmCache::open(&layout.root, layout.trash(), cfg.warm_cache_bytes, |id| {
            super::inventory::valid_checkpoint_id(id)
                && matches!(layout.load_checkpoint(id), Ok(Some(c)) if layout.checkpoint_data(&c).exists())
        })?;
        cfg.cgroups.clean_stale(&live);
        Ok(Engine {
            exec_slots: ExecSlots::new(cfg.max_execs_per_sandbox),
            layout,
            faults,
            sandboxes: RwLock::new(map),
            locks: NamedLocks::default(),
            release_ops: Operations::default(),
            restore_ops: Operations::default(),
            uids: std::sync::Mutex::new(uids),
            warm: Arc::new(warm),
            unpack_slots: Semaphore::new(cfg.restore_concurrency.max(1)),
            cfg,
        })
    }

    pub fn capabilities(&self) -> Capabilities {
        Capabilities {
            api_version: API_VERSION_V3.into(),
            capability: CAPABILITY_SANDBOX.into(),
            provider_id: self.cfg.provider_id.clone(),
            provider_version: env!("CARGO_PKG_VERSION").into(),
            isolation_level: match self.cfg.sandboxer {
                Some(_) => "namespaces".into(),
                None => "process".into(),
            },
            supported_release_dispositions: ReleaseDisposition::ALL.to_vec(),
            supports_snapshot: true,
            supports_restore: true,
            supports_reconnect: true,
            max_lifetime_seconds: None,
            supports_exec: true,
            supports_inventory: true,
            supports_checkpoint_delete: true,
            unauthenticated: self.cfg.unauthenticated,
            bounded_resources: [
                ("max_processes", Controller::Pids),
                ("memory_mb", Controller::Memory),
                ("cpu_percent", Controller::Cpu),
            ]
            .into_iter()
            .filter(|&(_, c)| self.cfg.cgroups.has(c))
            .map(|(field, _)| field.to_owned())
            .collect(),
        }
    }

    /// The sandbox, read from its file first if it was terminated before this start.
    pub(super) fn slot(&self, id: &str) -> Result<Slot, ApiError> {
        let map = self.sandboxes.read().unwrap_or_else(|e| e.into_inner());
        match map.get(id) {
            Some(Entry::Resident(slot, _)) => return Ok(slot.clone()),
            Some(Entry::Terminated) => {}
            None => return Err(ApiError::not_found("sandbox", id)),
        }
        drop(map);
        let mut map = self.sandboxes.write().unwrap_or_else(|e| e.into_inner());
        if let Some(Entry::Resident(slot, _)) = map.get(id) {
            return Ok(slot.clone());
        }
        if !map.contains_key(id) {
            return Err(ApiError::not_found("sandbox", id));
        }
        let rec = self
            .layout
            .load_sandbox(id)
            .map_err(|e| internal("reading the sandbox state", e))?;
        let Some(rec) = rec else {
            map.remove(id);
            return Err(ApiError::not_found("sandbox", id));
        };
        let (slot, entry) = resident(rec);
        map.insert(id.to_owned(), entry);
        Ok(slot)
    }

    /// The sandboxes held in memory: every one that may still run.
    pub(super) fn slots(&self) -> Vec<Slot> {
        self.slots_by_folder(|_| true)
    }

    /// The sandboxes held in memory whose folder satisfies `keep`, read without their locks.
    pub(super) fn slots_by_folder(&self, keep: impl Fn(&Path) -> bool) -> Vec<Slot> {
        let map = self.sandboxes.read().unwrap_or_else(|e| e.into_inner());
        map.values()
            .filter_map(|e| match e {
                Entry::Resident(slot, dir) if keep(dir) => Some(slot.clone()),
                _ => None,
            })
            .collect()
    }

    /// How many sandbox records are held in memory.
    pub fn resident_sandboxes(&self) -> usize {
        self.slots().len()
    }

    /// Up to `n` sandboxes in id order, starting after `after`.
    pub(super) fn entries_after(&self, after: Option<&str>, n: usize) -> Vec<(String, Entry)> {
        let map = self.sandboxes.read().unwrap_or_else(|e| e.into_inner());
        let start = after.map_or(Bound::Unbounded, |a| Bound::Excluded(a.to_owned()));
        map.range((start, Bound::Unbounded))
            .take(n)
            .map(|(id, e)| (id.clone(), e.clone()))
            .collect()
    }

    pub(super) fn remove_slot(&self, id: &str) {
        let mut map = self.sandboxes.write().unwrap_or_else(|e| e.into_inner());
        map.remove(id);
    }

    pub(super) fn insert(&self, rec: SandboxRecord) {
        let mut map = self.sandboxes.write().unwrap_or_else(|e| e.into_inner());
        map.insert(rec.r#ref.sandbox_id.clone(), resident(rec).1);
    }

    pub(super) fn save(&self, rec: &SandboxRecord) -> Result<(), ApiError> {
        self.may_save(rec)?;
        self.layout
            .save_sandbox(rec)
            .map_err(|e| internal("saving the sandbox state", e))
    }

    /// Whether `rec` may be saved: not once forgotten, nor when a fault says the disk is full.
    pub(super) fn may_save(&self, rec: &SandboxRecord) -> Result<(), ApiError> {
        if rec.forgotten {
            return Err(ApiError::not_found("sandbox", &rec.r#ref.sandbox_id));
        }
        if self.faults.step_fails(FaultPoint::StateSave) {
            return Err(internal(
                "saving the sandbox state",
                "no space left on device (injected fault)",
            ));
        }
        Ok(())
    }

    /// The `{ref, state, revision}` answer, with a fresh grant while the sandbox is ready and
    /// the provider can mint (a shared secret; never with only the service's public key).
    pub(super) fn handle_of(&self, rec: &SandboxRecord) -> SandboxHandle {
        let signer = self.cfg.grants.signer();
        let grant = signer
            .filter(|_| rec.state == SandboxState::Ready)
            .map(|signer| {
                let ttl = chrono::Duration::from_std(GRANT_TTL).unwrap_or_default();
                signer.mint(
                    &self.cfg.provider_id,
                    &rec.r#ref.sandbox_id,
                    rec.generation,
                    self.cfg.clock.now() + ttl,
                )
            });
        SandboxHandle {
            r#ref: rec.r#ref.clone(),
            state: rec.state,
            revision: rec.revision,
            generation: rec.generation,
            grant,
        }
    }

    /// A sandbox held by a long operation (a snapshot archiving) is answered from its saved
    /// record instead of waiting for the operation to end.
    pub async fn inspect(&self, id: &str) -> Result<SandboxInfo, ApiError> {
        let slot = self.slot(id)?;
        let mut rec = match tokio::time::timeout(INSPECT_LOCK_WAIT, slot.lock()).await {
            Ok(rec) => rec,
            Err(_) => return self.inspect_saved(id),
        };
        if reconcile(&mut rec) {
            self.save(&rec)?;
        }
        Ok(SandboxInfo {
            r#ref: rec.r#ref.clone(),
            state: rec.state,
            revision: rec.revision,
            attached_clients: rec.attached_clients,
            generation: rec.generation,
        })
    }

    fn inspect_saved(&self, id: &str) -> Result<SandboxInfo, ApiError> {
        let rec = self
            .layout
            .load_sandbox(id)
            .map_err(|e| internal("reading the sandbox", e))?
            .ok_or_else(|| ApiError::not_found("sandbox", id))?;
        let state = match rec.releasing {
            Some(_) => SandboxState::Suspended,
            None => rec.state,
        };
        Ok(SandboxInfo {
            r#ref: rec.r#ref,
            state,
            revision: rec.revision,
            attached_clients: rec.attached_clients,
            generation: rec.generation,
        })
    }

    pub async fn attach(&self, id: &str, _req: &AttachRequest) -> Result<SandboxHandle, ApiError> {
        let slot = self.slot(id)?;
        let mut rec = slot.lock().await;
        if reconcile(&mut rec) {
            self.save(&rec)?;
        }
        if rec.state != SandboxState::Ready {
            return Err(ApiError::conflict(
                "sandbox.not_running",
                format!("the sandbox is {}; attach needs a ready sandbox", rec.state),
            ));
        }
        rec.attached_clients = rec.attached_clients.saturating_add(1);
        rec.revision += 1;
        rec.updated_at = Utc::now();
        self.save(&rec)?;
        Ok(self.handle_of(&rec))
    }

    /// Marks a sandbox lost (a terminal fault was reported for it): never reported running.
    pub async fn mark_lost(&self, id: &str) {
        let Ok(slot) = self.slot(id) else { return };
        let mut rec = slot.lock().await;
        if matches!(rec.state, SandboxState::Ready | SandboxState::Suspended) {
            rec.state = SandboxState::Lost;
            rec.revision += 1;
            rec.updated_at = Utc::now();
            let _ = self.save(&rec);
        }
    }
}
