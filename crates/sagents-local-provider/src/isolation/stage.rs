//! The sandbox's folder as bwrap sees it, when the provider runs as root. bwrap takes a bind
//! source by path and resolves it again, so a parent folder swapped in that window would
//! change what is mounted. Instead, bwrap's process clones the open folder as a detached
//! mount (`open_tree` on its descriptor: that very folder, whatever its path has become),
//! enters a mount namespace of its own (a slave of the host's: nothing propagates back),
//! attaches the clone on a fixed, provider-owned, empty folder (`move_mount`), and only then
//! drops to the sandbox's ids and runs bwrap, which binds that fixed path.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The fixed mount point, the same for every sandbox (each mounts it in its own namespace).
#[derive(Debug, Clone)]
pub(super) struct Stage {
    path: PathBuf,
}

impl Stage {
    /// `.stage` beside the sandboxes' folder `under` (so that folder lists sandboxes only),
    /// created root-owned and mode 0711.
    pub(super) fn new(under: &Path) -> io::Result<Self> {
        use std::os::unix::fs::PermissionsExt;
        let path = under.parent().unwrap_or(under).join(".stage");
        match std::fs::create_dir(&path) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o711))?;
        Ok(Stage { path })
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// What the child needs, made before the fork (the child may not allocate).
    pub(super) fn plan(&self, dir_fd: i32, uid: u32, gid: u32) -> io::Result<Plan> {
        let c = |s: &[u8]| CString::new(s).map_err(io::Error::other);
        Ok(Plan {
            dir_fd,
            target: c(self.path.as_os_str().as_bytes())?,
            uid,
            gid,
        })
    }
}

pub(super) struct Plan {
    dir_fd: i32,
    target: CString,
    uid: u32,
    gid: u32,
}

fn check(rc: libc::c_int) -> io::Result<()> {
    match rc {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

impl Plan {
    /// In the child, before exec: the private namespace, the bind, then the sandbox's ids.
    /// Only async-signal-safe calls.
    pub(super) fn apply(&self) -> io::Result<()> {
        const OPEN_TREE_CLONE: libc::c_uint = 1;
        const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;
        let none = std::ptr::null::<libc::c_char>();
        // SAFETY: plain syscalls on valid NUL-terminated strings, descriptors or null pointers.
        unsafe {
            let flags = OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint;
            let empty = libc::AT_EMPTY_PATH as libc::c_uint;
            let tree = libc::syscall(
                libc::SYS_open_tree,
                self.dir_fd,
                c"".as_ptr(),
                flags | empty,
            );
            if tree < 0 {
                return Err(io::Error::last_os_error());
            }
            check(libc::unshare(libc::CLONE_NEWNS))?;
            check(libc::mount(
                none,
                c"/".as_ptr(),
                none,
                libc::MS_SLAVE | libc::MS_REC,
                std::ptr::null(),
            ))?;
            let moved = libc::syscall(
                libc::SYS_move_mount,
                tree as libc::c_int,
                c"".as_ptr(),
                libc::AT_FDCWD,
                self.target.as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            );
            if moved < 0 {
                return Err(io::Error::last_os_error());
            }
            libc::close(tree as libc::c_int);
        }
        set_ids(self.uid, self.gid)
    }
}

/// No supplementary groups, then `gid`, then `uid`, for the calling task only: raw syscalls,
/// since glibc's wrappers change every thread of the process, and a child that shares its
/// parent's memory (see `spawn`) would change the parent's.
pub(super) fn set_ids(uid: u32, gid: u32) -> io::Result<()> {
    let raw = |rc: libc::c_long| match rc {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    };
    // SAFETY: syscalls taking only integers and a null list.
    unsafe {
        raw(libc::syscall(
            libc::SYS_setgroups,
            0,
            std::ptr::null::<libc::gid_t>(),
        ))?;
        raw(libc::syscall(libc::SYS_setresgid, gid, gid, gid))?;
        raw(libc::syscall(libc::SYS_setresuid, uid, uid, uid))
    }
}
