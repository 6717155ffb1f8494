//! Process groups: one long-lived leader per sandbox; exec'd commands join its group, so one
//! signal to the group reaches everything the sandbox runs.

use std::collections::HashMap;
use std::io;
use std::path::Path;
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
}

/// Names the sandbox in its leader's environment, so a leader whose start was never recorded
/// can still be found (see [`tagged_leaders`]).
pub const SANDBOX_TAG: &str = "SAGENTS_SANDBOX_ID";

/// Starts `sleep infinity` as the leader of a new process group in `dir`.
pub fn spawn_leader(dir: &Path, sandbox_id: &str) -> io::Result<Leader> {
    let mut child = tokio::process::Command::new("sleep")
        .arg("infinity")
        .env(SANDBOX_TAG, sandbox_id)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| io::Error::other("the sandbox leader exited at once"))?;
    let start_time =
        start_time(pid).ok_or_else(|| io::Error::other("the sandbox leader exited at once"))?;
    // Reap the leader whenever it dies, so a killed group leaves no zombie behind.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    Ok(Leader { pid, start_time })
}

/// Field 22 of `/proc/PID/stat`, or `None` if the process is gone or a zombie.
fn start_time(pid: i32) -> Option<u64> {
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
    let prefix = format!("{SANDBOX_TAG}=");
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(environ) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        let id = environ
            .split(|b| *b == 0)
            .find_map(|v| std::str::from_utf8(v).ok()?.strip_prefix(prefix.as_str()));
        if let (Some(id), Some(start_time)) = (id, start_time(pid)) {
            out.insert(id.to_owned(), Leader { pid, start_time });
        }
    }
    out
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
        // SAFETY: kill(2) has no memory-safety preconditions.
        if unsafe { libc::kill(-self.pid, sig) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
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
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe { libc::kill(-self.pid, libc::SIGKILL) };
        }
    }

    /// Like [`Leader::kill_group`], blocking the calling thread (for startup).
    pub fn kill_group_blocking(&self) -> io::Result<()> {
        self.kill_now();
        for _ in 0..500 {
            if !self.is_alive() {
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
        if !self.is_alive() {
            return Ok(());
        }
        // SAFETY: kill(2) has no memory-safety preconditions.
        let rc = unsafe { libc::kill(-self.pid, libc::SIGKILL) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(e);
            }
        }
        for _ in 0..500 {
            if !self.is_alive() {
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
        let leader = spawn_leader(dir.path(), "sbx_leader_test").unwrap();
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
        };
        assert!(
            !reused.is_alive(),
            "a pid with another start time is not the leader"
        );
    }
}
