//! Background jobs started by tool calls.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{JobId, RunId};
use sagents_text_enum::text_enum;

text_enum! {
    pub enum PauseBehavior as "pause behavior" {
        Continue => "continue",
        Detach => "detach",
        Cancel => "cancel",
    }
}

text_enum! {
    pub enum ExecutionAffinity as "execution affinity" {
        Sandbox => "sandbox",
        External => "external",
    }
}

text_enum! {
    pub enum JobState as "job state" {
        Created => "created",
        Running => "running",
        Completed => "completed",
        Failed => "failed",
        Killed => "killed",
        Orphaned => "orphaned",
    }
}

impl JobState {
    /// `orphaned` counts as still running.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Failed | JobState::Killed
        )
    }

    /// Jobs only move forward; a finished job never changes again.
    pub fn can_move_to(self, next: JobState) -> bool {
        use JobState as J;
        match (self, next) {
            (from, _) if from.is_finished() => false,
            (from, to) if from == to => true,
            (J::Created, _) => true,
            (J::Running | J::Orphaned, J::Created) => false,
            (J::Running | J::Orphaned, _) => true,
            _ => false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Job {
    pub id: JobId,
    pub run_id: RunId,
    pub kind: String,
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    pub pause_behavior: PauseBehavior,
    pub execution_affinity: ExecutionAffinity,
    pub state: JobState,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orphaned_jobs_count_as_running() {
        assert!(!JobState::Orphaned.is_finished());
        assert!(!JobState::Running.is_finished());
        assert!(JobState::Killed.is_finished());
    }

    #[test]
    fn jobs_only_move_forward() {
        use JobState as J;
        assert!(J::Created.can_move_to(J::Running));
        assert!(J::Running.can_move_to(J::Completed));
        assert!(J::Running.can_move_to(J::Orphaned));
        assert!(J::Orphaned.can_move_to(J::Killed));
        assert!(!J::Running.can_move_to(J::Created));
        for &done in &[J::Completed, J::Failed, J::Killed] {
            for &next in JobState::ALL {
                assert!(!done.can_move_to(next), "{done} -> {next}");
            }
        }
    }
}
