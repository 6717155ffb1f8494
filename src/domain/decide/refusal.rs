use crate::domain::run::TransitionError;
use crate::domain::validate::ValidationError;

/// Why a rule refused a write; the store maps each to the error the API reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The thing does not exist, or is not visible to the caller.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The fencing token is stale or its lease expired.
    #[error("the lease is lost: the fencing token is stale or the lease has expired")]
    LeaseLost,
    /// The write conflicts with the current state.
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    /// A field of the command does not fit the rows it names.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The run's state machine refuses the move (`run.invalid_state`).
    #[error(transparent)]
    InvalidState(#[from] TransitionError),
}

impl Refusal {
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Refusal::Conflict {
            code,
            message: message.into(),
        }
    }
}
