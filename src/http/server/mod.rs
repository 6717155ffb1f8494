//! The transport: connections, the envelope every request goes through, the snapshot hot
//! path and the layers around the router.

pub mod cors;
pub mod deadline;
pub mod envelope;
pub mod hot_path;
pub mod idle;
pub mod layers;
pub mod request_id;
pub mod serve;
pub mod side;
pub mod stack;
pub mod strict;
