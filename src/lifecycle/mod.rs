//! The execution-resource lifecycle: the record, its state machine, the rules and the plan.

pub mod attention;
pub mod clients;
pub mod coordinator;
pub mod outcome;
pub mod plan;
pub mod reconcile;
pub mod reconciler;
pub mod rules;
