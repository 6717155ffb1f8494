//! One integration test binary (one link step) holding every integration suite.

mod common;
mod provider;
mod store;
