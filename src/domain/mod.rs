//! Pure domain types and rules: no I/O here.

pub mod audit;
pub mod claim;
pub mod commands;
pub mod decide;
pub mod ids;
pub mod interaction;
pub mod job;
pub mod resource;
pub mod run;
pub mod sandbox;
pub mod session;
pub mod snapshot;
pub mod tenant;
pub mod token;
pub mod validate;

pub use ids::*;
