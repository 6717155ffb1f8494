//! The warm restore cache: after a `snapshot_and_terminate` killed its sandbox, the sandbox's
//! folder is moved (one rename) to `ROOT/warm/<checkpoint_id>/tree` with a manifest beside
//! it, within a byte budget, oldest first out. A restore of that checkpoint on this host
//! checks the tree against its manifest by a stat walk and renames it into the new sandbox:
//! no unpack. Anything that does not match drops the tree and the archive is unpacked
//! instead. An entry is used once. A start keeps the entries whose manifest and checkpoint
//! record are there (each is checked again before use) and removes the rest.

mod engine;
pub mod manifest;

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use manifest::{scan, Manifest, ScanError};

/// The default of `--warm-cache-mb`.
pub const DEFAULT_WARM_CACHE_MB: u64 = 4096;

/// A tree is kept only while its file system keeps 1/N of its space free.
const MIN_FREE_SHARE: u64 = 20;

const TREE: &str = "tree";
const MANIFEST: &str = "manifest.json";

/// What the cache did, since the provider started, and what it holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct WarmStats {
    /// Restores that reused a kept tree.
    pub hits: u64,
    /// Restores of a checkpoint with no kept tree.
    pub misses: u64,
    /// Restores whose kept tree did not match its manifest (dropped; the archive was used).
    pub fallbacks: u64,
    /// Trees dropped to stay within the budget.
    pub evictions: u64,
    pub entries: usize,
    pub bytes: u64,
    pub budget_bytes: u64,
}

/// What a restore found in the cache.
#[derive(Debug, PartialEq, Eq)]
pub enum Taken {
    /// The tree is now at the target.
    Hit(Kept),
    Miss,
    /// The tree was dropped, for this reason.
    Fallback(String),
}

/// A tree given back: the fingerprints of its files as they are now, and the uid and gid
/// that own every entry, when one pair does.
#[derive(Debug, PartialEq, Eq)]
pub struct Kept {
    pub files: crate::chunks::WrittenFiles,
    pub owner: Option<(u32, u32)>,
}

#[derive(Default)]
struct Index {
    /// Checkpoint id → (allocated bytes, order kept).
    held: HashMap<String, (u64, u64)>,
    next: u64,
    bytes: u64,
}

pub struct WarmCache {
    dir: PathBuf,
    trash: PathBuf,
    budget: u64,
    index: Mutex<Index>,
    hits: AtomicU64,
    misses: AtomicU64,
    fallbacks: AtomicU64,
    evictions: AtomicU64,
}

fn set_private(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
}

/// Whether the file system holding `dir` has less than 1/`MIN_FREE_SHARE` of it free, or cannot
/// say.
fn low_on_disk(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return true;
    };
    // SAFETY: all-zero bytes are a valid `statvfs` (plain integers).
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `st` is a valid place for the call to write.
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return true;
    }
    (st.f_bavail as u64) < (st.f_blocks as u64) / MIN_FREE_SHARE
}

/// Removes `path` off the caller's thread when a runtime is there to do it.
fn remove_in_background(path: PathBuf) {
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            rt.spawn_blocking(move || {
                let _ = std::fs::remove_dir_all(path);
            });
        }
        Err(_) => {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

impl WarmCache {
    /// The cache under `root/warm`, rebuilt from what a previous run kept: an entry stays
    /// only if its checkpoint is `known`, its manifest reads and its tree is there.
    pub fn open(
        root: &Path,
        trash: PathBuf,
        budget: u64,
        known: impl Fn(&str) -> bool,
    ) -> io::Result<Self> {
        let dir = root.join("warm");
        std::fs::create_dir_all(&dir)?;
        set_private(&dir)?;
        let cache = WarmCache {
            dir,
            trash,
            budget,
            index: Mutex::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        };
        let mut found = Vec::new();
        for e in std::fs::read_dir(&cache.dir)?.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let kept = (budget > 0 && known(&name) && e.path().join(TREE).is_dir())
                .then(|| cache.read_manifest(&name))
                .flatten()
                .filter(|m| m.checkpoint_id == name);
            match kept {
                Some(m) => found.push((m.kept_at_ms, name, m.bytes)),
                None => {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        found.sort();
        for (_, id, bytes) in found {
            cache.insert(&id, bytes);
        }
        Ok(cache)
    }

    pub fn enabled(&self) -> bool {
        self.budget > 0
    }

    fn entry(&self, id: &str) -> PathBuf {
        self.dir.join(id)
    }

    fn read_manifest(&self, id: &str) -> Option<Manifest> {
        crate::state::read_json(&self.entry(id).join(MANIFEST)).ok()
    }

    /// Keeps the killed sandbox's folder `dir` for checkpoint `id`. False: nothing was done
    /// and `dir` is still the caller's to discard.
    pub fn keep(&self, id: &str, digest: Option<&str>, dir: &Path) -> bool {
        if !self.enabled() {
            return false;
        }
        if low_on_disk(&self.dir) {
            tracing::info!(checkpoint_id = %id, "warm cache: the sandbox's files are not kept, the disk is nearly full");
            return false;
        }
        let entry = self.entry(id);
        if std::fs::create_dir(&entry)
            .and_then(|()| set_private(&entry))
            .is_err()
        {
            return false;
        }
        let tree = entry.join(TREE);
        if std::fs::rename(dir, &tree).is_err() {
            let _ = std::fs::remove_dir(&entry);
            return false;
        }
        // A checkpoint keeps whole seconds: a warm restore gives back what an unpack would.
        whole_second_mtimes(&tree);
        let scanned = match scan(&tree) {
            Ok(s) if s.bytes <= self.budget => s,
            Ok(_) => return self.discard_entry(id, "larger than the whole budget"),
            Err(e) => return self.discard_entry(id, &e.to_string()),
        };
        let manifest = Manifest {
            checkpoint_id: id.to_owned(),
            digest: digest.map(str::to_owned),
            bytes: scanned.bytes,
            kept_at_ms: chrono::Utc::now().timestamp_millis(),
            entries: scanned.entries,
        };
        if let Err(e) = crate::state::write_json(&entry.join(MANIFEST), &manifest) {
            return self.discard_entry(id, &format!("writing the manifest: {e}"));
        }
        self.insert(id, manifest.bytes);
        true
    }

    fn insert(&self, id: &str, bytes: u64) {
        let evicted = {
            let mut ix = self.index.lock().unwrap_or_else(|e| e.into_inner());
            let seq = ix.next;
            ix.next += 1;
            ix.bytes = ix.bytes.saturating_add(bytes);
            if let Some((old, _)) = ix.held.insert(id.to_owned(), (bytes, seq)) {
                ix.bytes = ix.bytes.saturating_sub(old);
            }
            let mut evicted = Vec::new();
            while ix.bytes > self.budget {
                let Some(oldest) = ix
                    .held
                    .iter()
                    .min_by_key(|(_, (_, seq))| *seq)
                    .map(|(k, _)| k.clone())
                else {
                    break;
                };
                if let Some((b, _)) = ix.held.remove(&oldest) {
                    ix.bytes = ix.bytes.saturating_sub(b);
                }
                evicted.push(oldest);
            }
            evicted
        };
        for id in evicted {
            let n = self.evictions.fetch_add(1, Relaxed) + 1;
            tracing::info!(checkpoint_id = %id, evictions = n, "warm cache: evicted the oldest tree to stay within the budget");
            self.discard(&id);
        }
    }

    /// Takes checkpoint `id`'s tree to `target` (which must not exist) if it still matches
    /// its manifest and `digest`; a tree that does not is dropped.
    pub fn take(&self, id: &str, digest: Option<&str>, target: &Path) -> Taken {
        let held = {
            let mut ix = self.index.lock().unwrap_or_else(|e| e.into_inner());
            let held = ix.held.remove(id);
            if let Some((b, _)) = held {
                ix.bytes = ix.bytes.saturating_sub(b);
            }
            held
        };
        if held.is_none() {
            let n = self.misses.fetch_add(1, Relaxed) + 1;
            tracing::info!(checkpoint_id = %id, misses = n, "warm cache: no kept tree, unpacking the archive");
            return Taken::Miss;
        }
        let tree = self.entry(id).join(TREE);
        let checked = match self.read_manifest(id) {
            None => Err("the manifest is missing or unreadable".to_owned()),
            Some(m) if m.digest.as_deref() != digest => {
                Err("the checkpoint's digest changed".to_owned())
            }
            Some(m) => match scan(&tree) {
                Ok(now) if now.entries == m.entries => std::fs::rename(&tree, target)
                    .map(|()| now)
                    .map_err(|e| format!("moving the tree: {e}")),
                Ok(_) => Err("the tree changed since it was kept".to_owned()),
                Err(ScanError::Unfit(w)) => Err(w),
                Err(ScanError::Io(e)) => Err(format!("walking the tree: {e}")),
            },
        };
        match checked {
            Ok(now) => {
                let _ = std::fs::remove_dir_all(self.entry(id));
                let n = self.hits.fetch_add(1, Relaxed) + 1;
                tracing::info!(checkpoint_id = %id, hits = n, "warm cache: restored from the kept tree");
                Taken::Hit(Kept {
                    files: now.fingerprints(),
                    owner: now.owner,
                })
            }
            Err(why) => {
                let n = self.fallbacks.fetch_add(1, Relaxed) + 1;
                tracing::info!(checkpoint_id = %id, fallbacks = n, %why, "warm cache: the kept tree does not match, unpacking the archive");
                self.discard(id);
                Taken::Fallback(why)
            }
        }
    }

    /// Drops checkpoint `id`'s tree, if one is kept.
    pub fn forget(&self, id: &str) {
        {
            let mut ix = self.index.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((b, _)) = ix.held.remove(id) {
                ix.bytes = ix.bytes.saturating_sub(b);
            }
        }
        if self.entry(id).exists() {
            self.discard(id);
        }
    }

    fn discard_entry(&self, id: &str, why: &str) -> bool {
        tracing::info!(checkpoint_id = %id, %why, "warm cache: the sandbox's files are not kept");
        self.discard(id);
        true
    }

    /// Moves the entry out of the way at once and deletes it in the background.
    fn discard(&self, id: &str) {
        let entry = self.entry(id);
        let trash = self
            .trash
            .join(format!("warm-{id}-{}", uuid::Uuid::now_v7().simple()));
        let target = match std::fs::rename(&entry, &trash) {
            Ok(()) => trash,
            Err(_) => entry,
        };
        remove_in_background(target);
    }

    pub fn stats(&self) -> WarmStats {
        let ix = self.index.lock().unwrap_or_else(|e| e.into_inner());
        WarmStats {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            fallbacks: self.fallbacks.load(Relaxed),
            evictions: self.evictions.load(Relaxed),
            entries: ix.held.len(),
            bytes: ix.bytes,
            budget_bytes: self.budget,
        }
    }
}

#[cfg(test)]
mod tests;

/// Drops the sub-second part of every mtime under `tree` (not following links). The tree is
/// the provider's alone by now: every process of its sandbox is dead.
fn whole_second_mtimes(tree: &Path) {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let mut stack = vec![(tree.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() && depth < crate::paths::MAX_DEPTH {
                stack.push((path.clone(), depth + 1));
            }
            if meta.file_type().is_symlink() || meta.mtime_nsec() == 0 {
                continue;
            }
            let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
                continue;
            };
            let times = [
                libc::timespec {
                    tv_sec: 0,
                    tv_nsec: libc::UTIME_OMIT,
                },
                libc::timespec {
                    tv_sec: meta.mtime(),
                    tv_nsec: 0,
                },
            ];
            // SAFETY: `c` is a valid NUL-terminated path and `times` holds two timespecs.
            unsafe {
                libc::utimensat(
                    libc::AT_FDCWD,
                    c.as_ptr(),
                    times.as_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            };
        }
    }
}
