//! Restoring a checkpoint by descriptor: every entry is created relative to its folder's
//! descriptor, reached from the target one component at a time without following a symlink,
//! and new files are made with `O_EXCL`. Refused: absolute paths, `..`, an entry under a
//! symlink or a file, a second entry at a name already written, hard links, devices and
//! fifos. Set-id bits are dropped.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use super::UnpackError;
use crate::paths::{is_not_a_plain_dir, mkdir_at, open_at, open_dir_at, walk_beneath, MAX_DEPTH};

pub(crate) fn refused(path: &Path, why: &str) -> UnpackError {
    let shown: String = path.display().to_string().chars().take(200).collect();
    UnpackError::Unsafe(format!("`{shown}`: {why}"))
}

/// The entry's path as plain names; an absolute path or a `..` is refused.
pub(crate) fn names(path: &Path) -> Result<Vec<&OsStr>, &'static str> {
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => parts.push(n),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return Err("an absolute path"),
            Component::ParentDir => return Err("a `..` component"),
        }
    }
    Ok(parts)
}

fn check(rc: libc::c_int) -> io::Result<()> {
    match rc {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Sets the mode and modification time of the open file `fd`.
pub(crate) fn finish(fd: BorrowedFd<'_>, mode: u32, mtime: u64) -> io::Result<()> {
    // SAFETY: fchmod(2) on an open descriptor.
    check(unsafe { libc::fchmod(fd.as_raw_fd(), mode as libc::mode_t) })?;
    let t = libc::timespec {
        tv_sec: libc::time_t::try_from(mtime).unwrap_or(libc::time_t::MAX),
        tv_nsec: 0,
    };
    // SAFETY: futimens(2) with two valid timespecs.
    check(unsafe { libc::futimens(fd.as_raw_fd(), [t, t].as_ptr()) })
}

pub(crate) fn symlink_at(target: &Path, dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let t = CString::new(target.as_os_str().as_bytes()).map_err(io::Error::other)?;
    let n = CString::new(name.as_bytes()).map_err(io::Error::other)?;
    // SAFETY: both are valid NUL-terminated strings.
    check(unsafe { libc::symlinkat(t.as_ptr(), dir.as_raw_fd(), n.as_ptr()) })
}

/// An error reading the archive itself, as opposed to writing the files.
fn malformed(e: io::Error) -> UnpackError {
    UnpackError::Malformed(e.to_string())
}

fn exists(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::AlreadyExists
}

/// Writes the entries of `ar` beneath the folder `root`.
pub(super) fn extract<R: Read>(
    ar: &mut tar::Archive<R>,
    root: BorrowedFd<'_>,
) -> Result<(), UnpackError> {
    let mut dirs: Vec<(Vec<OsString>, u32, u64)> = Vec::new();
    let mut last: Option<(Vec<OsString>, OwnedFd)> = None;
    for entry in ar.entries().map_err(malformed)? {
        let mut entry = entry.map_err(malformed)?;
        let path = entry.path().map_err(malformed)?.into_owned();
        let kind = entry.header().entry_type();
        if kind.is_pax_global_extensions() {
            continue;
        }
        let parts = names(&path).map_err(|why| refused(&path, why))?;
        if parts.len() > MAX_DEPTH + 1 {
            return Err(refused(&path, "nested deeper than a snapshot goes"));
        }
        let Some((name, parents)) = parts.split_last() else {
            match kind.is_dir() {
                true => continue,
                false => return Err(refused(&path, "an entry without a name")),
            }
        };
        // Entries of one folder come together: its descriptor is kept for the next.
        if last
            .as_ref()
            .is_none_or(|(names, _)| names.as_slice() != parents)
        {
            let fd = walk_beneath(root, parents, true).map_err(|e| match e {
                e if is_not_a_plain_dir(&e) => {
                    refused(&path, "a folder above it is a symlink or a file")
                }
                e => UnpackError::Io(e),
            })?;
            last = Some((parents.iter().map(|p| p.to_os_string()).collect(), fd));
        }
        let Some((_, parent)) = &last else {
            return Err(refused(&path, "its folder could not be opened"));
        };
        let parent = parent.as_fd();
        let header = entry.header();
        let (mode, mtime) = (
            header.mode().map_err(malformed)?,
            header.mtime().map_err(malformed)?,
        );
        if kind.is_dir() {
            match mkdir_at(parent, name, 0o700) {
                Err(e) if exists(&e) => {
                    open_dir_at(parent, name)
                        .map_err(|_| refused(&path, "a folder over another entry"))?;
                }
                other => other?,
            }
            let owned = parts.iter().map(|p| p.to_os_string()).collect();
            dirs.push((owned, mode & 0o1777, mtime));
        } else if kind.is_file() {
            let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
            let mut file = match open_at(parent, name, flags) {
                Err(e) if exists(&e) => return Err(refused(&path, "a file over another entry")),
                other => File::from(other?),
            };
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = entry.read(&mut buf).map_err(malformed)?;
                if n == 0 {
                    break;
                }
                file.write_all(&buf[..n])?;
            }
            finish(file.as_fd(), mode & 0o777, mtime)?;
        } else if kind.is_symlink() {
            let target = entry
                .link_name()
                .map_err(malformed)?
                .ok_or_else(|| refused(&path, "a symlink without a target"))?;
            match symlink_at(&target, parent, name) {
                Err(e) if exists(&e) => return Err(refused(&path, "a symlink over another entry")),
                other => other?,
            }
        } else if kind.is_hard_link() {
            return Err(refused(&path, "a hard link"));
        } else if kind.is_character_special() || kind.is_block_special() || kind.is_fifo() {
            return Err(refused(&path, "a device or fifo"));
        } else {
            return Err(refused(&path, "an entry of an unsupported kind"));
        }
    }
    // Folders get their modes last, so a read-only one could still be filled.
    for (parts, mode, mtime) in dirs.iter().rev() {
        let parts: Vec<&OsStr> = parts.iter().map(OsString::as_os_str).collect();
        let dir = walk_beneath(root, &parts, false)?;
        finish(dir.as_fd(), *mode, *mtime)?;
    }
    Ok(())
}
