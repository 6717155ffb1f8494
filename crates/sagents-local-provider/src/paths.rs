//! Path rules: an exec `cwd` stays inside its sandbox, an active workspace inside the
//! workspace root. A `cwd` is checked lexically, then after resolving symlinks; a workspace
//! is walked by descriptor, following no symlink, and used by that descriptor from then on.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("`{0}` must not contain `..`")]
    ParentComponent(String),
    #[error("`{0}` must be relative to the sandbox root")]
    Absolute(String),
    #[error("`{0}` resolves outside its root")]
    Escapes(String),
    #[error("`{0}` does not exist or is not a directory")]
    Missing(String),
    #[error("`{0}` is not a usable path")]
    Invalid(String),
}

fn shown(p: &str) -> String {
    p.chars().take(200).collect()
}

fn lexically_safe(p: &str) -> Result<&Path, PathError> {
    if p.is_empty() || p.contains('\0') {
        return Err(PathError::Invalid(shown(p)));
    }
    let path = Path::new(p);
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(PathError::ParentComponent(shown(p)));
    }
    Ok(path)
}

/// Resolves an exec `cwd` (relative, no `..`, no symlink leading out) under `root`.
pub fn resolve_cwd(root: &Path, cwd: Option<&str>) -> Result<PathBuf, PathError> {
    let root = root
        .canonicalize()
        .map_err(|_| PathError::Missing(root.display().to_string()))?;
    let Some(cwd) = cwd else { return Ok(root) };
    let rel = lexically_safe(cwd)?;
    if rel.is_absolute() {
        return Err(PathError::Absolute(shown(cwd)));
    }
    // One answer for "missing" and "leads out": a link to a host path tells nothing of it.
    match root.join(rel).canonicalize() {
        Ok(resolved) if resolved.starts_with(&root) && resolved.is_dir() => Ok(resolved),
        _ => Err(PathError::Missing(shown(cwd))),
    }
}

/// A folder held open: `fd` is what every later step uses, `path` only names it.
#[derive(Debug)]
pub struct OpenDir {
    pub path: PathBuf,
    pub fd: OwnedFd,
}

impl OpenDir {
    /// Opens `path`, refusing a symlink as its last component; the folders above it must
    /// be the provider's own.
    pub fn open(path: &Path) -> io::Result<Self> {
        let c = cstring(path.as_os_str())?;
        // SAFETY: `c` is a valid NUL-terminated path.
        let fd = unsafe { libc::open(c.as_ptr(), DIR_FLAGS) };
        Ok(OpenDir {
            path: path.to_path_buf(),
            fd: owned(fd)?,
        })
    }
}

/// How deep the provider walks a sandbox's folders (snapshot, chown, disk usage): each level
/// holds a descriptor and a stack frame, so a tenant's endless nesting stops here.
pub const MAX_DEPTH: usize = 200;

/// The error for a tree nested deeper than [`MAX_DEPTH`].
pub fn too_deep() -> io::Error {
    io::Error::other(format!("folders nest deeper than {MAX_DEPTH} levels"))
}

const DIR_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just returned by the kernel, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `openat(dir, name, flags)`, never following a symlink in `name` (one component).
pub fn open_at(dir: BorrowedFd<'_>, name: &OsStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = cstring(name)?;
    // SAFETY: `c` is a valid NUL-terminated name; the mode is only read with O_CREAT.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        )
    };
    owned(fd)
}

/// The folder `name` inside `dir`; a symlink or anything but a folder is refused.
pub fn open_dir_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    open_at(dir, name, DIR_FLAGS)
}

/// `mkdirat(dir, name, mode)`.
pub fn mkdir_at(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> io::Result<()> {
    let c = cstring(name)?;
    // SAFETY: `c` is a valid NUL-terminated name.
    match unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), mode as libc::mode_t) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Whether an error says a component was a symlink or not a folder.
pub fn is_not_a_plain_dir(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR))
}

/// Walks `parts` down from `root` one component at a time, following no symlink; with
/// `create`, missing folders are made (mode 0755).
pub fn walk_beneath(root: BorrowedFd<'_>, parts: &[&OsStr], create: bool) -> io::Result<OwnedFd> {
    let mut cur = open_at(root, OsStr::new("."), DIR_FLAGS)?;
    for part in parts {
        let next = match open_dir_at(cur.as_fd(), part) {
            Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
                match mkdir_at(cur.as_fd(), part, 0o755) {
                    Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                    _ => open_dir_at(cur.as_fd(), part)?,
                }
            }
            other => other?,
        };
        cur = next;
    }
    Ok(cur)
}

/// The names in the folder `dir` (without `.` and `..`).
pub fn read_names(dir: BorrowedFd<'_>) -> io::Result<Vec<OsString>> {
    let own = open_at(dir, OsStr::new("."), DIR_FLAGS)?;
    // SAFETY: fdopendir takes over the descriptor, released from `own`.
    let stream = unsafe { libc::fdopendir(own.into_raw_fd()) };
    if stream.is_null() {
        return Err(io::Error::last_os_error());
    }
    let mut names = Vec::new();
    let result = loop {
        // SAFETY: errno is thread-local; zeroing it tells end-of-stream from an error.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: `stream` is a valid open directory stream.
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            let e = io::Error::last_os_error();
            break match e.raw_os_error() {
                Some(0) | None => Ok(()),
                _ => Err(e),
            };
        }
        // SAFETY: readdir returned a valid entry whose name is NUL-terminated.
        let name = unsafe { std::ffi::CStr::from_ptr((*entry).d_name.as_ptr()) };
        let bytes = name.to_bytes();
        if bytes != b"." && bytes != b".." {
            names.push(OsString::from_vec(bytes.to_vec()));
        }
    };
    // SAFETY: `stream` is open and closed once.
    unsafe { libc::closedir(stream) };
    result.map(|()| names)
}

/// An active workspace's `host_workspace` (relative to `workspace_root`, or an absolute
/// path inside it), opened by descriptor: each component below the root is walked without
/// following symlinks and missing folders are created. The root itself is refused.
pub fn resolve_workspace(workspace_root: &Path, host: &str) -> Result<OpenDir, PathError> {
    let root = workspace_root
        .canonicalize()
        .map_err(|_| PathError::Missing(workspace_root.display().to_string()))?;
    let p = lexically_safe(host)?;
    let rel = match p.is_absolute() {
        true => p
            .strip_prefix(&root)
            .map_err(|_| PathError::Escapes(shown(host)))?,
        false => p,
    };
    let parts: Vec<&OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    if parts.is_empty() {
        return Err(PathError::Escapes(shown(host)));
    }
    let root_dir = OpenDir::open(&root).map_err(|_| PathError::Missing(shown(host)))?;
    let fd = walk_beneath(root_dir.fd.as_fd(), &parts, true).map_err(|e| match e {
        e if is_not_a_plain_dir(&e) => PathError::Escapes(shown(host)),
        _ => PathError::Invalid(shown(host)),
    })?;
    let path = parts.iter().fold(root, |acc, part| acc.join(part));
    Ok(OpenDir { path, fd })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwd_must_stay_inside() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("sub")).unwrap();
        std::os::unix::fs::symlink("/tmp", root.path().join("out")).unwrap();
        std::os::unix::fs::symlink("sub", root.path().join("in")).unwrap();
        let canon = root.path().canonicalize().unwrap();
        assert_eq!(resolve_cwd(root.path(), None).unwrap(), canon);
        assert_eq!(
            resolve_cwd(root.path(), Some("sub")).unwrap(),
            canon.join("sub")
        );
        assert_eq!(
            resolve_cwd(root.path(), Some("in")).unwrap(),
            canon.join("sub")
        );
        assert!(matches!(
            resolve_cwd(root.path(), Some("../")),
            Err(PathError::ParentComponent(_))
        ));
        assert!(matches!(
            resolve_cwd(root.path(), Some("sub/../..")),
            Err(PathError::ParentComponent(_))
        ));
        assert!(matches!(
            resolve_cwd(root.path(), Some("/etc")),
            Err(PathError::Absolute(_))
        ));
        assert!(matches!(
            resolve_cwd(root.path(), Some("out")),
            Err(PathError::Missing(_))
        ));
        std::os::unix::fs::symlink("/nonexistent-sagents", root.path().join("gone")).unwrap();
        assert_eq!(
            resolve_cwd(root.path(), Some("out"))
                .unwrap_err()
                .to_string(),
            resolve_cwd(root.path(), Some("gone"))
                .unwrap_err()
                .to_string()
                .replace("gone", "out")
        );
        assert!(matches!(
            resolve_cwd(root.path(), Some("nope")),
            Err(PathError::Missing(_))
        ));
    }

    #[test]
    fn workspaces_must_lie_inside_the_workspace_root() {
        let ws = tempfile::tempdir().unwrap();
        let canon = ws.path().canonicalize().unwrap();
        assert_eq!(
            resolve_workspace(ws.path(), "proj").unwrap().path,
            canon.join("proj")
        );
        let abs = canon.join("other");
        assert_eq!(
            resolve_workspace(ws.path(), abs.to_str().unwrap())
                .unwrap()
                .path,
            abs
        );
        assert_eq!(
            resolve_workspace(ws.path(), "./a/./b").unwrap().path,
            canon.join("a/b")
        );
        assert!(resolve_workspace(ws.path(), "/etc").is_err());
        assert!(resolve_workspace(ws.path(), "/tmp/elsewhere-sagents").is_err());
        assert!(!Path::new("/tmp/elsewhere-sagents").exists());
        assert!(resolve_workspace(ws.path(), "../x").is_err());
        std::os::unix::fs::symlink("/etc", ws.path().join("sneaky")).unwrap();
        assert!(matches!(
            resolve_workspace(ws.path(), "sneaky"),
            Err(PathError::Escapes(_))
        ));
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.path().join("hop")).unwrap();
        assert!(resolve_workspace(ws.path(), "hop/new").is_err());
        assert!(!outside.path().join("new").exists());
        assert!(resolve_workspace(ws.path(), canon.to_str().unwrap()).is_err());
        // A symlink anywhere below the root is refused, even one that stays inside.
        std::os::unix::fs::symlink(canon.join("proj"), ws.path().join("alias")).unwrap();
        assert!(matches!(
            resolve_workspace(ws.path(), "alias/x"),
            Err(PathError::Escapes(_))
        ));
        assert!(!canon.join("proj/x").exists());
    }
}
