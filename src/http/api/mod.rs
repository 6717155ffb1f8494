//! The API: one file per resource, the extractors, authentication, the error type,
//! `Idempotency-Key` replays and the OpenAPI document.

pub mod admin_attention;
pub mod admin_lifecycle;
pub mod admin_providers;
pub mod admin_tenants;
pub mod admin_tokens;
pub mod audit;
pub mod auth;
pub mod commands;
pub mod error;
pub mod events_stream;
pub mod extract;
pub mod health;
pub mod idempotency;
pub mod inbox;
pub mod interactions;
pub mod jobs;
pub mod metrics;
pub mod openapi;
pub mod openapi_contract;
pub mod runs;
pub mod runtime;
pub mod sessions;
pub mod state;
pub mod ui;
