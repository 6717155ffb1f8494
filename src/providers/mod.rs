//! Sandbox provider plugin API v3: the spec, wire types, grants, the HTTP client, the
//! registry and the conformance checker.

pub mod client;
pub mod conformance;
pub mod grant;
mod map;
pub mod registry;
pub mod wire;
