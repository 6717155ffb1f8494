//! Runs and their state machine (the agent-loop side; compute has its own record).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{RunId, SessionId};
use sagents_text_enum::text_enum;

text_enum! {
    /// Internal run state.
    pub enum RunState as "run state" {
        Queued => "queued",
        Running => "running",
        SuspendRequested => "suspend_requested",
        Suspended => "suspended",
        Resuming => "resuming",
        Completed => "completed",
        Failed => "failed",
        Cancelled => "cancelled",
    }
}

text_enum! {
    /// The word a frontend shows for a run.
    pub enum RunStatus as "run status" {
        Queued => "queued",
        Running => "running",
        WaitingForInput => "waiting_for_input",
        Resuming => "resuming",
        Completed => "completed",
        Failed => "failed",
        Cancelled => "cancelled",
    }
}

/// What moves a run from one state to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEvent {
    /// A runtime worker claimed a queued run (`start`).
    Start,
    /// The runtime committed a suspension with its checkpoint.
    Suspend,
    /// A human replied (or an explicit resume).
    Resume,
    /// The runtime confirmed it continues the agent loop after resume.
    Resumed,
    Complete,
    Fail,
    Cancel,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a run in state `{from}` cannot {event}")]
pub struct TransitionError {
    pub from: RunState,
    pub event: &'static str,
}

impl RunEvent {
    fn verb(self) -> &'static str {
        match self {
            RunEvent::Start => "start",
            RunEvent::Suspend => "suspend",
            RunEvent::Resume => "resume",
            RunEvent::Resumed => "be confirmed resumed",
            RunEvent::Complete => "complete",
            RunEvent::Fail => "fail",
            RunEvent::Cancel => "be cancelled",
        }
    }
}

impl RunState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Completed | RunState::Failed | RunState::Cancelled
        )
    }

    /// The run state machine as a pure function.
    pub fn apply(self, event: RunEvent) -> Result<RunState, TransitionError> {
        use RunEvent as E;
        use RunState as S;
        let next = match (self, event) {
            (S::Queued, E::Start) => S::Running,
            (S::Running | S::SuspendRequested, E::Suspend) => S::Suspended,
            (S::Suspended | S::SuspendRequested, E::Resume) => S::Resuming,
            (S::Resuming, E::Resumed) => S::Running,
            (S::Running, E::Complete) => S::Completed,
            (s, E::Fail) if !s.is_terminal() => S::Failed,
            (s, E::Cancel) if !s.is_terminal() => S::Cancelled,
            (from, event) => {
                return Err(TransitionError {
                    from,
                    event: event.verb(),
                })
            }
        };
        Ok(next)
    }

    pub fn status(self) -> RunStatus {
        match self {
            RunState::Queued => RunStatus::Queued,
            RunState::Running => RunStatus::Running,
            RunState::SuspendRequested | RunState::Suspended => RunStatus::WaitingForInput,
            RunState::Resuming => RunStatus::Resuming,
            RunState::Completed => RunStatus::Completed,
            RunState::Failed => RunStatus::Failed,
            RunState::Cancelled => RunStatus::Cancelled,
        }
    }
}

/// A run as the runtime API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Run {
    pub id: RunId,
    pub session_id: SessionId,
    pub parent_run_id: Option<RunId>,
    pub state: RunState,
    pub resolved_spec_hash: String,
    #[schema(value_type = Option<crate::domain::sandbox::ResolvedSandboxSpec>)]
    pub sandbox_spec: Option<serde_json::Value>,
    #[schema(value_type = Object)]
    pub input: serde_json::Value,
    #[schema(value_type = Option<Object>)]
    pub output: Option<serde_json::Value>,
    #[schema(value_type = Option<Object>)]
    pub error: Option<serde_json::Value>,
    pub revision: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The lease on a run as its runtime may read it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LeaseHolder {
    /// The `worker_id` the lease was granted to.
    pub worker_id: String,
    pub expires_at: DateTime<Utc>,
}

/// `GET /v1/runs/{run_id}`: what a runtime that lost an answer needs to know where it stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunReadBack {
    pub run: Run,
    /// The live lease, if any (none once it expired or was handed back).
    pub lease: Option<LeaseHolder>,
    /// The run's latest suspension, whatever its status.
    pub latest_suspension_id: Option<super::SuspensionId>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use RunEvent as E;
    use RunState as S;

    const EVENTS: [RunEvent; 7] = [
        E::Start,
        E::Suspend,
        E::Resume,
        E::Resumed,
        E::Complete,
        E::Fail,
        E::Cancel,
    ];

    #[test]
    fn every_allowed_transition() {
        let allowed = [
            (S::Queued, E::Start, S::Running),
            (S::Running, E::Suspend, S::Suspended),
            (S::SuspendRequested, E::Suspend, S::Suspended),
            (S::Suspended, E::Resume, S::Resuming),
            (S::SuspendRequested, E::Resume, S::Resuming),
            (S::Resuming, E::Resumed, S::Running),
            (S::Running, E::Complete, S::Completed),
        ];
        for (from, event, to) in allowed {
            assert_eq!(from.apply(event), Ok(to), "{from} {event:?}");
        }
        for from in RunState::ALL.iter().copied().filter(|s| !s.is_terminal()) {
            assert_eq!(from.apply(E::Fail), Ok(S::Failed));
            assert_eq!(from.apply(E::Cancel), Ok(S::Cancelled));
        }
    }

    #[test]
    fn every_other_transition_is_forbidden() {
        for &from in RunState::ALL {
            for event in EVENTS {
                let allowed = match (from, event) {
                    (_, E::Fail | E::Cancel) => !from.is_terminal(),
                    (S::Queued, E::Start)
                    | (S::Running | S::SuspendRequested, E::Suspend)
                    | (S::Suspended | S::SuspendRequested, E::Resume)
                    | (S::Resuming, E::Resumed)
                    | (S::Running, E::Complete) => true,
                    _ => false,
                };
                assert_eq!(from.apply(event).is_ok(), allowed, "{from} {event:?}");
            }
        }
    }

    #[test]
    fn suspended_states_show_as_waiting_for_input() {
        assert_eq!(S::Suspended.status(), RunStatus::WaitingForInput);
        assert_eq!(S::SuspendRequested.status(), RunStatus::WaitingForInput);
        assert_eq!(S::Resuming.status(), RunStatus::Resuming);
        assert_eq!(
            "waiting_for_input".parse::<RunStatus>(),
            Ok(RunStatus::WaitingForInput)
        );
        assert!("paused".parse::<RunState>().is_err());
    }
}
