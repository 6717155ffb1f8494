//! The checks each JSON body gets before a handler sees it.

use super::error::ApiError;
use super::extract::{CheckContext, Command};
use crate::domain::commands::{
    ClaimRequest, CompleteRun, ConfirmResumed, CreateJob, CreateRun, CreateSession, FailRun,
    Heartbeat, ReplyInteraction, SuspendRun, UpdateJob,
};
use crate::domain::sandbox::{SpecError, SPEC_VERSION_V3};
use crate::domain::validate;

impl Command for CreateSession {
    fn check(&self, _: &CheckContext) -> Result<(), ApiError> {
        Ok(self.validate()?)
    }
}

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

    fn check(&self, _: &CheckContext) -> Result<(), ApiError> {
        if let Some(spec) = &self.sandbox_spec {
            spec.validate()?;
        }
        Ok(self.validate()?)
    }
}

impl Command for SuspendRun {
    fn check(&self, ctx: &CheckContext) -> Result<(), ApiError> {
        Ok(self.validate(ctx.now)?)
    }
}

impl Command for ReplyInteraction {
    fn check(&self, _: &CheckContext) -> Result<(), ApiError> {
        Ok(self.validate()?)
    }
}

impl Command for ConfirmResumed {
    /// A malformed hash can never match: refuse it rather than fail the run over a typo.
    fn check(&self, _: &CheckContext) -> Result<(), ApiError> {
        validate::sha256_digest("resolved_spec_hash", &self.resolved_spec_hash)?;
        if let Some(h) = &self.spec_hash {
            validate::sha256_digest("spec_hash", h)?;
        }
        if let Some(h) = &self.policy_hash {
            validate::sha256_digest("policy_hash", h)?;
        }
        Ok(())
    }
}

impl Command for CompleteRun {
    fn check(&self, _: &CheckContext) -> Result<(), ApiError> {
        Ok(validate::json_object("output", &self.output)?)
    }
}

impl Command for FailRun {
    fn check(&self, _: &CheckContext) -> Result<(), ApiError> {
        Ok(validate::json_object("error", &self.error)?)
    }
}

impl Command for CreateJob {
    fn check(&self, _: &CheckContext) -> Result<(), ApiError> {
        Ok(self.validate()?)
    }
}

impl Command for UpdateJob {
    fn check(&self, _: &CheckContext) -> Result<(), ApiError> {
        Ok(())
    }
}

impl Command for ClaimRequest {
    fn check(&self, ctx: &CheckContext) -> Result<(), ApiError> {
        self.validate()?;
        check_wait("wait_seconds", self.wait_seconds, ctx.long_poll_max_seconds)
    }
}

impl Command for Heartbeat {
    fn check(&self, _: &CheckContext) -> Result<(), ApiError> {
        Ok(())
    }
}

pub fn check_wait(field: &str, wait: Option<u32>, max: u64) -> Result<(), ApiError> {
    match wait {
        Some(w) if u64::from(w) > max => Err(ApiError::invalid(
            field,
            format!("must be at most {max} (the long-poll limit)"),
        )),
        _ => Ok(()),
    }
}
