//! What every aggregate writes through: transactions, the group commit, the SQL dialects,
//! connections, row decoding, errors and statement helpers.

pub(in crate::store) mod batch_reads;
pub(in crate::store) mod connect;
pub(in crate::store) mod dialect;
pub(in crate::store) mod error;
pub(in crate::store) mod group;
pub(in crate::store) mod handle;
pub(in crate::store) mod params;
pub(in crate::store) mod records;
pub(in crate::store) mod rows;
pub(in crate::store) mod snapshot_read;
pub(in crate::store) mod tx;
pub(in crate::store) mod visible;

pub(in crate::store) use error::{StoreError, StoreResult};
pub(in crate::store) use handle::Store;
