//! Jobs: started only while their run runs, moved only forward; one that finishes may let
//! its run's compute go (rule 4).

use super::Refusal;
use crate::domain::commands::CreateJob;
use crate::domain::job::{ExecutionAffinity, Job, JobState, PauseBehavior};
use crate::domain::run::{Run, RunState};

/// A job to start, with its defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewJob {
    pub pause_behavior: PauseBehavior,
    pub execution_affinity: ExecutionAffinity,
}

/// A job starts only while its (fenced) run is running; it detaches and runs in the sandbox
/// unless told otherwise.
pub fn create(run: &Run, cmd: &CreateJob) -> Result<NewJob, Refusal> {
    if run.state != RunState::Running {
        return Err(Refusal::conflict(
            "run.invalid_state",
            format!(
                "jobs start only while the run is running; it is {}",
                run.state
            ),
        ));
    }
    Ok(NewJob {
        pause_behavior: cmd.pause_behavior.unwrap_or(PauseBehavior::Detach),
        execution_affinity: cmd.execution_affinity.unwrap_or(ExecutionAffinity::Sandbox),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Update {
    /// The job is already in that state: answer it unchanged.
    Unchanged,
    /// The job moves; with `unblocks`, its run's `release_blocked` record is due again.
    Move { unblocks: bool },
}

/// Checks, in order: the same state again, a finished job, a backward move.
pub fn update(job: &Job, to: JobState) -> Result<Update, Refusal> {
    if job.state == to {
        return Ok(Update::Unchanged);
    }
    if job.state.is_finished() {
        return Err(Refusal::conflict(
            "job.finished",
            format!("the job is already {}", job.state),
        ));
    }
    if !job.state.can_move_to(to) {
        return Err(Refusal::conflict(
            "job.invalid_transition",
            format!("a {} job cannot become {to}", job.state),
        ));
    }
    Ok(Update::Move {
        unblocks: to.is_finished(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::decide::fixtures::{now, run};
    use crate::domain::{JobId, RunId};

    fn job(state: JobState) -> Job {
        Job {
            id: JobId::new(),
            run_id: RunId::new(),
            kind: "tool".into(),
            payload: json!({}),
            pause_behavior: PauseBehavior::Cancel,
            execution_affinity: ExecutionAffinity::External,
            state,
            created_at: now(),
            updated_at: now(),
        }
    }

    fn create_cmd(
        pause_behavior: Option<PauseBehavior>,
        execution_affinity: Option<ExecutionAffinity>,
    ) -> CreateJob {
        CreateJob {
            fencing_token: 7,
            kind: "tool".into(),
            payload: json!({}),
            pause_behavior,
            execution_affinity,
        }
    }

    #[test]
    fn a_job_starts_while_its_run_runs_with_defaults() {
        let r = run(RunState::Running);
        assert_eq!(
            create(&r, &create_cmd(None, None)),
            Ok(NewJob {
                pause_behavior: PauseBehavior::Detach,
                execution_affinity: ExecutionAffinity::Sandbox,
            })
        );
        let chosen = create_cmd(
            Some(PauseBehavior::Cancel),
            Some(ExecutionAffinity::External),
        );
        assert_eq!(
            create(&r, &chosen),
            Ok(NewJob {
                pause_behavior: PauseBehavior::Cancel,
                execution_affinity: ExecutionAffinity::External,
            })
        );
    }

    #[test]
    fn no_job_starts_while_the_run_is_not_running() {
        assert_eq!(
            create(&run(RunState::Suspended), &create_cmd(None, None)),
            Err(Refusal::conflict(
                "run.invalid_state",
                "jobs start only while the run is running; it is suspended"
            ))
        );
    }

    #[test]
    fn the_same_state_again_changes_nothing() {
        for &state in JobState::ALL {
            assert_eq!(update(&job(state), state), Ok(Update::Unchanged));
        }
    }

    #[test]
    fn a_finished_job_never_moves() {
        assert_eq!(
            update(&job(JobState::Killed), JobState::Running),
            Err(Refusal::conflict(
                "job.finished",
                "the job is already killed"
            ))
        );
    }

    #[test]
    fn a_job_does_not_move_back() {
        assert_eq!(
            update(&job(JobState::Running), JobState::Created),
            Err(Refusal::conflict(
                "job.invalid_transition",
                "a running job cannot become created"
            ))
        );
    }

    #[test]
    fn only_a_job_that_finishes_unblocks_its_run() {
        assert_eq!(
            update(&job(JobState::Created), JobState::Running),
            Ok(Update::Move { unblocks: false })
        );
        assert_eq!(
            update(&job(JobState::Running), JobState::Orphaned),
            Ok(Update::Move { unblocks: false })
        );
        for to in [JobState::Completed, JobState::Failed, JobState::Killed] {
            assert_eq!(
                update(&job(JobState::Orphaned), to),
                Ok(Update::Move { unblocks: true })
            );
        }
    }
}
