//! SAgents lifecycle service: the control plane that lets AI-agent runs wait for humans
//! without wasting or leaking compute.
//!
//! A tour, bottom to top (imports only point down; `tests/layers.rs` checks it, and
//! `ARCHITECTURE.md` says where each lifecycle rule lives):
//! - [`domain`]: pure types and rules (sessions, runs, interactions, the execution-resource
//!   record and its state machine, the sandbox spec). No I/O.
//! - [`clock`], [`config`], [`metrics`], [`notify`], [`snapshot_cache`], [`telemetry`]:
//!   process-wide plumbing.
//! - [`store`]: one API over SQLite and PostgreSQL, one transaction per use case, fenced and
//!   compare-and-set writes.
//! - [`providers`]: plugin API v3 as the service speaks it (client, conformance checker,
//!   wire ↔ domain mapping); the wire types are the `sagents-plugin-api` crate.
//! - [`service`]: use cases over several store calls (claims with grants, long-polls,
//!   tokens, provider registration).
//! - [`lifecycle`]: the coordinator that plans each run's next step, calls the provider
//!   under the run's lease and writes the outcome.
//! - [`scheduler`]: the worker pool that claims due lifecycle work.
//! - [`http`]: the REST API (one file per resource), errors, extractors, OpenAPI.
//! - [`app`]: wiring and the server's life from bind to graceful shutdown.

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
