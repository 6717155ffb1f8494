//! The limits of one sandbox's group: from its spec's resources, the operator's defaults
//! where it says nothing.

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
