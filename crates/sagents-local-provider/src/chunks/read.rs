//! Restoring a checkpoint from its manifest and blobs, with the rules of an archive's
//! extraction: every entry is checked before anything is written (plain names, no `..`,
//! nothing twice, nesting within [`MAX_DEPTH`], a file's or link's folder declared before
//! it), then made by descriptor beneath the target (`O_EXCL`, no symlink followed). Each
//! blob's content is checked against its hash as it is decompressed; blobs are read on two
//! threads.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::index::Fingerprint;
use super::manifest::{self, Entry, Hash, Place};
use super::Blobs;
use crate::archive::extract::{finish, names, refused, symlink_at};
use crate::archive::UnpackError;
use crate::paths::{mkdir_at, open_at, walk_beneath, MAX_DEPTH};

/// Files written, with their fingerprints as written.
pub type WrittenFiles = Vec<(OsString, Fingerprint)>;

enum Job {
    Own(usize),
    Pack(Hash, Vec<usize>),
}

/// Restores the checkpoint whose manifest is `manifest_path` into `dir` (which must exist),
/// checking the manifest against `digest`.
pub fn restore(
    blobs: &Blobs,
    manifest_path: &Path,
    dir: &Path,
    digest: Option<&str>,
) -> Result<WrittenFiles, UnpackError> {
    let canonical = super::read_manifest(manifest_path).map_err(|e| match e.kind() {
        io::ErrorKind::InvalidData => UnpackError::Malformed(e.to_string()),
        _ => UnpackError::Io(e),
    })?;
    if digest.is_some_and(|want| want != manifest::digest(&canonical)) {
        return Err(UnpackError::DigestMismatch);
    }
    let entries = manifest::decode(&canonical)
        .ok_or_else(|| UnpackError::Malformed("the manifest cannot be read".into()))?;
    check(&entries)?;
    let root = crate::paths::OpenDir::open(dir)?;
    let root = root.fd.as_fd();
    for e in &entries {
        if let Entry::Dir { path, .. } = e {
            let (parent, name) = parent_of(root, path)?;
            mkdir_at(parent.as_fd(), name, 0o700)?;
        }
    }
    let mut jobs = Vec::new();
    let mut packs: HashMap<Hash, Vec<usize>> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        match e {
            Entry::File {
                place: Place::Own, ..
            } => jobs.push(Job::Own(i)),
            Entry::File {
                place: Place::Pack(p, _),
                ..
            } => packs.entry(*p).or_default().push(i),
            _ => {}
        }
    }
    jobs.extend(packs.into_iter().map(|(p, members)| Job::Pack(p, members)));
    let next = AtomicUsize::new(0);
    let written = Mutex::new(Vec::new());
    let first_error = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let mut files = Vec::new();
                let done = match job {
                    Job::Own(e) => own(blobs, root, &entries[*e], &mut files),
                    Job::Pack(p, members) => pack(blobs, root, &entries, p, members, &mut files),
                };
                match done {
                    Ok(()) => written
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend(files),
                    Err(e) => {
                        first_error
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(e);
                        next.store(jobs.len(), Ordering::Relaxed);
                        break;
                    }
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    for e in &entries {
        if let Entry::Link { path, target } = e {
            let (parent, name) = parent_of(root, path)?;
            symlink_at(Path::new(target), parent.as_fd(), name)?;
        }
    }
    for e in entries.iter().rev() {
        if let Entry::Dir { path, mode, mtime } = e {
            let parts = names(Path::new(path)).map_err(|why| refused(Path::new(path), why))?;
            let fd = walk_beneath(root, &parts, false)?;
            finish(fd.as_fd(), *mode & 0o1777, *mtime)?;
        }
    }
    Ok(written.into_inner().unwrap_or_else(|e| e.into_inner()))
}

/// Every entry's path is plain, new, not too deep, and under a folder declared before it.
fn check(entries: &[Entry]) -> Result<(), UnpackError> {
    let mut dirs: HashSet<&OsStr> = HashSet::from([OsStr::new("")]);
    let mut taken: HashSet<&OsStr> = HashSet::new();
    for e in entries {
        let path = Path::new(e.path());
        let parts = names(path).map_err(|why| refused(path, why))?;
        if parts.is_empty() {
            return Err(refused(path, "an entry without a name"));
        }
        if parts.len() > MAX_DEPTH + 1 {
            return Err(refused(path, "nested deeper than a snapshot goes"));
        }
        let parent = path.parent().map_or(OsStr::new(""), Path::as_os_str);
        if !dirs.contains(parent) || path.as_os_str().len() != joined_len(&parts) {
            return Err(refused(
                path,
                "its folder is not a folder of the checkpoint",
            ));
        }
        if !taken.insert(path.as_os_str()) {
            return Err(refused(path, "a second entry at one name"));
        }
        if matches!(e, Entry::Dir { .. }) {
            dirs.insert(path.as_os_str());
        }
    }
    Ok(())
}

/// The length of `parts` joined by `/`: a path written any other way (`a//b`, `./a`) is
/// not canonical.
fn joined_len(parts: &[&OsStr]) -> usize {
    parts.iter().map(|p| p.len()).sum::<usize>() + parts.len().saturating_sub(1)
}

fn parent_of<'p>(
    root: BorrowedFd<'_>,
    path: &'p OsStr,
) -> Result<(OwnedFd, &'p OsStr), UnpackError> {
    let p = Path::new(path);
    let parts = names(p).map_err(|why| refused(p, why))?;
    let Some((name, parents)) = parts.split_last() else {
        return Err(refused(p, "an entry without a name"));
    };
    let fd = walk_beneath(root, parents, false).map_err(|e| match e {
        e if crate::paths::is_not_a_plain_dir(&e) => {
            refused(p, "a folder above it is a symlink or a file")
        }
        e => UnpackError::Io(e),
    })?;
    Ok((fd, name))
}

/// Creates the file of `entry` and hands it to `fill`, then sets its mode and mtime.
fn create(
    root: BorrowedFd<'_>,
    entry: &Entry,
    files: &mut WrittenFiles,
    fill: impl FnOnce(&mut File) -> Result<(), UnpackError>,
) -> Result<(), UnpackError> {
    let Entry::File {
        path, mode, mtime, ..
    } = entry
    else {
        return Ok(());
    };
    let (parent, name) = parent_of(root, path)?;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
    let mut file = match open_at(parent.as_fd(), name, flags) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(refused(Path::new(path), "a file over another entry"))
        }
        other => File::from(other?),
    };
    fill(&mut file)?;
    finish(file.as_fd(), mode & 0o777, *mtime)?;
    files.push((path.clone(), Fingerprint::of(&file.metadata()?)));
    Ok(())
}

fn open_blob(blobs: &Blobs, hash: &Hash) -> Result<File, UnpackError> {
    File::open(blobs.path(hash)).map_err(UnpackError::Io)
}

fn own(
    blobs: &Blobs,
    root: BorrowedFd<'_>,
    entry: &Entry,
    files: &mut WrittenFiles,
) -> Result<(), UnpackError> {
    let Entry::File { hash, size, .. } = entry else {
        return Ok(());
    };
    let blob = open_blob(blobs, hash)?;
    create(root, entry, files, |file| {
        let corrupt = |_| UnpackError::DigestMismatch;
        let mut dec = zstd::stream::Decoder::new(blob).map_err(corrupt)?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 256 * 1024];
        let mut total = 0u64;
        loop {
            let n = dec.read(&mut buf).map_err(corrupt)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            file.write_all(&buf[..n])?;
            total += n as u64;
        }
        match (total == *size, <Hash>::from(hasher.finalize()) == *hash) {
            (true, true) => Ok(()),
            _ => Err(UnpackError::DigestMismatch),
        }
    })
}

fn pack(
    blobs: &Blobs,
    root: BorrowedFd<'_>,
    entries: &[Entry],
    name: &Hash,
    members: &[usize],
    files: &mut WrittenFiles,
) -> Result<(), UnpackError> {
    let mut compressed = Vec::new();
    open_blob(blobs, name)?.read_to_end(&mut compressed)?;
    let data =
        zstd::stream::decode_all(&compressed[..]).map_err(|_| UnpackError::DigestMismatch)?;
    for &i in members {
        let entry = &entries[i];
        let Entry::File {
            hash,
            size,
            place: Place::Pack(_, offset),
            ..
        } = entry
        else {
            continue;
        };
        let body = usize::try_from(*offset)
            .ok()
            .zip(usize::try_from(*size).ok())
            .and_then(|(o, n)| data.get(o..o.checked_add(n)?))
            .ok_or(UnpackError::DigestMismatch)?;
        if <Hash>::from(Sha256::digest(body)) != *hash {
            return Err(UnpackError::DigestMismatch);
        }
        create(root, entry, files, |file| Ok(file.write_all(body)?))?;
    }
    Ok(())
}
