use crate::domain::validate::ValidationError;

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
