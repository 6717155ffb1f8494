//! Runtime claims: leases on ready runs, heartbeats, hand-backs at shutdown.

pub(in crate::store) mod runtime;
