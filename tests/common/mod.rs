//! Shared test harness: throwaway databases and a spawned app per test.
#![allow(dead_code)]

pub mod app;
pub mod db;
pub mod own_pg;
pub mod pg;
