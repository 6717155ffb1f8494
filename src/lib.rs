//! SAgents lifecycle service.

pub mod clock;
pub mod domain;
pub mod lifecycle;
pub mod local_provider;
pub mod metrics;
pub mod notify;
pub mod providers;
pub mod scheduler;
pub mod store;
