//! The snapshot walk, by descriptor: each entry is opened with `O_PATH | O_NOFOLLOW`
//! relative to its folder's descriptor and classified by `fstat` of that descriptor, so what
//! is archived is exactly what was looked at. A name swapped for a symlink mid-walk is stored
//! as that symlink; the walk never reads through one.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use crate::paths::{open_at, read_names, too_deep, MAX_DEPTH};

/// The entry `name` of `dir` itself, never what it points to.
pub(crate) fn open_node(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<File> {
    open_at(dir, name, libc::O_PATH).map(File::from)
}

/// Opens the very file an `O_PATH` descriptor refers to, for reading.
pub(crate) fn reopen(node: &File, flags: libc::c_int) -> io::Result<OwnedFd> {
    let magic = format!("/proc/self/fd/{}", node.as_raw_fd());
    let c = std::ffi::CString::new(magic).map_err(io::Error::other)?;
    // SAFETY: `c` is a valid NUL-terminated path.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just returned by the kernel, owned by nobody else.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}

/// The target of the symlink an `O_PATH | O_NOFOLLOW` descriptor holds.
pub(crate) fn read_link(node: &File) -> io::Result<PathBuf> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: an empty path with an `O_PATH` symlink descriptor reads that link; `buf` is
    // valid for writes of its length.
    let n = unsafe {
        libc::readlinkat(
            node.as_raw_fd(),
            c"".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(PathBuf::from(std::ffi::OsString::from_vec(buf)))
}

/// Whether a vanished entry (deleted while the walk ran) is simply skipped.
pub(crate) fn vanished(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}

/// Appends every entry below `dir` to `b`, named under `prefix`.
pub(super) fn pack_tree<W: Write>(
    b: &mut tar::Builder<W>,
    dir: BorrowedFd<'_>,
    prefix: &Path,
) -> io::Result<()> {
    pack_at(b, dir, prefix, 0)
}

fn pack_at<W: Write>(
    b: &mut tar::Builder<W>,
    dir: BorrowedFd<'_>,
    prefix: &Path,
    depth: usize,
) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    let mut names = read_names(dir)?;
    names.sort();
    for name in names {
        let rel = prefix.join(&name);
        let node = match open_node(dir, &name) {
            Err(e) if vanished(&e) => continue,
            other => other?,
        };
        let meta = node.metadata()?;
        let kind = meta.file_type();
        let mut header = tar::Header::new_gnu();
        header.set_metadata_in_mode(&meta, tar::HeaderMode::Complete);
        if kind.is_symlink() {
            let target = read_link(&node)?;
            b.append_link(&mut header, &rel, target)?;
        } else if kind.is_dir() {
            let sub = reopen(&node, libc::O_RDONLY | libc::O_DIRECTORY)?;
            header.set_size(0);
            b.append_data(&mut header, &rel, io::empty())?;
            pack_at(b, sub.as_fd(), &rel, depth + 1)?;
        } else if kind.is_file() {
            let file = File::from(reopen(&node, libc::O_RDONLY)?);
            let size = meta.len();
            // The header's size holds even if the file changes while it is read.
            let body = file.take(size).chain(io::repeat(0)).take(size);
            b.append_data(&mut header, &rel, body)?;
        }
        // Devices, fifos and sockets are not archived.
    }
    Ok(())
}

/// The bytes the entries below `dir` take (allocated blocks), following no symlink.
pub(super) fn usage(dir: BorrowedFd<'_>, depth: usize) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    let mut total = 0u64;
    for name in read_names(dir)? {
        let node = match open_node(dir, &name) {
            Err(e) if vanished(&e) => continue,
            other => other?,
        };
        let meta = node.metadata()?;
        total = total.saturating_add(meta.blocks().saturating_mul(512));
        if meta.is_dir() {
            let sub = reopen(&node, libc::O_RDONLY | libc::O_DIRECTORY)?;
            total = total.saturating_add(usage(sub.as_fd(), depth + 1)?);
        }
    }
    Ok(total)
}
