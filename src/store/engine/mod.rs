//! What every aggregate writes through: transactions, the group commit, the SQL dialects,
//! connections, row decoding, errors and statement helpers.

pub(in crate::store) mod batch_reads;
pub(in crate::store) mod connect;
pub(in crate::store) mod dialect;
pub(in crate::store) mod error;
pub(in crate::store) mod group;
pub(in crate::store) mod request_batch;
pub(in crate::store) mod rows;
pub(in crate::store) mod tx;
