//! A suspension with its checkpoint (rule 3), and which jobs it kills.

use chrono::{DateTime, Utc};

use super::Refusal;
use crate::domain::claim::LeaseState;
use crate::domain::commands::SuspendRun;
use crate::domain::job::{JobState, PauseBehavior};
use crate::domain::run::{Run, RunEvent, RunState};
use crate::domain::validate::ValidationError;

/// The rows a suspension reads: the run and its lease (locked), and the sequence of its
/// last checkpoint, if it has one.
#[derive(Debug, Clone, Copy)]
pub struct Found<'a> {
    pub run: &'a Run,
    pub lease: &'a LeaseState,
    pub last_sequence: Option<i64>,
}

/// Checks, in order: the fence, the run's `Suspend`, the checkpoint's hash, its sequence.
/// The run's state after the suspension.
pub fn decide(found: Found<'_>, cmd: &SuspendRun, now: DateTime<Utc>) -> Result<RunState, Refusal> {
    found
        .lease
        .check(cmd.fencing_token, now)
        .map_err(|_| Refusal::LeaseLost)?;
    let to = found.run.state.apply(RunEvent::Suspend)?;
    if cmd.checkpoint.resolved_spec_hash != found.run.resolved_spec_hash {
        return Err(ValidationError::new(
            "checkpoint.resolved_spec_hash",
            "must equal the run's resolved_spec_hash",
        )
        .into());
    }
    if let Some(last) = found.last_sequence {
        if cmd.checkpoint.sequence <= last {
            return Err(Refusal::conflict(
                "checkpoint.sequence",
                format!(
                    "checkpoint sequence {} must be greater than the last one ({last})",
                    cmd.checkpoint.sequence
                ),
            ));
        }
    }
    Ok(to)
}

/// The pause behaviour of the jobs a suspension kills.
pub const KILLED_ON_SUSPEND: PauseBehavior = PauseBehavior::Cancel;

/// A suspension kills the run's unfinished jobs whose pause behaviour is `cancel`.
pub fn kills(pause_behavior: PauseBehavior, state: JobState) -> bool {
    pause_behavior == KILLED_ON_SUSPEND && !state.is_finished()
}

/// The job states a suspension kills from, in `JobState::ALL` order.
pub fn killed_states() -> impl Iterator<Item = JobState> {
    JobState::ALL
        .iter()
        .copied()
        .filter(|s| kills(KILLED_ON_SUSPEND, *s))
}

#[cfg(test)]
mod tests {
    use chrono::Duration;
    use serde_json::json;

    use super::*;
    use crate::domain::commands::NewCheckpoint;
    use crate::domain::decide::fixtures::{hash, now, run};
    use crate::domain::interaction::SuspensionReason;

    fn lease(token: i64) -> LeaseState {
        LeaseState {
            lease_id: Some("lea_x".into()),
            fencing_token: Some(token),
            expires_at: Some(now() + Duration::seconds(30)),
        }
    }

    fn cmd(token: i64, sequence: i64, resolved_spec_hash: String) -> SuspendRun {
        SuspendRun {
            fencing_token: token,
            reason: SuspensionReason::ApprovalRequired,
            checkpoint: NewCheckpoint {
                codec_version: "v1".into(),
                sequence,
                state: json!({}),
                resolved_spec_hash,
            },
            interaction: None,
        }
    }

    fn ask(state: RunState, last: Option<i64>, cmd: &SuspendRun) -> Result<RunState, Refusal> {
        let (r, l) = (run(state), lease(7));
        let found = Found {
            run: &r,
            lease: &l,
            last_sequence: last,
        };
        decide(found, cmd, now())
    }

    #[test]
    fn a_running_run_with_a_newer_checkpoint_is_suspended() {
        let ok = cmd(7, 2, hash('a'));
        assert_eq!(ask(RunState::Running, None, &ok), Ok(RunState::Suspended));
        assert_eq!(
            ask(RunState::Running, Some(1), &ok),
            Ok(RunState::Suspended)
        );
        assert_eq!(
            ask(RunState::SuspendRequested, Some(1), &ok),
            Ok(RunState::Suspended)
        );
    }

    #[test]
    fn a_stale_token_or_an_expired_lease_is_lost() {
        assert_eq!(
            ask(RunState::Running, None, &cmd(6, 0, hash('a'))),
            Err(Refusal::LeaseLost)
        );
        let (r, l) = (run(RunState::Running), lease(7));
        let found = Found {
            run: &r,
            lease: &l,
            last_sequence: None,
        };
        let later = now() + Duration::seconds(30);
        assert_eq!(
            decide(found, &cmd(7, 0, hash('a')), later),
            Err(Refusal::LeaseLost)
        );
    }

    #[test]
    fn only_a_running_run_suspends() {
        let refused = ask(RunState::Suspended, None, &cmd(7, 0, hash('a')));
        assert!(matches!(refused, Err(Refusal::InvalidState(e)) if e.from == RunState::Suspended));
    }

    #[test]
    fn the_checkpoint_must_carry_the_runs_hash() {
        assert_eq!(
            ask(RunState::Running, None, &cmd(7, 0, hash('b'))),
            Err(Refusal::Invalid(ValidationError::new(
                "checkpoint.resolved_spec_hash",
                "must equal the run's resolved_spec_hash"
            )))
        );
    }

    #[test]
    fn the_sequence_must_grow() {
        assert_eq!(
            ask(RunState::Running, Some(2), &cmd(7, 2, hash('a'))),
            Err(Refusal::conflict(
                "checkpoint.sequence",
                "checkpoint sequence 2 must be greater than the last one (2)"
            ))
        );
    }

    #[test]
    fn the_first_failing_check_decides() {
        let worst = cmd(6, 0, hash('b'));
        assert_eq!(
            ask(RunState::Failed, Some(5), &worst),
            Err(Refusal::LeaseLost)
        );
        let bad = cmd(7, 0, hash('b'));
        assert!(matches!(
            ask(RunState::Failed, Some(5), &bad),
            Err(Refusal::InvalidState(_))
        ));
        assert!(matches!(
            ask(RunState::Running, Some(5), &bad),
            Err(Refusal::Invalid(_))
        ));
    }

    #[test]
    fn a_suspension_kills_only_unfinished_cancel_jobs() {
        for &state in JobState::ALL {
            for &behavior in PauseBehavior::ALL {
                let killed = behavior == PauseBehavior::Cancel
                    && matches!(
                        state,
                        JobState::Created | JobState::Running | JobState::Orphaned
                    );
                assert_eq!(kills(behavior, state), killed, "{behavior} {state}");
            }
        }
        let states: Vec<&str> = killed_states().map(JobState::as_str).collect();
        assert_eq!(states, ["created", "running", "orphaned"]);
    }
}
