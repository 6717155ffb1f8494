//! The execution-resource lifecycle: the record's state machine and the release/restore rules.

pub mod machine;
pub mod rules;
