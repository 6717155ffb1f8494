//! What the provider remembers across its own restarts: one JSON file per sandbox (its
//! receipts included), per checkpoint, per provision/restore idempotency key and per
//! creation under way, each written atomically (temporary file, fsync, rename). A terminated
//! sandbox's file lives apart (`state/terminated`), so a start reads only the others.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::chunks::index::Index;
use super::chunks::Blobs;
use super::process::Leader;
use sagents_plugin_api::spec::{ReleaseDisposition, Resources, WorkspaceMode};
use sagents_plugin_api::wire::{
    CheckpointRef, InventoryLabels, ProviderError, SandboxHandle, SandboxRef,
    SandboxReleaseReceipt, SandboxState,
};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredRelease {
    pub disposition: ReleaseDisposition,
    pub receipt: SandboxReleaseReceipt,
}

/// A terminal release failure, answered again for its key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredFailure {
    pub disposition: ReleaseDisposition,
    pub error: ProviderError,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxRecord {
    pub r#ref: SandboxRef,
    pub state: SandboxState,
    pub revision: u64,
    pub generation: u64,
    pub attached_clients: u32,
    pub workspace_mode: WorkspaceMode,
    pub dir: PathBuf,
    pub resources: Resources,
    pub leader: Option<Leader>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Release outcomes by idempotency key.
    pub releases: BTreeMap<String, StoredRelease>,
    /// Terminal release failures by idempotency key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed_releases: BTreeMap<String, StoredFailure>,
    /// The key of a snapshot release under way, saved with the freeze: a restart that finds
    /// its checkpoint recorded and its processes gone finishes it under that key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub releasing: Option<String>,
    /// Set when the provider dropped the sandbox's state; such a record is never saved again.
    #[serde(skip)]
    pub forgotten: bool,
}

impl SandboxRecord {
    /// Whether a receipt names a checkpoint whose sandbox is still to be killed (the kill
    /// after the archive failed): the sandbox stays frozen until a retry kills it.
    pub fn awaits_kill(&self) -> bool {
        self.state != SandboxState::Terminated
            && self
                .releases
                .values()
                .any(|s| !s.receipt.compute_released && s.receipt.checkpoint.is_some())
    }
}

/// A checkpoint as kept: the wire form plus the labels of the sandbox it was taken from
/// (absent in records written before labels were kept).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredCheckpoint {
    #[serde(flatten)]
    pub checkpoint: CheckpointRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<InventoryLabels>,
    /// How its files are kept; records written before manifests are archives.
    #[serde(default)]
    pub format: CheckpointFormat,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointFormat {
    /// `checkpoints/<id>.tar.zst`, its digest that of the file.
    #[default]
    Archive,
    /// `checkpoints/<id>.manifest` over the shared blobs, its digest that of the manifest.
    Manifest,
}

/// The first answer to a provision or restore, replayed for the same key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredRequest {
    pub fingerprint: String,
    pub handle: SandboxHandle,
}

/// A provision or restore under way: the sandbox its key creates, recorded before anything
/// of the sandbox exists and removed once the answer is recorded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateIntent {
    pub scope: String,
    pub key: String,
    pub fingerprint: String,
    pub sandbox_id: String,
    pub workspace_mode: WorkspaceMode,
    pub dir: PathBuf,
    /// Set once whatever an interrupted attempt left behind has been removed.
    #[serde(default)]
    pub undone: bool,
}

#[derive(Debug, Clone)]
pub struct Layout {
    pub root: PathBuf,
    pub blobs: Blobs,
}

impl Layout {
    pub fn new(root: &Path) -> io::Result<Self> {
        let layout = Layout {
            root: root.to_path_buf(),
            blobs: Blobs::new(root.join("blobs"))?,
        };
        for d in [
            layout.sandbox_states(),
            layout.terminated_states(),
            layout.checkpoint_states(),
            layout.requests(),
            layout.intents(),
            layout.archives(),
            layout.indexes(),
            layout.sandbox_dirs(),
            layout.trash(),
        ] {
            fs::create_dir_all(d)?;
        }
        // Only the provider reads its state and archives; a sandbox's own user may pass
        // through ROOT and `sandboxes` to its folder, but list neither.
        for (d, mode) in [
            (layout.root.clone(), 0o711),
            (layout.sandbox_dirs(), 0o711),
            (layout.root.join("state"), 0o700),
            (layout.sandbox_states(), 0o700),
            (layout.terminated_states(), 0o700),
            (layout.checkpoint_states(), 0o700),
            (layout.requests(), 0o700),
            (layout.intents(), 0o700),
            (layout.archives(), 0o700),
            (layout.indexes(), 0o700),
            (layout.blobs.dir().to_path_buf(), 0o700),
            (layout.trash(), 0o700),
        ] {
            set_mode(&d, mode)?;
        }
        Ok(layout)
    }

    fn sandbox_states(&self) -> PathBuf {
        self.root.join("state/sandboxes")
    }
    fn terminated_states(&self) -> PathBuf {
        self.root.join("state/terminated")
    }
    fn checkpoint_states(&self) -> PathBuf {
        self.root.join("state/checkpoints")
    }
    fn requests(&self) -> PathBuf {
        self.root.join("state/requests")
    }
    fn intents(&self) -> PathBuf {
        self.root.join("state/intents")
    }
    pub fn archives(&self) -> PathBuf {
        self.root.join("checkpoints")
    }
    fn indexes(&self) -> PathBuf {
        self.root.join("state/indexes")
    }
    pub fn sandbox_dirs(&self) -> PathBuf {
        self.root.join("sandboxes")
    }
    pub fn trash(&self) -> PathBuf {
        self.root.join("trash")
    }
    pub fn grant_secret(&self) -> PathBuf {
        self.root.join("state/grant-secret")
    }

    pub fn archive(&self, checkpoint_id: &str) -> PathBuf {
        self.archives().join(format!("{checkpoint_id}.tar.zst"))
    }

    pub fn manifest(&self, checkpoint_id: &str) -> PathBuf {
        self.archives().join(format!("{checkpoint_id}.manifest"))
    }

    /// Where a checkpoint's files are kept, by its format.
    pub fn checkpoint_data(&self, c: &StoredCheckpoint) -> PathBuf {
        match c.format {
            CheckpointFormat::Archive => self.archive(&c.checkpoint.checkpoint_id),
            CheckpointFormat::Manifest => self.manifest(&c.checkpoint.checkpoint_id),
        }
    }

    fn index(&self, sandbox_id: &str) -> PathBuf {
        self.indexes().join(format!("{sandbox_id}.json"))
    }

    pub fn save_index(&self, sandbox_id: &str, index: &Index) -> io::Result<()> {
        let bytes = serde_json::to_vec(index).map_err(io::Error::other)?;
        let path = self.index(sandbox_id);
        let tmp = path.with_extension("tmp");
        private_file(&tmp)?.write_all(&bytes)?;
        fs::rename(&tmp, path)
    }

    /// The fingerprints a restore recorded for the sandbox; none if unreadable.
    pub fn load_index(&self, sandbox_id: &str) -> Option<Index> {
        read_json_if_present(&self.index(sandbox_id)).ok().flatten()
    }

    fn sandbox_state(&self, sandbox_id: &str) -> PathBuf {
        self.sandbox_states().join(format!("{sandbox_id}.json"))
    }

    fn terminated_state(&self, sandbox_id: &str) -> PathBuf {
        self.terminated_states().join(format!("{sandbox_id}.json"))
    }

    /// A terminated sandbox never runs again, so its file moves for good.
    pub fn save_sandbox(&self, rec: &SandboxRecord) -> io::Result<()> {
        let id = &rec.r#ref.sandbox_id;
        if rec.state != SandboxState::Terminated {
            return write_json(&self.sandbox_state(id), rec);
        }
        write_json(&self.terminated_state(id), rec)?;
        remove_if_present(&self.index(id))?;
        remove_if_present(&self.sandbox_state(id)).map(drop)
    }

    pub fn load_sandbox(&self, sandbox_id: &str) -> io::Result<Option<SandboxRecord>> {
        match read_json_if_present(&self.terminated_state(sandbox_id))? {
            Some(rec) => Ok(Some(rec)),
            None => read_json_if_present(&self.sandbox_state(sandbox_id)),
        }
    }

    /// The ids of the terminated sandboxes, without reading their files.
    pub fn terminated_ids(&self) -> io::Result<Vec<String>> {
        json_stems(&self.terminated_states())
    }

    /// The sandboxes that are not terminated. A file left behind by a termination is dropped,
    /// and a terminated sandbox recorded by an older provider is moved apart.
    pub fn load_sandboxes(&self) -> io::Result<Vec<SandboxRecord>> {
        let mut out = Vec::new();
        for id in json_stems(&self.sandbox_states())? {
            if self.terminated_state(&id).exists() {
                remove_if_present(&self.sandbox_state(&id))?;
                continue;
            }
            let rec: SandboxRecord = read_json(&self.sandbox_state(&id))?;
            if rec.state == SandboxState::Terminated {
                self.save_sandbox(&rec)?;
            } else {
                out.push(rec);
            }
        }
        Ok(out)
    }

    pub fn save_checkpoint(&self, c: &StoredCheckpoint) -> io::Result<()> {
        write_json(&self.checkpoint_state(&c.checkpoint.checkpoint_id), c)
    }

    fn checkpoint_state(&self, checkpoint_id: &str) -> PathBuf {
        self.checkpoint_states()
            .join(format!("{checkpoint_id}.json"))
    }

    pub fn load_checkpoint(&self, checkpoint_id: &str) -> io::Result<Option<StoredCheckpoint>> {
        read_json_if_present(&self.checkpoint_state(checkpoint_id))
    }

    /// The ids of every recorded checkpoint, sorted.
    pub fn checkpoint_ids(&self) -> io::Result<Vec<String>> {
        let mut ids = json_stems(&self.checkpoint_states())?;
        ids.sort_unstable();
        Ok(ids)
    }

    /// Removes what an interrupted snapshot left: archives and manifests half-written
    /// (`.partial`), a manifest never recorded, blobs no manifest names.
    pub fn remove_partial_archives(&self) -> io::Result<()> {
        for entry in fs::read_dir(self.archives())? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "partial") {
                remove_if_present(&path)?;
            }
        }
        super::chunks::checkpoints::clean(self)
    }

    /// Removes a checkpoint's archive or manifest, then its record; whether any was there.
    pub fn remove_checkpoint(&self, checkpoint_id: &str) -> io::Result<bool> {
        let archive = remove_if_present(&self.archive(checkpoint_id))?;
        let manifest = remove_if_present(&self.manifest(checkpoint_id))?;
        let record = remove_if_present(&self.checkpoint_state(checkpoint_id))?;
        Ok(archive || manifest || record)
    }

    pub fn remove_sandbox(&self, sandbox_id: &str) -> io::Result<bool> {
        let live = remove_if_present(&self.sandbox_state(sandbox_id))?;
        Ok(remove_if_present(&self.terminated_state(sandbox_id))? || live)
    }

    /// Drops the provision and restore records that answered with this sandbox, so a replay
    /// of their keys no longer names it.
    pub fn remove_requests_for(&self, sandbox_id: &str) -> io::Result<()> {
        for entry in fs::read_dir(self.requests())? {
            let path = entry?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let stored: Option<StoredRequest> = read_json_if_present(&path)?;
            if stored.is_some_and(|s| s.handle.r#ref.sandbox_id == sandbox_id) {
                remove_if_present(&path)?;
            }
        }
        Ok(())
    }

    fn request_path(&self, scope: &str, key: &str) -> PathBuf {
        self.requests().join(key_file(scope, key))
    }

    fn intent_path(&self, scope: &str, key: &str) -> PathBuf {
        self.intents().join(key_file(scope, key))
    }

    pub fn save_intent(&self, intent: &CreateIntent) -> io::Result<()> {
        write_json(&self.intent_path(&intent.scope, &intent.key), intent)
    }

    pub fn load_intent(&self, scope: &str, key: &str) -> io::Result<Option<CreateIntent>> {
        read_json_if_present(&self.intent_path(scope, key))
    }

    pub fn remove_intent(&self, scope: &str, key: &str) -> io::Result<bool> {
        remove_if_present(&self.intent_path(scope, key))
    }

    pub fn load_intents(&self) -> io::Result<Vec<CreateIntent>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(self.intents())? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "json") {
                out.push(read_json(&path)?);
            }
        }
        Ok(out)
    }

    pub fn load_request(&self, scope: &str, key: &str) -> io::Result<Option<StoredRequest>> {
        read_json_if_present(&self.request_path(scope, key))
    }

    pub fn save_request(&self, scope: &str, key: &str, req: &StoredRequest) -> io::Result<()> {
        write_json(&self.request_path(scope, key), req)
    }
}

/// The names of the `.json` files in `dir`, without the extension.
fn json_stems(dir: &Path) -> io::Result<Vec<String>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") {
            if let Some(stem) = path.file_stem().and_then(|s| s.to_str()) {
                out.push(stem.to_owned());
            }
        }
    }
    Ok(out)
}

fn key_file(scope: &str, key: &str) -> String {
    let h = hex::encode(Sha256::digest(format!("{scope}\0{key}").as_bytes()));
    format!("{scope}-{h}.json")
}

/// A stable digest of what a request asks for, to tell a replay from a reused key.
pub fn fingerprint<T: Serialize>(value: &T) -> String {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    hex::encode(Sha256::digest(&bytes))
}

/// A new file only the provider's user may read (0600).
pub fn private_file(path: &Path) -> io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

pub fn write_json<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    let tmp = path.with_extension("tmp");
    {
        let mut f = private_file(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)
}

fn read_json_if_present<T: DeserializeOwned>(path: &Path) -> io::Result<Option<T>> {
    match read_json(path) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

pub fn remove_if_present(path: &Path) -> io::Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

pub fn read_json<T: DeserializeOwned>(path: &Path) -> io::Result<T> {
    let bytes = fs::read(path)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}
