//! A runtime claim of a leased run: a first start, or a resume from its checkpoint.

use super::Refusal;
use crate::domain::claim::ClaimKind;
use crate::domain::run::{Run, RunEvent, RunState};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claimed {
    pub kind: ClaimKind,
    /// The run's new state, when the claim starts a queued run.
    pub start: Option<RunState>,
}

/// A run that was `queued` starts; a `running` one whose lease expired is started again
/// unless it has a checkpoint; any other (resuming, or running from a checkpoint) resumes.
pub fn decide(leased_from: RunState, run: &Run, has_checkpoint: bool) -> Result<Claimed, Refusal> {
    Ok(match leased_from {
        RunState::Queued => Claimed {
            kind: ClaimKind::Start,
            start: Some(run.state.apply(RunEvent::Start)?),
        },
        RunState::Running if !has_checkpoint => Claimed {
            kind: ClaimKind::Start,
            start: None,
        },
        _ => Claimed {
            kind: ClaimKind::Resume,
            start: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::decide::fixtures::run;

    const RESUME: Claimed = Claimed {
        kind: ClaimKind::Resume,
        start: None,
    };

    #[test]
    fn a_queued_run_starts() {
        assert_eq!(
            decide(RunState::Queued, &run(RunState::Queued), false),
            Ok(Claimed {
                kind: ClaimKind::Start,
                start: Some(RunState::Running),
            })
        );
        let refused = decide(RunState::Queued, &run(RunState::Running), false);
        assert!(matches!(refused, Err(Refusal::InvalidState(e)) if e.from == RunState::Running));
    }

    #[test]
    fn a_running_run_taken_over_starts_again_unless_it_has_a_checkpoint() {
        let r = run(RunState::Running);
        assert_eq!(
            decide(RunState::Running, &r, false),
            Ok(Claimed {
                kind: ClaimKind::Start,
                start: None,
            })
        );
        assert_eq!(decide(RunState::Running, &r, true), Ok(RESUME));
    }

    #[test]
    fn a_resuming_run_resumes() {
        let r = run(RunState::Resuming);
        assert_eq!(decide(RunState::Resuming, &r, false), Ok(RESUME));
        assert_eq!(decide(RunState::Resuming, &r, true), Ok(RESUME));
    }
}
