//! The HTTP API, end to end against a real server and a real database.

mod auth;
mod bad_input;
mod compression;
mod contract;
mod cors;
mod cycle;
mod edges;
mod events_stream;
mod evidence;
mod fencing;
mod hostile_doors;
mod hot_path;
mod idempotency;
mod inbox;
mod logs;
mod openapi;
mod operator_cli;
mod outage;
mod providers;
mod read_back;
mod replicas;
mod scale;
mod shutdown;
mod timeouts;
