//! SAgents sandbox provider plugin API v3, as both sides speak it: what a provider receives
//! (`spec`), the request and answer bodies (`wire`, with the receipt consistency rules a
//! client checks) and the grants that let a runtime act in one sandbox generation (`grant`).
//! A provider implementation depends on this crate alone.

pub mod codes;
pub mod grant;
pub mod spec;
pub mod wire;
