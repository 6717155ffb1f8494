//! One sandbox's group: joining it, freezing it whole, killing and removing it.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::write;

const WAIT: Duration = Duration::from_secs(5);

/// One sandbox's group: a folder per hierarchy (one on v2).
#[derive(Debug, Clone)]
pub struct SandboxCgroup {
    pub(super) v2: bool,
    pub(super) dirs: Vec<PathBuf>,
    pub(super) freezer: Option<PathBuf>,
}

/// Moves the calling process into the groups whose `cgroup.procs` are `fds` (writing `0`
/// names the writer). Runs between fork and exec: only write(2).
pub fn join(fds: &[OwnedFd]) -> io::Result<()> {
    for fd in fds {
        // SAFETY: a valid descriptor and a one-byte buffer that outlives the call.
        if unsafe { libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) } != 1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

impl SandboxCgroup {
    pub fn exists(&self) -> bool {
        self.dirs.first().is_some_and(|d| d.is_dir())
    }

    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Each hierarchy's `cgroup.procs`, opened for [`join`] in a child about to exec.
    pub fn open_procs(&self) -> io::Result<Vec<OwnedFd>> {
        use std::os::unix::fs::OpenOptionsExt;
        self.dirs
            .iter()
            .map(|d| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_CLOEXEC)
                    .open(d.join("cgroup.procs"))
                    .map(OwnedFd::from)
            })
            .collect()
    }

    /// Every process in the group, in any hierarchy.
    pub fn members(&self) -> Vec<i32> {
        let mut out: Vec<i32> = Vec::new();
        for d in &self.dirs {
            let text = std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
            for pid in text.lines().filter_map(|l| l.trim().parse().ok()) {
                if !out.contains(&pid) {
                    out.push(pid);
                }
            }
        }
        out
    }

    pub fn can_freeze(&self) -> bool {
        self.freezer.is_some()
    }

    /// Stops every process of the group and waits until the kernel says all are stopped.
    pub fn freeze(&self) -> io::Result<()> {
        let Some(dir) = &self.freezer else {
            return Err(io::Error::other("no freezer controller"));
        };
        let done = if self.v2 {
            write(&dir.join("cgroup.freeze"), "1")?;
            let events = dir.join("cgroup.events");
            wait(|| {
                std::fs::read_to_string(&events)
                    .is_ok_and(|t| t.lines().any(|l| l.trim() == "frozen 1"))
            })
        } else {
            let state = dir.join("freezer.state");
            write(&state, "FROZEN")?;
            wait(|| std::fs::read_to_string(&state).is_ok_and(|t| t.trim() == "FROZEN"))
        };
        if done {
            return Ok(());
        }
        let _ = self.thaw();
        Err(io::Error::other("the sandbox did not freeze in time"))
    }

    pub fn thaw(&self) -> io::Result<()> {
        match (&self.freezer, self.v2) {
            (Some(dir), true) => write(&dir.join("cgroup.freeze"), "0"),
            (Some(dir), false) => write(&dir.join("freezer.state"), "THAWED"),
            (None, _) => Ok(()),
        }
    }

    /// SIGKILLs every process of the group, then thaws it so a frozen one dies too.
    pub fn kill(&self) {
        let kill_file = self.dirs.first().map(|d| d.join("cgroup.kill"));
        let killed = self.v2 && kill_file.is_some_and(|f| write(&f, "1").is_ok());
        if !killed {
            // A process forked during a sweep is caught by the next; the freezer keeps the
            // sweep short when the group is frozen.
            for _ in 0..10 {
                let members = self.members();
                if members.is_empty() {
                    break;
                }
                for pid in members {
                    // SAFETY: kill(2) has no memory-safety preconditions.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
        let _ = self.thaw();
    }

    /// Waits (bounded) until the group is empty, then removes it.
    pub fn remove(&self) -> io::Result<()> {
        if !wait(|| self.members().is_empty()) {
            return Err(io::Error::other(
                "the sandbox's cgroup still holds processes",
            ));
        }
        for d in &self.dirs {
            match std::fs::remove_dir(d) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(io::Error::new(e.kind(), format!("{}: {e}", d.display())))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn wait(done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + WAIT;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
