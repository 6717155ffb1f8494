//! The checks of each write, as pure functions over the rows it read, its command and the
//! time. The store loads the rows, asks the rule, and writes what it decided, fenced; the
//! first check that fails decides the refusal.

pub mod claim;
pub mod create;
pub mod expiry;
pub mod finish;
pub mod jobs;
pub mod reply;
pub mod resources;
pub mod suspend;
pub mod transition;

mod refusal;

pub use refusal::Refusal;

#[cfg(test)]
mod fixtures;
