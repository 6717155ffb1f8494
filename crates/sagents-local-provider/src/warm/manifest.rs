//! What a kept tree held when it was kept: every entry's relative path, type, mode, size,
//! symlink target and the stat fields any change moves (inode, mtime, ctime; a sandbox
//! process cannot set ctime). A tree is compared by walking it again, by descriptor and
//! following no symlink, and comparing the two lists.

use std::ffi::{CString, OsStr};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::paths::{open_dir_at, read_names, too_deep, OpenDir, MAX_DEPTH};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Dir,
    File,
    Symlink,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Relative to the tree, `/`-separated; empty for the tree's own folder.
    pub path: String,
    pub kind: Kind,
    pub mode: u32,
    pub size: u64,
    pub ino: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub checkpoint_id: String,
    /// The digest of the checkpoint's archive the tree stands for.
    pub digest: Option<String>,
    /// Allocated bytes, counted as `disk_usage` does.
    pub bytes: u64,
    pub kept_at_ms: i64,
    pub entries: Vec<Entry>,
}

/// A walked tree: its entries in walk order (names sorted), its allocated bytes, and the
/// uid and gid every entry has, when they all have the same.
#[derive(Debug)]
pub struct Scan {
    pub entries: Vec<Entry>,
    pub bytes: u64,
    pub owner: Option<(u32, u32)>,
}

impl Scan {
    fn count(&mut self, st: &libc::stat) {
        self.bytes = self.bytes.saturating_add(blocks(st));
        if self.owner != Some((st.st_uid, st.st_gid)) {
            self.owner = None;
        }
    }

    /// The regular files' fingerprints, by path relative to the tree.
    pub fn fingerprints(&self) -> crate::chunks::WrittenFiles {
        self.entries
            .iter()
            .filter(|e| e.kind == Kind::File)
            .map(|e| {
                let fp = crate::chunks::index::Fingerprint {
                    ino: e.ino,
                    size: e.size,
                    mtime_ns: e.mtime_ns,
                    ctime_ns: e.ctime_ns,
                };
                (e.path.clone().into(), fp)
            })
            .collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// The tree holds what an archive restore would not give back the same way.
    #[error("not kept: {0}")]
    Unfit(String),
    #[error(transparent)]
    Io(#[from] io::Error),
}

fn stat_of(rc: libc::c_int, st: MaybeUninit<libc::stat>) -> io::Result<libc::stat> {
    match rc {
        // SAFETY: a successful stat call filled the whole struct.
        0 => Ok(unsafe { st.assume_init() }),
        _ => Err(io::Error::last_os_error()),
    }
}

fn stat_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<libc::stat> {
    let c = CString::new(name.as_bytes()).map_err(io::Error::other)?;
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: a valid NUL-terminated name and a buffer the size of `stat`.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    stat_of(rc, st)
}

fn stat_fd(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: an open descriptor and a buffer the size of `stat`.
    let rc = unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) };
    stat_of(rc, st)
}

fn read_link_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Vec<u8>> {
    let c = CString::new(name.as_bytes()).map_err(io::Error::other)?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: a valid name; `buf` is valid for writes of its length.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            c.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

fn ns(sec: i64, nsec: i64) -> i64 {
    sec.saturating_mul(1_000_000_000).saturating_add(nsec)
}

fn utf8(bytes: &[u8], what: &str) -> Result<String, ScanError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| ScanError::Unfit(format!("{what} is not UTF-8")))
}

/// The entry for `st`, or why the tree is not kept: only folders, regular files with one
/// name and symlinks, without set-id bits, come back from an archive as they are.
fn entry(path: String, st: &libc::stat, target: Option<String>) -> Result<Entry, ScanError> {
    let mode = st.st_mode & 0o7777;
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR if mode & 0o6000 == 0 => Kind::Dir,
        libc::S_IFREG if mode & 0o7000 == 0 && st.st_nlink == 1 => Kind::File,
        libc::S_IFLNK => Kind::Symlink,
        _ => {
            return Err(ScanError::Unfit(format!(
                "`{path}` has no exact archive form"
            )))
        }
    };
    // A checkpoint keeps no time before 1970: an unpack would give such a file another.
    if st.st_mtime < 0 && kind != Kind::Symlink {
        return Err(ScanError::Unfit(format!("`{path}` has a time before 1970")));
    }
    Ok(Entry {
        path,
        kind,
        mode,
        size: u64::try_from(st.st_size).unwrap_or(0),
        ino: st.st_ino,
        mtime_ns: ns(st.st_mtime, st.st_mtime_nsec),
        ctime_ns: ns(st.st_ctime, st.st_ctime_nsec),
        target,
    })
}

fn blocks(st: &libc::stat) -> u64 {
    u64::try_from(st.st_blocks).unwrap_or(0).saturating_mul(512)
}

/// Walks the tree at `dir`: the folder itself first, then every entry below it.
pub fn scan(dir: &Path) -> Result<Scan, ScanError> {
    let root = OpenDir::open(dir)?;
    let st = stat_fd(root.fd.as_fd())?;
    let mut out = Scan {
        entries: vec![entry(String::new(), &st, None)?],
        bytes: blocks(&st),
        owner: Some((st.st_uid, st.st_gid)),
    };
    scan_at(root.fd.as_fd(), "", 0, &mut out)?;
    Ok(out)
}

fn scan_at(
    dir: BorrowedFd<'_>,
    prefix: &str,
    depth: usize,
    out: &mut Scan,
) -> Result<(), ScanError> {
    if depth > MAX_DEPTH {
        return Err(too_deep().into());
    }
    let mut names = read_names(dir)?;
    names.sort();
    for name in names {
        let shown = utf8(name.as_bytes(), "a name")?;
        let path = match prefix {
            "" => shown,
            p => format!("{p}/{shown}"),
        };
        let st = stat_at(dir, &name)?;
        out.count(&st);
        let target = match st.st_mode & libc::S_IFMT {
            libc::S_IFLNK => Some(utf8(&read_link_at(dir, &name)?, "a symlink's target")?),
            _ => None,
        };
        let e = entry(path, &st, target)?;
        let sub = (e.kind == Kind::Dir).then(|| e.path.clone());
        out.entries.push(e);
        if let Some(sub_path) = sub {
            let fd = open_dir_at(dir, &name)?;
            if stat_fd(fd.as_fd())?.st_ino != st.st_ino {
                return Err(ScanError::Unfit(format!(
                    "`{sub_path}` changed while walked"
                )));
            }
            scan_at(fd.as_fd(), &sub_path, depth + 1, out)?;
        }
    }
    Ok(())
}
