//! Knowing when a sandbox is set up without watching for it: the leader's first program is a
//! shell that writes one byte to a pipe and closes its end before it becomes `sleep`. bwrap
//! runs it only once every mount is in place, so the byte says the sandbox is finished; the
//! provider waits on the pipe (no CPU) instead of polling `/proc`.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

/// The write end as the leader's shell sees it: a descriptor in 3..=9 (the shell's
/// redirections take one digit) that none of `keep` already is.
pub(super) struct Signal {
    write: OwnedFd,
    target: i32,
}

impl Signal {
    pub(super) fn new(write: OwnedFd, keep: &[i32]) -> io::Result<Self> {
        let target = (3..=9)
            .find(|fd| !keep.contains(fd))
            .ok_or_else(|| io::Error::other("no descriptor is free for the ready signal"))?;
        Ok(Signal { write, target })
    }

    /// The leader's program and arguments: the shell, then `sleep` (`infinity`).
    pub(super) fn leader_argv(&self, sh: &Path, sleep: &Path) -> Vec<std::ffi::OsString> {
        let n = self.target;
        vec![
            sh.into(),
            "-c".into(),
            format!("printf . >&{n} && exec {n}>&- && exec \"$0\" infinity").into(),
            sleep.into(),
        ]
    }

    /// The parent's end and its target, for [`install`] in the child.
    pub(super) fn raw(&self) -> (i32, i32) {
        (self.write.as_raw_fd(), self.target)
    }
}

/// In the child, before exec: the write end `fd` at `target`, inherited. Async-signal-safe.
pub(super) fn install(fd: i32, target: i32) -> io::Result<()> {
    // SAFETY: dup2(2) and fcntl(2) on descriptors this process holds.
    let rc = unsafe {
        match fd == target {
            true => libc::fcntl(fd, libc::F_SETFD, 0),
            false => libc::dup2(fd, target),
        }
    };
    match rc < 0 {
        true => Err(io::Error::last_os_error()),
        false => Ok(()),
    }
}

/// Waits at most `limit` for the leader's byte on `read`.
pub(super) fn wait(read: &OwnedFd, limit: Duration) -> io::Result<()> {
    if !readable_by(read, Instant::now() + limit) {
        return Err(io::Error::other("the sandbox was not set up in time"));
    }
    let mut byte = [0u8; 1];
    // SAFETY: `byte` is valid for one byte.
    match unsafe { libc::read(read.as_raw_fd(), byte.as_mut_ptr().cast(), 1) } {
        1 => Ok(()),
        _ => Err(io::Error::other(
            "the sandbox exited while it was being set up",
        )),
    }
}

/// Whether `fd` has something to read (or its writers are gone) before `deadline`.
pub(super) fn readable_by(fd: &OwnedFd, deadline: Instant) -> bool {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, left.as_millis() as libc::c_int) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return n > 0;
    }
}
