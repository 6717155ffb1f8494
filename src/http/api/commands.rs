//! The checks a JSON body gets before a handler sees it that only the HTTP edge can make
//! (long-poll bounds, a precise error for a spec of another version). Field rules live with
//! each command in `domain::commands` and run once, in the use case.

use super::error::ApiError;
use super::extract::{CheckContext, Command};
use crate::domain::commands::{
    ClaimRequest, CompleteRun, ConfirmResumed, CreateJob, CreateRun, CreateSession, FailRun,
    Heartbeat, ReplyInteraction, SuspendRun, UpdateJob,
};
use crate::domain::sandbox::{SpecError, SPEC_VERSION_V3};

impl Command for CreateSession {}

impl Command for CreateRun {
    /// A spec of another version is refused as unsupported, whatever else it contains.
    fn precheck(raw: &serde_json::Value) -> Result<(), ApiError> {
        match raw.pointer("/sandbox_spec/spec_version") {
            Some(serde_json::Value::String(v)) if v != SPEC_VERSION_V3 => {
                Err(SpecError::Unsupported(v.chars().take(80).collect()).into())
            }
            _ => Ok(()),
        }
    }
}

impl Command for SuspendRun {}

impl Command for ReplyInteraction {}

impl Command for ConfirmResumed {}

impl Command for CompleteRun {}

impl Command for FailRun {}

impl Command for CreateJob {}

impl Command for UpdateJob {}

impl Command for ClaimRequest {
    fn check(&self, ctx: &CheckContext) -> Result<(), ApiError> {
        self.validate()?;
        check_wait("wait_seconds", self.wait_seconds, ctx.long_poll_max_seconds)
    }
}

impl Command for Heartbeat {}

pub fn check_wait(field: &str, wait: Option<u32>, max: u64) -> Result<(), ApiError> {
    match wait {
        Some(w) if u64::from(w) > max => Err(ApiError::invalid(
            field,
            format!("must be at most {max} (the long-poll limit)"),
        )),
        _ => Ok(()),
    }
}
