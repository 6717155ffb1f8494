use crate::domain::decide::Refusal;
use crate::domain::sandbox::SpecError;
use crate::domain::validate::ValidationError;

pub type StoreResult<T> = Result<T, StoreError>;

/// Typed store failures; the HTTP layer maps each to one status and problem code.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The thing does not exist, or is not visible to the caller's tenant.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The fencing token is stale or its lease expired; nothing was written.
    #[error("the lease is lost: the fencing token is stale or the lease has expired")]
    LeaseLost,
    /// The request is valid but conflicts with the current state (HTTP 409).
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    /// The execution-resource record moved on since it was read (compare-and-set failed).
    #[error("the execution resource is at version {current}, not {expected}")]
    VersionConflict { current: i64, expected: i64 },
    /// The sandbox spec is of a version this service does not speak (HTTP 422).
    #[error("{0}")]
    SpecUnsupported(String),
    /// A field refers to something that does not fit (HTTP 422 naming the field).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The run's hashes did not match what was bound; the run has been failed.
    #[error("{0}")]
    PolicyStale(String),
    /// The database is unreachable or busy (HTTP 503).
    #[error("database unavailable: {0}")]
    Unavailable(String),
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl StoreError {
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        StoreError::Conflict {
            code,
            message: message.into(),
        }
    }
}

impl From<SpecError> for StoreError {
    fn from(e: SpecError) -> Self {
        match e {
            SpecError::Unsupported(_) => StoreError::SpecUnsupported(e.to_string()),
            SpecError::Invalid(v) => StoreError::Invalid(v),
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        map_sqlx(e)
    }
}

/// The one place that decides what a database failure means to a caller.
pub(in crate::store) fn map_sqlx(e: sqlx::Error) -> StoreError {
    match e {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_) => StoreError::Unavailable(e.to_string()),
        sqlx::Error::Database(db) => {
            let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
            if is_transient(&code) {
                StoreError::Unavailable(db.message().to_owned())
            } else if db.is_unique_violation() {
                StoreError::conflict(unique_code(db.constraint(), db.message()), db.message())
            } else {
                StoreError::Database(sqlx::Error::Database(db))
            }
        }
        other => StoreError::Database(other),
    }
}

/// SQLite BUSY/LOCKED (any extended code) and PostgreSQL connection, resource, shutdown,
/// serialization and deadlock classes: retrying later may succeed.
fn is_transient(code: &str) -> bool {
    // PostgreSQL SQLSTATEs have five characters; SQLite result codes are shorter numbers.
    if code.len() == 5 {
        return matches!(
            code,
            "40001" | "40P01" | "55P03" | "57P01" | "57P02" | "57P03"
        ) || code.starts_with("08")
            || code.starts_with("53");
    }
    code.parse::<i64>().is_ok_and(|n| matches!(n & 0xff, 5 | 6))
}

fn unique_code(constraint: Option<&str>, message: &str) -> &'static str {
    let names = format!("{} {message}", constraint.unwrap_or_default());
    if names.contains("checkpoints") {
        "checkpoint.sequence"
    } else {
        "resource.duplicate"
    }
}

impl From<Refusal> for StoreError {
    /// Each refusal as the store reported it before its rule moved to the domain.
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::NotFound(what) => StoreError::NotFound(what),
            Refusal::LeaseLost => StoreError::LeaseLost,
            Refusal::Conflict { code, message } => StoreError::Conflict { code, message },
            Refusal::Invalid(v) => StoreError::Invalid(v),
            Refusal::InvalidState(e) => StoreError::conflict("run.invalid_state", e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_codes() {
        assert!(is_transient("5"));
        assert!(is_transient("517"));
        assert!(is_transient("6"));
        assert!(is_transient("40P01"));
        assert!(is_transient("08006"));
        assert!(is_transient("53300"));
        assert!(!is_transient("19"));
        assert!(!is_transient("2067"));
        assert!(!is_transient("23505"));
        assert!(!is_transient("22005"));
        assert!(!is_transient(""));
    }

    #[test]
    fn unique_violations_get_a_specific_code() {
        assert_eq!(
            unique_code(
                None,
                "UNIQUE constraint failed: checkpoints.run_id, checkpoints.sequence"
            ),
            "checkpoint.sequence"
        );
        assert_eq!(
            unique_code(Some("checkpoints_run_sequence"), "duplicate key"),
            "checkpoint.sequence"
        );
        assert_eq!(
            unique_code(Some("tokens_pkey"), "duplicate key"),
            "resource.duplicate"
        );
        assert!(matches!(
            map_sqlx(sqlx::Error::PoolTimedOut),
            StoreError::Unavailable(_)
        ));
        assert!(matches!(
            map_sqlx(sqlx::Error::RowNotFound),
            StoreError::Database(_)
        ));
    }

    #[test]
    fn refusals_keep_their_store_errors() {
        use crate::domain::run::{RunEvent, RunState};
        assert!(matches!(
            StoreError::from(Refusal::NotFound("run")),
            StoreError::NotFound("run")
        ));
        assert!(matches!(
            StoreError::from(Refusal::LeaseLost),
            StoreError::LeaseLost
        ));
        assert!(matches!(
            StoreError::from(Refusal::conflict("job.finished", "m")),
            StoreError::Conflict { code: "job.finished", message } if message == "m"
        ));
        let invalid = ValidationError::new("decision", "m");
        assert!(matches!(
            StoreError::from(Refusal::Invalid(invalid.clone())),
            StoreError::Invalid(v) if v == invalid
        ));
        let refused = RunState::Completed.apply(RunEvent::Resume).err();
        let Some(e) = refused else {
            panic!("a completed run resumed");
        };
        assert!(matches!(
            StoreError::from(Refusal::InvalidState(e.clone())),
            StoreError::Conflict { code: "run.invalid_state", message } if message == e.to_string()
        ));
    }
}
