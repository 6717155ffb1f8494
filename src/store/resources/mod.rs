//! Execution-resource records: fenced writes, hooks, history, lifecycle claims, reconcile,
//! attention and the lifecycle figures.

pub(in crate::store) mod attention;
pub(in crate::store) mod history;
pub(in crate::store) mod hooks;
pub(in crate::store) mod lifecycle_work;
pub(in crate::store) mod metrics;
pub(in crate::store) mod reconcile;
pub(in crate::store) mod record_batch;
pub(in crate::store) mod releases;
pub(in crate::store) mod writes;
