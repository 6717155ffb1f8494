//! A frontend's cancel and resume, and the runtime's resume confirmation (rules 8 and 9).

use serde_json::{json, Value};

use super::Refusal;
use crate::domain::claim::ExpectedHashes;
use crate::domain::commands::ConfirmResumed;
use crate::domain::interaction::Checkpoint;
use crate::domain::run::{Run, RunEvent, RunState};
use crate::domain::InteractionId;

/// Any run not yet ended is cancelled.
pub fn cancel(run: &Run) -> Result<RunState, Refusal> {
    run.state
        .apply(RunEvent::Cancel)
        .map_err(|_| Refusal::conflict("run.terminal", format!("the run is already {}", run.state)))
}

/// The first check of an explicit resume, on the locked run: only a suspended run resumes.
pub fn resume(run: &Run) -> Result<RunState, Refusal> {
    run.state.apply(RunEvent::Resume).map_err(|_| {
        Refusal::conflict(
            "run.not_suspended",
            format!(
                "only a suspended run can be resumed; this run is {}",
                run.state
            ),
        )
    })
}

/// The second check of an explicit resume, once its open suspension is read: a run that
/// waits for a still pending interaction is resumed by a reply to it, not explicitly.
pub fn resume_waiting_for(pending_interaction: Option<&InteractionId>) -> Result<(), Refusal> {
    match pending_interaction {
        None => Ok(()),
        Some(id) => Err(Refusal::conflict(
            "interaction.pending",
            format!("the run waits for interaction {id}: reply to it instead"),
        )),
    }
}

/// The hashes a runtime must confirm: the run's, plus its sandbox spec's when it has one.
pub fn expected_hashes(run: &Run) -> ExpectedHashes {
    let spec_field = |name: &str| {
        run.sandbox_spec
            .as_ref()
            .and_then(|s| s.get(name))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    ExpectedHashes {
        resolved_spec_hash: run.resolved_spec_hash.clone(),
        spec_hash: spec_field("spec_hash"),
        policy_hash: spec_field("policy_hash"),
    }
}

/// The first check of a resume confirmation, on the fenced run: its `Resumed`.
pub fn confirm_resumed(run: &Run) -> Result<RunState, Refusal> {
    Ok(run.state.apply(RunEvent::Resumed)?)
}

/// What a confirmation that passed `confirm_resumed` does, once the run's latest checkpoint
/// is read.
#[derive(Debug, Clone, PartialEq)]
pub enum Confirmation {
    /// The hashes match: the run goes on.
    Resumed,
    /// A hash differs: the run is failed with `error`, and the caller told `message`.
    PolicyStale { message: String, error: Value },
}

/// The hashes the runtime computed against the run, its latest checkpoint and its sandbox
/// spec; every mismatch is named, in that order.
pub fn check_hashes(
    run: &Run,
    latest_checkpoint: Option<&Checkpoint>,
    cmd: &ConfirmResumed,
) -> Confirmation {
    let expected = expected_hashes(run);
    let mut mismatches = Vec::new();
    if cmd.resolved_spec_hash != expected.resolved_spec_hash {
        mismatches.push("resolved_spec_hash differs from the run's");
    }
    if latest_checkpoint.is_some_and(|c| c.resolved_spec_hash != cmd.resolved_spec_hash) {
        mismatches.push("resolved_spec_hash differs from the checkpoint's");
    }
    if expected.spec_hash.is_some() && cmd.spec_hash != expected.spec_hash {
        mismatches.push("spec_hash is missing or differs from the sandbox spec's");
    }
    if expected.policy_hash.is_some() && cmd.policy_hash != expected.policy_hash {
        mismatches.push("policy_hash is missing or differs from the sandbox spec's");
    }
    if mismatches.is_empty() {
        return Confirmation::Resumed;
    }
    let message = format!(
        "the run was failed because its policy is stale: {}",
        mismatches.join("; ")
    );
    let error = json!({ "code": "sandbox.policy_stale", "message": message });
    Confirmation::PolicyStale { message, error }
}

#[cfg(test)]
#[path = "transition_tests.rs"]
mod tests;
