//! SAgents lifecycle service.

pub mod app;
pub mod clock;
pub mod config;
pub mod domain;
pub mod http;
pub mod lifecycle;
pub mod metrics;
pub mod notify;
pub mod providers;
pub mod scheduler;
pub mod service;
pub mod snapshot_cache;
pub mod store;
pub mod telemetry;
