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
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

mod bounds;
mod group;
#[cfg(test)]
mod tests;

pub use bounds::*;
pub use group::{join, SandboxCgroup};

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
