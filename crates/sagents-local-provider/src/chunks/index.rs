//! What a sandbox's files were when the provider last knew their content: per regular file,
//! the stat fingerprint as of the restore that wrote it, against the checkpoint it came
//! from. A snapshot reuses the recorded hash of a file whose fingerprint is unchanged
//! without reading it; ctime moves on any change (content, mode, owner, a reset mtime), so
//! an equal fingerprint means untouched.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

impl Fingerprint {
    pub fn of(m: &std::fs::Metadata) -> Self {
        Fingerprint {
            ino: m.ino(),
            size: m.size(),
            mtime_ns: m
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(m.mtime_nsec()),
            ctime_ns: m
                .ctime()
                .saturating_mul(1_000_000_000)
                .saturating_add(m.ctime_nsec()),
        }
    }

    /// Everything but the ctime, which a later chown moves.
    fn same_file(&self, other: &Fingerprint) -> bool {
        (self.ino, self.size, self.mtime_ns) == (other.ino, other.size, other.mtime_ns)
    }
}

/// The fingerprints of a sandbox's files against the checkpoint they were restored from.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Index {
    pub base: String,
    /// Escaped path (as in a manifest) → fingerprint.
    pub files: Vec<(String, Fingerprint)>,
}

pub fn key(path: &OsString) -> String {
    let mut s = String::with_capacity(path.len());
    super::manifest::escape(path.as_bytes(), &mut s);
    s
}

impl Index {
    pub fn by_path(&self) -> HashMap<&str, Fingerprint> {
        self.files.iter().map(|(p, f)| (p.as_str(), *f)).collect()
    }

    /// `written` as it is: the fingerprints of the files as they are now.
    pub fn exact(base: &str, written: Vec<(OsString, Fingerprint)>) -> Self {
        Index {
            base: base.to_owned(),
            files: written.into_iter().map(|(p, f)| (key(&p), f)).collect(),
        }
    }

    /// The fingerprints of `written` (as a restore wrote them) taken again now, after the
    /// sandbox's files were handed to its user: a file is kept only if it is still the very
    /// file written (inode, size and mtime), so its ctime is that of the hand-over.
    pub fn settle(base: &str, dir: &Path, written: Vec<(OsString, Fingerprint)>) -> Self {
        let files = written
            .into_iter()
            .filter_map(|(path, was)| {
                let now = Fingerprint::of(&std::fs::symlink_metadata(dir.join(&path)).ok()?);
                was.same_file(&now).then(|| (key(&path), now))
            })
            .collect();
        Index {
            base: base.to_owned(),
            files,
        }
    }
}
