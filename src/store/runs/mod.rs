//! Runs: creation (grouped), the fence, transitions, suspensions (grouped) and jobs.

pub(in crate::store) mod create_batch;
pub(in crate::store) mod fence;
pub(in crate::store) mod jobs;
pub(in crate::store) mod run;
pub(in crate::store) mod suspend_batch;
pub(in crate::store) mod transition_batch;
pub(in crate::store) mod transitions;
