//! Sandbox leaders. Isolated (see [`super::isolation`]): the leader is the init of the
//! sandbox's PID namespace, and a signal to the sandbox goes to every process in that
//! namespace; killing the init ends them all. Without isolation: a process group led by a
//! long-lived `sleep infinity`, which exec'd commands join.

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use sagents_plugin_api::spec::Resources;

/// The group leader; its pid is the group id. `start_time` (clock ticks since boot) tells a
/// live leader from an unrelated process that reused the pid after a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leader {
    pub pid: i32,
    pub start_time: u64,
    /// The inode of the sandbox's PID namespace, for an isolated sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_ns: Option<u64>,
    /// The host uid the sandbox runs as, when it has one of its own (absent in records of
    /// older providers, whose sandboxes all shared one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_uid: Option<u32>,
}

pub const SAFE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Names the sandbox in its leader's environment, so a leader whose start was never recorded
/// can still be found (see [`tagged_leaders`]).
pub const SANDBOX_TAG: &str = "SAGENTS_SANDBOX_ID";

/// Finds `name` in the fixed system folders ([`SAFE_PATH`]), never by a caller's `PATH`; with
/// `root` it must be owned by root and writable by root alone, since the provider runs it with
/// its own privileges.
pub fn system_program(name: &str, root: bool) -> io::Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    for dir in SAFE_PATH.split(':') {
        let path = Path::new(dir).join(name);
        let Ok(meta) = path.metadata() else { continue };
        if !meta.is_file() || meta.mode() & 0o111 == 0 {
            continue;
        }
        if root && (meta.uid() != 0 || meta.mode() & 0o022 != 0) {
            return Err(io::Error::other(format!(
                "{} must be owned by root and writable by root alone",
                path.display()
            )));
        }
        return Ok(path);
    }
    Err(io::Error::other(format!(
        "`{name}` was not found in {SAFE_PATH}"
    )))
}

/// Starts `sleep infinity` as the leader of a new process group in `dir`, in the control
/// groups whose `cgroup.procs` are `cgroup`.
pub fn spawn_leader(dir: &Path, sandbox_id: &str, cgroup: Vec<OwnedFd>) -> io::Result<Leader> {
    // SAFETY: geteuid(2) has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut cmd = tokio::process::Command::new(system_program("sleep", root)?);
    cmd.arg("infinity")
        .env_clear()
        .env("PATH", SAFE_PATH)
        .env(SANDBOX_TAG, sandbox_id)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    // SAFETY: the closure only calls write(2).
    unsafe {
        cmd.pre_exec(move || super::cgroup::join(&cgroup));
    }
    let mut child = cmd.spawn()?;
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| io::Error::other("the sandbox leader exited at once"))?;
    let started =
        start_time(pid).ok_or_else(|| io::Error::other("the sandbox leader exited at once"))?;
    let tagged = wait_until_tagged(sandbox_id, Duration::from_secs(10), || {
        (start_time(pid) == Some(started)).then(|| vec![pid])
    });
    if let Err(e) = tagged {
        let _ = child.start_kill();
        return Err(e);
    }
    // Reap the leader whenever it dies, so a killed group leaves no zombie behind.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    Ok(Leader {
        pid,
        start_time: started,
        pid_ns: None,
        host_uid: None,
    })
}

/// Waits until one of `candidates()` carries `sandbox_id`'s tag, so that a leader is found
/// by [`tagged_leaders`] from the moment its start returns: `exec` installs the new
/// environment only after the parent has seen it succeed. `candidates` gives `None` once
/// the process it watches has died.
pub fn wait_until_tagged(
    sandbox_id: &str,
    limit: Duration,
    candidates: impl Fn() -> Option<Vec<i32>>,
) -> io::Result<()> {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        let Some(pids) = candidates() else {
            return Err(io::Error::other(
                "the sandbox exited while it was being set up",
            ));
        };
        if pids
            .into_iter()
            .any(|p| tag_of(p).as_deref() == Some(sandbox_id))
        {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Err(io::Error::other("the sandbox was not set up in time"))
}

/// The sandbox id in a process's environment.
fn tag_of(pid: i32) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{SANDBOX_TAG}=");
    environ
        .split(|b| *b == 0)
        .find_map(|v| std::str::from_utf8(v).ok()?.strip_prefix(prefix.as_str()))
        .map(str::to_owned)
}

/// Field 22 of `/proc/PID/stat`, or `None` if the process is gone or a zombie.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields resume after its last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    if matches!(state, "Z" | "X" | "x") {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// Every live leader this user can see, by the sandbox id in its environment.
pub fn tagged_leaders() -> HashMap<String, Leader> {
    let mut out = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Some(id) = tag_of(pid) else { continue };
        if let Some(leader) = tagged_leader(pid) {
            out.insert(id, leader);
        }
    }
    out
}

/// The leader a tagged process stands for: itself without isolation; the init of its
/// namespace when it is the `sleep` started second in a PID namespace.
fn tagged_leader(pid: i32) -> Option<Leader> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let nspids: Vec<&str> = field("NSpid:")?.split_whitespace().collect();
    if nspids.len() < 2 {
        return Some(Leader {
            pid,
            start_time: start_time(pid)?,
            pid_ns: None,
            host_uid: None,
        });
    }
    if nspids.last() != Some(&"2") {
        return None;
    }
    let init: i32 = field("PPid:")?.parse().ok()?;
    Some(Leader {
        pid: init,
        start_time: start_time(init)?,
        pid_ns: Some(pid_ns_of(init)?),
        host_uid: None,
    })
}

fn pid_ns_of(pid: i32) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()?;
    link.to_str()?
        .strip_prefix("pid:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The live (not zombie) processes of the PID namespace `ns`.
pub fn ns_members(ns: u64) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid_ns_of(pid) == Some(ns) && start_time(pid).is_some())
        .collect()
}

/// The live processes of process group `pgid` (without isolation, a sandbox's group).
fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                    return false;
                };
                let mut fields = rest.split_whitespace();
                let live = !matches!(fields.next(), Some("Z" | "X" | "x"));
                live && fields.nth(1).and_then(|g| g.parse::<i32>().ok()) == Some(pgid)
            })
        })
        .collect()
}

/// The host pid of the process sandbox `sandbox_id` knows as `nspid` (what `echo $!` prints
/// inside it); for tests and tools.
pub fn host_pid(sandbox_id: &str, nspid: i32) -> Option<i32> {
    let leader = tagged_leaders().remove(sandbox_id)?;
    let Some(ns) = leader.pid_ns else {
        return Some(nspid);
    };
    ns_members(ns).into_iter().find(|&pid| {
        std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .and_then(|l| l.split_whitespace().last())
                == Some(nspid.to_string().as_str())
        })
    })
}

fn kill(pid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: kill(2) has no memory-safety preconditions.
    if unsafe { libc::kill(pid, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl Leader {
    pub fn is_alive(&self) -> bool {
        start_time(self.pid) == Some(self.start_time)
    }

    /// Sends `sig` to the whole group; fails if no live leader is left to address.
    pub fn signal_group(&self, sig: i32) -> io::Result<()> {
        if !self.is_alive() {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        let Some(ns) = self.pid_ns else {
            return kill(-self.pid, sig);
        };
        // Sweep until no new member appears, so a process forked mid-sweep is reached too.
        let mut done = std::collections::HashSet::new();
        for _ in 0..10 {
            let fresh: Vec<i32> = ns_members(ns)
                .into_iter()
                .filter(|p| !done.contains(p))
                .collect();
            if fresh.is_empty() {
                break;
            }
            for pid in fresh {
                let _ = kill(pid, sig);
                done.insert(pid);
            }
        }
        Ok(())
    }

    /// Whether every process of the sandbox is gone: the leader, and for an isolated sandbox
    /// every member of its PID namespace.
    pub fn all_dead(&self) -> bool {
        !self.is_alive()
            && match self.pid_ns {
                Some(ns) => ns_members(ns).is_empty(),
                None => group_members(self.pid).is_empty(),
            }
    }

    fn kill_target(&self) -> i32 {
        match self.pid_ns {
            Some(_) => self.pid,
            None => -self.pid,
        }
    }

    pub fn pause(&self) -> io::Result<()> {
        self.signal_group(libc::SIGSTOP)
    }

    pub fn resume(&self) -> io::Result<()> {
        self.signal_group(libc::SIGCONT)
    }

    /// SIGKILLs the group without waiting (for teardown paths that cannot await).
    pub fn kill_now(&self) {
        if self.is_alive() {
            let _ = kill(self.kill_target(), libc::SIGKILL);
        }
    }

    /// Like [`Leader::kill_group`], blocking the calling thread (for startup).
    pub fn kill_group_blocking(&self) -> io::Result<()> {
        self.kill_now();
        let deadline = std::time::Instant::now() + KILL_WAIT;
        while std::time::Instant::now() < deadline {
            if self.all_dead() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Err(io::Error::other(
            "the sandbox's process group did not die after SIGKILL",
        ))
    }

    /// SIGKILLs the group and waits (bounded) until the leader is gone.
    pub async fn kill_group(&self) -> io::Result<()> {
        if self.is_alive() {
            if let Err(e) = kill(self.kill_target(), libc::SIGKILL) {
                if e.raw_os_error() != Some(libc::ESRCH) {
                    return Err(e);
                }
            }
        }
        let deadline = std::time::Instant::now() + KILL_WAIT;
        while std::time::Instant::now() < deadline {
            if self.all_dead() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Err(io::Error::other(
            "the sandbox's process group did not die after SIGKILL",
        ))
    }
}

/// The limits applied to every command run in a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    pub max_processes: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub cpu_seconds: Option<u64>,
    pub open_files: Option<u64>,
    pub file_bytes: Option<u64>,
}

impl Limits {
    /// `cpu_percent` is a share of one core over the command's timeout, so a command may
    /// burn at most `timeout × cpu_percent / 100` CPU seconds (at least one).
    pub fn from_resources(r: &Resources, timeout: Duration) -> Self {
        Limits {
            max_processes: r.max_processes.map(u64::from),
            memory_bytes: r.memory_mb.map(|mb| mb.saturating_mul(1024 * 1024)),
            cpu_seconds: r.cpu_percent.map(|pct| {
                let secs = timeout.as_secs().max(1);
                (secs.saturating_mul(u64::from(pct)).div_ceil(100)).max(1)
            }),
            open_files: r.max_open_files.map(u64::from),
            file_bytes: r.disk_mb.map(|mb| mb.saturating_mul(1024 * 1024)),
        }
    }

    /// Applies the limits to the calling process. Runs between fork and exec, so it only
    /// makes async-signal-safe calls.
    pub fn apply(&self) -> io::Result<()> {
        fn set(resource: libc::__rlimit_resource_t, value: u64) -> io::Result<()> {
            let lim = libc::rlimit {
                rlim_cur: value as libc::rlim_t,
                rlim_max: value as libc::rlim_t,
            };
            // SAFETY: `lim` is a valid rlimit for the duration of the call.
            if unsafe { libc::setrlimit(resource, &lim) } == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        }
        if let Some(n) = self.max_processes {
            set(libc::RLIMIT_NPROC, n)?;
        }
        if let Some(b) = self.memory_bytes {
            set(libc::RLIMIT_AS, b)?;
        }
        if let Some(s) = self.cpu_seconds {
            set(libc::RLIMIT_CPU, s)?;
        }
        if let Some(n) = self.open_files {
            set(libc::RLIMIT_NOFILE, n)?;
        }
        if let Some(b) = self.file_bytes {
            set(libc::RLIMIT_FSIZE, b)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_percent_becomes_a_cpu_time_budget() {
        let r = Resources {
            cpu_percent: Some(50),
            memory_mb: Some(64),
            max_processes: Some(32),
            ..Resources::default()
        };
        let l = Limits::from_resources(&r, Duration::from_secs(10));
        assert_eq!(l.cpu_seconds, Some(5));
        assert_eq!(l.memory_bytes, Some(64 * 1024 * 1024));
        assert_eq!(l.max_processes, Some(32));
        let tiny = Limits::from_resources(&r, Duration::from_secs(1));
        assert_eq!(tiny.cpu_seconds, Some(1));
        assert_eq!(
            Limits::from_resources(&Resources::default(), Duration::from_secs(5)),
            Limits::default()
        );
    }

    #[tokio::test]
    async fn a_leader_lives_until_its_group_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let leader = spawn_leader(dir.path(), "sbx_leader_test", Vec::new()).unwrap();
        assert!(leader.is_alive());
        assert_eq!(tagged_leaders().get("sbx_leader_test"), Some(&leader));
        leader.pause().unwrap();
        leader.resume().unwrap();
        leader.kill_group().await.unwrap();
        assert!(!leader.is_alive());
        assert!(!tagged_leaders().contains_key("sbx_leader_test"));
        assert!(leader.resume().is_err());
        let reused = Leader {
            pid: std::process::id() as i32,
            start_time: 1,
            pid_ns: None,
            host_uid: None,
        };
        assert!(
            !reused.is_alive(),
            "a pid with another start time is not the leader"
        );
    }
}
