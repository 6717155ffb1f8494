//! The scheduler: per-replica workers that claim due lifecycle work under the run's fenced
//! lease, keep that lease alive while the coordinator works, and sleep until work is due.

mod keeper;
mod pool;

pub use keeper::{keep_lease, LeaseEnd};
pub use pool::{PoolConfig, WorkerPool};
