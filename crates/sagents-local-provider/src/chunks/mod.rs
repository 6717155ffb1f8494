//! Checkpoints as a manifest plus content-addressed blobs shared by every checkpoint of the
//! host (`blobs/<2 hex>/<64 hex>`, one zstd frame each). A file of [`OWN_BLOB_MIN`] bytes
//! or more is a blob of its own, named by the SHA-256 of its content; smaller ones are
//! packed in walk order into packs of about [`PACK_TARGET`] bytes, each named by the SHA-256
//! of its members' hashes and sizes, so a tree of small files costs a few blob files (few
//! creations and fsyncs, no block wasted per file) rather than one per file.
//!
//! Writes and the sweep exclude each other through the store's lock: a snapshot that finds
//! a blob present (or reuses one of its base checkpoint) holds the lock in shared mode until
//! its manifest is in place; a delete removes the manifest, then, holding it exclusively,
//! every blob no remaining manifest names. A crash may leave unreferenced blobs (swept at
//! the next start), never a manifest without its blobs.

pub mod checkpoints;
pub mod index;
pub mod manifest;
mod read;
pub use read::WrittenFiles;
#[cfg(test)]
mod tests;
mod write;

use std::collections::HashSet;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

pub use manifest::Hash;
pub use read::restore;
pub use write::{write, Base, Written};

/// Files this large or larger are blobs of their own.
pub const OWN_BLOB_MIN: u64 = 256 * 1024;
/// A pack is closed once its members hold this many bytes.
pub const PACK_TARGET: usize = 4 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct Blobs {
    dir: PathBuf,
    lock: Arc<RwLock<()>>,
}

/// The store's lock in shared mode (writers) or exclusive mode (the sweep).
pub type Shared<'a> = std::sync::RwLockReadGuard<'a, ()>;

impl Blobs {
    pub fn new(dir: PathBuf) -> io::Result<Self> {
        fs::create_dir_all(dir.join("tmp"))?;
        Ok(Blobs {
            dir,
            lock: Arc::default(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn shared(&self) -> Shared<'_> {
        self.lock.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn exclusive(&self) -> std::sync::RwLockWriteGuard<'_, ()> {
        self.lock.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn path(&self, hash: &Hash) -> PathBuf {
        let hex = hex::encode(hash);
        self.dir.join(&hex[..2]).join(hex)
    }

    pub fn contains(&self, hash: &Hash) -> bool {
        self.path(hash).exists()
    }

    fn tmp(&self) -> PathBuf {
        self.dir
            .join("tmp")
            .join(format!("{}.partial", uuid::Uuid::new_v4().simple()))
    }

    /// Puts an already compressed blob in place unless one of that name exists; the bytes
    /// written (0 when it existed).
    pub fn put(&self, hash: &Hash, compressed: &[u8]) -> io::Result<u64> {
        if self.contains(hash) {
            return Ok(0);
        }
        let tmp = self.tmp();
        let result = (|| {
            let mut f = crate::state::private_file(&tmp)?;
            f.write_all(compressed)?;
            f.sync_all()?;
            self.place(&tmp, hash)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result.map(|()| compressed.len() as u64)
    }

    /// Compresses `size` bytes of `src` into a blob named by their hash; the hash and the
    /// bytes written (0 when the blob existed).
    pub fn put_stream(&self, src: impl Read, size: u64) -> io::Result<(Hash, u64)> {
        use sha2::{Digest, Sha256};
        let tmp = self.tmp();
        let result = (|| {
            let file = crate::state::private_file(&tmp)?;
            let mut enc = zstd::stream::Encoder::new(
                io::BufWriter::with_capacity(256 * 1024, file),
                crate::archive::ZSTD_LEVEL,
            )?;
            enc.include_checksum(false)?;
            let mut hasher = Sha256::new();
            let mut body = src.take(size).chain(io::repeat(0)).take(size);
            let mut buf = vec![0u8; 256 * 1024];
            loop {
                let n = body.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                enc.write_all(&buf[..n])?;
            }
            let file = enc.finish()?.into_inner().map_err(|e| e.into_error())?;
            let hash: Hash = hasher.finalize().into();
            if self.contains(&hash) {
                return Ok((hash, 0));
            }
            file.sync_all()?;
            let written = file.metadata()?.len();
            self.place(&tmp, &hash)?;
            Ok((hash, written))
        })();
        let _ = fs::remove_file(&tmp);
        result
    }

    fn place(&self, tmp: &Path, hash: &Hash) -> io::Result<()> {
        let path = self.path(hash);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::rename(tmp, path)
    }

    /// Removes what an interrupted write left in `tmp`.
    pub fn clear_tmp(&self) -> io::Result<()> {
        for e in fs::read_dir(self.dir.join("tmp"))? {
            let _ = fs::remove_file(e?.path());
        }
        Ok(())
    }

    /// Every blob in the store.
    pub fn all(&self) -> io::Result<Vec<Hash>> {
        let mut out = Vec::new();
        for prefix in fs::read_dir(&self.dir)? {
            let prefix = prefix?;
            if prefix.file_name().len() != 2 {
                continue;
            }
            for e in fs::read_dir(prefix.path())? {
                let name = e?.file_name();
                if let Some(h) = name.to_str().and_then(manifest::parse_hash) {
                    out.push(h);
                }
            }
        }
        Ok(out)
    }

    /// Removes each of `candidates` that `keep` does not hold; how many were removed.
    /// The caller holds the lock exclusively.
    pub fn sweep(&self, candidates: &[Hash], keep: &HashSet<Hash>) -> io::Result<usize> {
        let mut removed = 0;
        for h in candidates.iter().filter(|h| !keep.contains(*h)) {
            match fs::remove_file(self.path(h)) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(removed)
    }
}

/// Reads a stored manifest: its canonical bytes (decompressed).
pub fn read_manifest(path: &Path) -> io::Result<Vec<u8>> {
    let compressed = fs::read(path)?;
    zstd::stream::decode_all(&compressed[..])
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
}

/// The blobs a stored manifest names; an unreadable one names none.
pub fn blobs_named_by(path: &Path) -> io::Result<HashSet<Hash>> {
    match read_manifest(path) {
        Ok(bytes) => Ok(manifest::decode(&bytes)
            .map(|e| manifest::blobs_of(&e))
            .unwrap_or_default()),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => Ok(HashSet::new()),
        Err(e) => Err(e),
    }
}
