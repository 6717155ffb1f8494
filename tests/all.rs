//! One integration test binary (one link step) holding every integration suite.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "tests and benchmarks stop at the first surprise and print what they measure"
)]

mod api;
mod common;
mod lifecycle;
mod provider;
mod store;
