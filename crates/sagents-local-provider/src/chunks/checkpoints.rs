//! A checkpoint's files over the provider's layout: taken (against the fingerprints its
//! sandbox's restore recorded), brought back (a manifest, or an archive of the previous
//! format), deleted (freeing the blobs nothing else names), and cleaned at start.

use std::collections::HashSet;
use std::io;
use std::path::Path;

use super::index::{Fingerprint, Index};
use super::{blobs_named_by, Base, Hash, Written};
use crate::archive::UnpackError;
use crate::state::{CheckpointFormat, Layout, StoredCheckpoint};

/// Writes checkpoint `checkpoint_id` of the files of sandbox `sandbox_id` in `dir`.
pub fn take(
    layout: &Layout,
    dir: &Path,
    checkpoint_id: &str,
    sandbox_id: &str,
) -> io::Result<Written> {
    let base = layout.load_index(sandbox_id).map(|index| Base {
        manifest: layout.manifest(&index.base),
        index,
    });
    super::write(&layout.blobs, dir, &layout.manifest(checkpoint_id), base)
}

/// Restores `stored` into `dir`; the files written with their fingerprints (none for an
/// archive).
pub fn bring_back(
    layout: &Layout,
    stored: &StoredCheckpoint,
    dir: &Path,
) -> Result<Vec<(std::ffi::OsString, Fingerprint)>, UnpackError> {
    let digest = stored.checkpoint.digest.as_deref();
    let data = layout.checkpoint_data(stored);
    match stored.format {
        CheckpointFormat::Archive => crate::archive::unpack(&data, dir, digest).map(|()| vec![]),
        CheckpointFormat::Manifest => super::restore(&layout.blobs, &data, dir, digest),
    }
}

/// Records the fingerprints of what a restore of `checkpoint_id` wrote for `sandbox_id`.
/// `exact`: they are those of the files as they are now (nothing was handed over since they
/// were taken), so none is taken again.
pub fn remember(
    layout: &Layout,
    sandbox_id: &str,
    checkpoint_id: &str,
    dir: &Path,
    written: Vec<(std::ffi::OsString, Fingerprint)>,
    exact: bool,
) {
    if written.is_empty() {
        return;
    }
    let index = match exact {
        true => Index::exact(checkpoint_id, written),
        false => Index::settle(checkpoint_id, dir, written),
    };
    if let Err(e) = layout.save_index(sandbox_id, &index) {
        tracing::warn!(%sandbox_id, error = %e, "the restored files' fingerprints were not saved; the next snapshot reads every file");
    }
}

/// Every blob a manifest in the layout names.
/// Every blob a manifest names. A manifest that cannot be read (damaged, or of a format this
/// build does not know) fails it: no blob is swept rather than one it may need.
fn referenced(layout: &Layout) -> io::Result<HashSet<Hash>> {
    let mut keep = HashSet::new();
    for path in manifests(layout)? {
        let bytes = match super::read_manifest(&path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            other => other?,
        };
        let entries = super::manifest::decode(&bytes).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} cannot be read", path.display()),
            )
        })?;
        keep.extend(super::manifest::blobs_of(&entries));
    }
    Ok(keep)
}

/// Sweeps `candidates` that no manifest names; with a manifest that cannot be read, none.
fn sweep_unreferenced(layout: &Layout, candidates: &[Hash]) -> io::Result<()> {
    match referenced(layout) {
        Ok(keep) => layout.blobs.sweep(candidates, &keep).map(|_| ()),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            tracing::warn!(error = %e, "no blob is swept while a manifest cannot be read");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

fn manifests(layout: &Layout) -> io::Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(layout.archives())? {
        let path = e?.path();
        if path.extension().is_some_and(|x| x == "manifest") {
            out.push(path);
        }
    }
    Ok(out)
}

/// Removes checkpoint `id` (its archive or manifest, then its record), then every blob its
/// manifest named that no remaining manifest names; whether anything was there.
pub fn delete(layout: &Layout, id: &str) -> io::Result<bool> {
    let _exclusive = layout.blobs.exclusive();
    let named = match blobs_named_by(&layout.manifest(id)) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => HashSet::new(),
        other => other?,
    };
    let deleted = layout.remove_checkpoint(id)?;
    if !named.is_empty() {
        let candidates: Vec<Hash> = named.into_iter().collect();
        sweep_unreferenced(layout, &candidates)?;
    }
    Ok(deleted)
}

/// At start, nothing else running: removes half-written blobs, a manifest no record names
/// (its snapshot never recorded it), and every blob no manifest names (left by a crash).
pub fn clean(layout: &Layout) -> io::Result<()> {
    layout.blobs.clear_tmp()?;
    for path in manifests(layout)? {
        let recorded = match path.file_stem().and_then(|s| s.to_str()) {
            Some(id) => layout.load_checkpoint(id).map_or(true, |c| c.is_some()),
            None => false,
        };
        if !recorded {
            crate::state::remove_if_present(&path)?;
        }
    }
    sweep_unreferenced(layout, &layout.blobs.all()?)
}
