//! Interactions: replies (grouped) and expiry.

pub(in crate::store) mod interaction;
pub(in crate::store) mod reply_batch;
