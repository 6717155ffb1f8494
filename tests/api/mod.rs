//! The HTTP API, end to end against a real server and a real database.

mod auth;
mod bad_input;
mod cycle;
mod fencing;
mod idempotency;
mod logs;
mod openapi;
mod outage;
mod providers;
mod read_back;
mod replicas;
mod scale;
mod shutdown;
