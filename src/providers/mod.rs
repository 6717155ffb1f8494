//! Sandbox provider plugin API v3 as the service speaks it: wire types, grants, the mapping
//! to domain types, the HTTP client and the conformance checker.

pub mod client;
pub mod conformance;
pub mod grant;
mod map;
pub mod wire;
