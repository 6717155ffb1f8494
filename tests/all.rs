//! One integration test binary (one link step) holding every integration suite.

mod api;
mod common;
mod lifecycle;
mod provider;
mod store;
