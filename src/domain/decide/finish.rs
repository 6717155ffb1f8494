//! The end of a run (rule 12): completed or failed by its runtime, cancelled, expired or
//! failed by its compute. What ends with it: its pending interactions, its open suspension,
//! its lease; its execution resource becomes due (no compute outlives its run).

use serde_json::Value;

use super::Refusal;
use crate::domain::interaction::{InteractionStatus, SuspensionStatus};
use crate::domain::run::{Run, RunEvent, RunState};

/// A run that ends cancels its interactions in this status.
pub const CANCELLED_INTERACTIONS: InteractionStatus = InteractionStatus::Pending;

/// A run that ends cancels its suspensions in these statuses (the open one).
pub const CANCELLED_SUSPENSIONS: [SuspensionStatus; 2] =
    [SuspensionStatus::Pending, SuspensionStatus::Resolving];

/// The runtime completes a running run.
pub fn complete(run: &Run) -> Result<RunState, Refusal> {
    Ok(run.state.apply(RunEvent::Complete)?)
}

/// The runtime fails a run not yet ended.
pub fn fail(run: &Run) -> Result<RunState, Refusal> {
    Ok(run.state.apply(RunEvent::Fail)?)
}

/// The session-log event of a run that ends in `to`.
pub fn ended_event(to: RunState) -> &'static str {
    match to {
        RunState::Completed => "run.completed",
        RunState::Cancelled => "run.cancelled",
        _ => "run.failed",
    }
}

/// The `code` of an error a run ends with, when it has a text one: the ended event carries it.
pub fn error_code(error: &Value) -> Option<&Value> {
    error.get("code").filter(|c| c.is_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::decide::fixtures::run;

    #[test]
    fn only_a_running_run_completes() {
        for &state in RunState::ALL {
            let decided = complete(&run(state));
            if state == RunState::Running {
                assert_eq!(decided, Ok(RunState::Completed));
            } else {
                assert!(matches!(decided, Err(Refusal::InvalidState(e)) if e.from == state));
            }
        }
    }

    #[test]
    fn any_run_not_yet_ended_fails() {
        for &state in RunState::ALL {
            let decided = fail(&run(state));
            if state.is_terminal() {
                assert!(matches!(decided, Err(Refusal::InvalidState(e)) if e.from == state));
            } else {
                assert_eq!(decided, Ok(RunState::Failed));
            }
        }
    }

    #[test]
    fn an_ended_run_closes_what_it_left_open() {
        assert_eq!(CANCELLED_INTERACTIONS.as_str(), "pending");
        let open: Vec<&str> = CANCELLED_SUSPENSIONS.iter().map(|s| s.as_str()).collect();
        assert_eq!(open, ["pending", "resolving"]);
    }

    #[test]
    fn each_end_has_its_event_and_a_text_code_is_carried() {
        assert_eq!(ended_event(RunState::Completed), "run.completed");
        assert_eq!(ended_event(RunState::Cancelled), "run.cancelled");
        assert_eq!(ended_event(RunState::Failed), "run.failed");
        assert_eq!(error_code(&json!({"code": "x.y"})), Some(&json!("x.y")));
        assert_eq!(error_code(&json!({"code": 3})), None);
        assert_eq!(error_code(&json!({})), None);
    }
}
