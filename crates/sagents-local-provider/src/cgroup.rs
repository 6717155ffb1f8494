//! A control group per sandbox, bounding it as a whole: its process count, memory and CPU,
//! and freezing every process of it in one write before a snapshot. The groups live under a
//! parent owned by this provider (`sagents/<hash of ROOT>` below the provider's own group in
//! each hierarchy; on v2 beside it when that group holds processes, as v2 hands controllers
//! down only from groups without any), named after the sandbox id. cgroup v2 is used where
//! its controllers reach the provider's group, else the v1 `pids`, `memory`, `cpu` and
//! `freezer` hierarchies; a controller the host lacks is reported (see [`Cgroups::missing`]),
//! never faked.

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use sagents_plugin_api::spec::Resources;

/// The CFS period the CPU quota is expressed in.
pub const CPU_PERIOD_US: u64 = 100_000;
/// Processes the leader itself takes (bwrap's monitor, the namespace's init, its `sleep`);
/// `pids.max` is the spec's count plus these.
pub const LEADER_PROCESSES: u64 = 3;
/// The smallest memory limit a sandbox can start under.
pub const MIN_MEMORY_MB: u64 = 16;
/// The most processes a sandbox may ask for (the kernel's pid space is 4 194 304).
pub const MAX_PROCESSES: u32 = 4_000_000;
const WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Controller {
    Pids,
    Memory,
    Cpu,
    Freezer,
}

impl Controller {
    pub const ALL: [Controller; 4] = [
        Controller::Pids,
        Controller::Memory,
        Controller::Cpu,
        Controller::Freezer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
            Controller::Cpu => "cpu",
            Controller::Freezer => "freezer",
        }
    }
}

/// What a spec that says nothing gets; set by the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Defaults {
    pub max_processes: u32,
    pub memory_mb: u64,
    pub cpu_percent: u32,
    /// The size of a sandbox's `/tmp` (counted against its memory too).
    pub tmp_mb: u64,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            max_processes: 512,
            memory_mb: 1024,
            cpu_percent: 100,
            tmp_mb: 64,
        }
    }
}

/// The limits of one sandbox's group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub pids_max: u64,
    pub memory_bytes: u64,
    /// Microseconds of CPU per [`CPU_PERIOD_US`]; 100 000 is one core.
    pub cpu_quota_us: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoundsError {
    #[error("sandbox_spec.resources.max_processes must be 1 to {MAX_PROCESSES}")]
    Processes,
    #[error("sandbox_spec.resources.memory_mb must be at least {MIN_MEMORY_MB}")]
    TooLittleMemory,
    #[error("sandbox_spec.resources.cpu_percent must be 1 to 100000")]
    CpuPercent,
}

impl Bounds {
    /// The spec's resources, the operator's defaults where it says nothing.
    pub fn from_resources(r: &Resources, d: &Defaults) -> Result<Self, BoundsError> {
        let processes = u64::from(r.max_processes.unwrap_or(d.max_processes));
        let memory_mb = r.memory_mb.unwrap_or(d.memory_mb);
        let cpu = u64::from(r.cpu_percent.unwrap_or(d.cpu_percent));
        if processes == 0 || processes > u64::from(MAX_PROCESSES) {
            return Err(BoundsError::Processes);
        }
        if memory_mb < MIN_MEMORY_MB {
            return Err(BoundsError::TooLittleMemory);
        }
        if cpu == 0 || cpu > 100_000 {
            return Err(BoundsError::CpuPercent);
        }
        Ok(Bounds {
            pids_max: processes.saturating_add(LEADER_PROCESSES),
            memory_bytes: memory_mb.saturating_mul(1024 * 1024),
            // The kernel refuses a quota under 1 ms.
            cpu_quota_us: (cpu * CPU_PERIOD_US / 100).max(1000),
        })
    }
}

/// The provider's parent groups, per controller (one folder for all of them on v2).
#[derive(Debug, Clone, Default)]
pub struct Cgroups {
    v2: bool,
    parents: Vec<(Controller, PathBuf)>,
}

/// One mounted hierarchy: where, which controllers (empty for v2), and the provider's group.
struct Mount {
    point: PathBuf,
    root: String,
    v2: bool,
    controllers: Vec<String>,
}

fn mounts() -> Vec<Mount> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split_whitespace().collect();
        let right: Vec<&str> = right.split_whitespace().collect();
        let (Some(root), Some(point), Some(fstype)) = (left.get(3), left.get(4), right.first())
        else {
            continue;
        };
        let v2 = *fstype == "cgroup2";
        if !v2 && *fstype != "cgroup" {
            continue;
        }
        let controllers = right
            .get(2)
            .map(|o| o.split(',').map(str::to_owned).collect())
            .unwrap_or_default();
        out.push(Mount {
            point: PathBuf::from(point.replace("\\040", " ")),
            root: (*root).to_owned(),
            v2,
            controllers,
        });
    }
    out
}

/// The provider's own group in the v1 hierarchy holding `controller`, or in v2 (`None`).
fn own_group(controller: Option<&str>) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, names, path) = (parts.next()?, parts.next()?, parts.next()?);
        let hit = match controller {
            Some(c) => names.split(',').any(|n| n == c),
            None => names.is_empty(),
        };
        hit.then(|| path.to_owned())
    })
}

fn under_mount(m: &Mount, group: &str) -> PathBuf {
    let rel = group.strip_prefix(m.root.as_str()).unwrap_or(group);
    m.point.join(rel.trim_start_matches('/'))
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    std::fs::write(path, value)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// Whether a folder can be made (and removed) under `dir`.
fn writable(dir: &Path) -> bool {
    let probe = dir.join(format!("sagents-probe-{}", uuid::Uuid::new_v4().simple()));
    let ok = std::fs::create_dir(&probe).is_ok();
    let _ = std::fs::remove_dir(&probe);
    ok
}

impl Cgroups {
    /// Finds the hierarchies this provider can write, for sandboxes of the provider at `root`.
    pub fn detect(root: &Path) -> Self {
        let hash = hex::encode(&Sha256::digest(root.as_os_str().as_encoded_bytes())[..8]);
        let leaf = Path::new("sagents").join(hash);
        let all = mounts();
        if let Some(cg) = Self::detect_v2(&all, &leaf) {
            return cg;
        }
        let mut parents = Vec::new();
        for c in Controller::ALL {
            let Some(m) = all
                .iter()
                .find(|m| !m.v2 && m.controllers.iter().any(|n| n == c.name()))
            else {
                continue;
            };
            let Some(group) = own_group(Some(c.name())) else {
                continue;
            };
            let base = under_mount(m, &group);
            if writable(&base) {
                parents.push((c, base.join(&leaf)));
            }
        }
        Cgroups { v2: false, parents }
    }

    /// v2 when the provider's group offers every controller and can hand them down.
    fn detect_v2(all: &[Mount], leaf: &Path) -> Option<Self> {
        let m = all.iter().find(|m| m.v2)?;
        let base = under_mount(m, &own_group(None)?);
        let offered = std::fs::read_to_string(base.join("cgroup.controllers")).ok()?;
        let offered: Vec<&str> = offered.split_whitespace().collect();
        if !["pids", "memory", "cpu"]
            .iter()
            .all(|c| offered.contains(c))
        {
            return None;
        }
        // Only a group without processes (or the root) hands controllers down, so when the
        // provider's own group holds processes its sandboxes' parent goes beside it.
        let holds_processes =
            std::fs::read_to_string(base.join("cgroup.procs")).is_ok_and(|p| !p.trim().is_empty());
        let anchor = match base != m.point && holds_processes {
            true => base
                .parent()
                .filter(|p| p.starts_with(&m.point))?
                .to_path_buf(),
            false => base,
        };
        let parent = anchor.join(leaf);
        let mut dir = anchor;
        for part in leaf.components() {
            write(&dir.join("cgroup.subtree_control"), "+pids +memory +cpu").ok()?;
            dir = dir.join(part);
            std::fs::create_dir_all(&dir).ok()?;
        }
        write(&dir.join("cgroup.subtree_control"), "+pids +memory +cpu").ok()?;
        let parents = Controller::ALL
            .iter()
            .map(|&c| (c, parent.clone()))
            .collect();
        Some(Cgroups { v2: true, parents })
    }

    pub fn version(&self) -> u8 {
        if self.v2 {
            2
        } else {
            1
        }
    }

    /// Whether the provider can make no group at all here.
    pub fn is_empty(&self) -> bool {
        self.parents.is_empty()
    }

    pub fn has(&self, c: Controller) -> bool {
        self.parents.iter().any(|(p, _)| *p == c)
    }

    /// The controllers this host does not let the provider use.
    pub fn missing(&self) -> Vec<Controller> {
        Controller::ALL
            .into_iter()
            .filter(|&c| !self.has(c))
            .collect()
    }

    /// Where sandbox `id`'s group is (whether or not it exists).
    pub fn sandbox(&self, id: &str) -> SandboxCgroup {
        let mut dirs: Vec<PathBuf> = Vec::new();
        let mut freezer = None;
        for (c, parent) in &self.parents {
            let dir = parent.join(id);
            if *c == Controller::Freezer {
                freezer = Some(dir.clone());
            }
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        SandboxCgroup {
            v2: self.v2,
            dirs,
            freezer,
        }
    }

    /// Makes sandbox `id`'s group (again, if it is there) with `bounds`.
    pub fn create(&self, id: &str, bounds: &Bounds) -> io::Result<SandboxCgroup> {
        let cg = self.sandbox(id);
        for dir in &cg.dirs {
            std::fs::create_dir_all(dir)?;
        }
        for (c, parent) in &self.parents {
            let dir = parent.join(id);
            match (c, self.v2) {
                (Controller::Pids, _) => {
                    write(&dir.join("pids.max"), &bounds.pids_max.to_string())?
                }
                (Controller::Memory, false) => {
                    let bytes = bounds.memory_bytes.to_string();
                    write(&dir.join("memory.limit_in_bytes"), &bytes)?;
                    let memsw = dir.join("memory.memsw.limit_in_bytes");
                    if memsw.exists() {
                        write(&memsw, &bytes)?;
                    }
                }
                (Controller::Memory, true) => {
                    write(&dir.join("memory.max"), &bounds.memory_bytes.to_string())?;
                    let swap = dir.join("memory.swap.max");
                    if swap.exists() {
                        write(&swap, "0")?;
                    }
                }
                (Controller::Cpu, false) => {
                    write(&dir.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())?;
                    write(
                        &dir.join("cpu.cfs_quota_us"),
                        &bounds.cpu_quota_us.to_string(),
                    )?;
                }
                (Controller::Cpu, true) => write(
                    &dir.join("cpu.max"),
                    &format!("{} {CPU_PERIOD_US}", bounds.cpu_quota_us),
                )?,
                (Controller::Freezer, _) => {}
            }
        }
        Ok(cg)
    }

    /// Removes the groups of sandboxes not in `keep` (left by a crash or an older run),
    /// killing whatever still runs in them.
    pub fn clean_stale(&self, keep: &HashSet<String>) {
        let mut stale = HashSet::new();
        for (_, parent) in &self.parents {
            let Ok(entries) = std::fs::read_dir(parent) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if e.path().is_dir() && !keep.contains(&name) {
                    stale.insert(name);
                }
            }
        }
        for id in stale {
            let cg = self.sandbox(&id);
            cg.kill();
            if let Err(e) = cg.remove() {
                tracing::warn!(sandbox_id = %id, error = %e, "could not remove a stale sandbox cgroup");
            }
        }
    }

    /// Removes the provider's own parent folders if no sandbox group is left in them.
    pub fn remove_parents(&self) {
        for (_, parent) in &self.parents {
            if std::fs::remove_dir(parent).is_ok() {
                if let Some(shared) = parent.parent() {
                    let _ = std::fs::remove_dir(shared);
                }
            }
        }
    }
}

/// One sandbox's group: a folder per hierarchy (one on v2).
#[derive(Debug, Clone)]
pub struct SandboxCgroup {
    v2: bool,
    dirs: Vec<PathBuf>,
    freezer: Option<PathBuf>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_that_says_nothing_gets_the_defaults() {
        let d = Defaults::default();
        let b = Bounds::from_resources(&Resources::default(), &d).unwrap();
        assert_eq!(b.pids_max, 512 + LEADER_PROCESSES);
        assert_eq!(b.memory_bytes, 1024 * 1024 * 1024);
        assert_eq!(b.cpu_quota_us, CPU_PERIOD_US);
    }

    #[test]
    fn the_spec_wins_over_the_defaults() {
        let r = Resources {
            max_processes: Some(10),
            memory_mb: Some(64),
            cpu_percent: Some(250),
            ..Resources::default()
        };
        let b = Bounds::from_resources(&r, &Defaults::default()).unwrap();
        assert_eq!(b.pids_max, 10 + LEADER_PROCESSES);
        assert_eq!(b.memory_bytes, 64 << 20);
        assert_eq!(b.cpu_quota_us, 250_000);
        let tiny = Resources {
            cpu_percent: Some(1),
            ..Resources::default()
        };
        assert_eq!(
            Bounds::from_resources(&tiny, &Defaults::default())
                .unwrap()
                .cpu_quota_us,
            1000
        );
    }

    #[test]
    fn impossible_bounds_are_refused() {
        let d = Defaults::default();
        let with = |f: fn(&mut Resources)| {
            let mut r = Resources::default();
            f(&mut r);
            Bounds::from_resources(&r, &d)
        };
        assert_eq!(
            with(|r| r.max_processes = Some(0)),
            Err(BoundsError::Processes)
        );
        assert_eq!(
            with(|r| r.max_processes = Some(u32::MAX)),
            Err(BoundsError::Processes)
        );
        assert_eq!(
            with(|r| r.memory_mb = Some(1)),
            Err(BoundsError::TooLittleMemory)
        );
        assert_eq!(
            with(|r| r.cpu_percent = Some(0)),
            Err(BoundsError::CpuPercent)
        );
        assert_eq!(
            with(|r| r.cpu_percent = Some(u32::MAX)),
            Err(BoundsError::CpuPercent)
        );
    }

    #[test]
    fn each_sandbox_has_its_own_group_per_hierarchy() {
        let cg = Cgroups {
            v2: false,
            parents: vec![
                (Controller::Pids, PathBuf::from("/cg/pids/p")),
                (Controller::Freezer, PathBuf::from("/cg/freezer/p")),
            ],
        };
        let s = cg.sandbox("sbx_1");
        assert_eq!(
            s.dirs(),
            [
                PathBuf::from("/cg/pids/p/sbx_1"),
                PathBuf::from("/cg/freezer/p/sbx_1")
            ]
        );
        assert!(s.can_freeze());
        assert_eq!(cg.missing(), [Controller::Memory, Controller::Cpu]);
        let v2 = Cgroups {
            v2: true,
            parents: Controller::ALL
                .iter()
                .map(|&c| (c, PathBuf::from("/cg/p")))
                .collect(),
        };
        assert_eq!(v2.sandbox("s").dirs(), [PathBuf::from("/cg/p/s")]);
        assert!(v2.missing().is_empty());
    }

    /// On the cgroup2 hierarchy (even one without controllers, as on hybrid hosts), a group
    /// is joined, frozen whole, killed while frozen and removed.
    #[test]
    fn a_v2_group_freezes_kills_and_goes() {
        let Some(m) = mounts().into_iter().find(|m| m.v2) else {
            eprintln!("no cgroup2 mount here; skipped");
            return;
        };
        let Some(base) = own_group(None).map(|g| under_mount(&m, &g)) else {
            return;
        };
        if !writable(&base)
            || !base.join("cgroup.freeze").exists() && !base.join("cgroup.procs").exists()
        {
            eprintln!("{} is not writable here; skipped", base.display());
            return;
        }
        let shared = base.join(format!("sagents-unit-{}", uuid::Uuid::new_v4().simple()));
        let parent = shared.join("root-hash");
        let cgroups = Cgroups {
            v2: true,
            parents: vec![(Controller::Freezer, parent.clone())],
        };
        let bounds = Bounds::from_resources(&Resources::default(), &Defaults::default()).unwrap();
        let cg = cgroups.create("sbx_unit", &bounds).unwrap();
        let fds = cg.open_procs().unwrap();
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("30");
        // SAFETY: the closure only calls write(2).
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || join(&fds));
        }
        let mut child = cmd.spawn().unwrap();
        let pid = child.id() as i32;
        assert_eq!(cg.members(), [pid]);
        cg.freeze().unwrap();
        let events = std::fs::read_to_string(cg.dirs()[0].join("cgroup.events")).unwrap();
        assert!(events.contains("frozen 1"), "{events}");
        cg.kill();
        assert!(!child.wait().unwrap().success());
        cg.remove().unwrap();
        assert!(!cg.exists());
        cgroups.remove_parents();
        assert!(!shared.exists());
    }
}
