//! Sessions: creation (grouped), the snapshot read, the event log and the inbox.

pub(in crate::store) mod create_batch;
pub(in crate::store) mod events;
pub(in crate::store) mod inbox;
pub(in crate::store) mod session;
