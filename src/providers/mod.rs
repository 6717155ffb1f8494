//! Sandbox provider plugin API v3 as the service speaks it: wire types, grants, the mapping
//! to domain types, the HTTP client and the conformance checker.

pub mod client;
pub mod conformance;
mod map;

pub use sagents_plugin_api::{codes, grant, spec as wire_spec, wire};
