//! Sandbox provider plugin API v3: the spec, wire types, HTTP client and registry.

pub mod spec;
