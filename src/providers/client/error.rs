//! How a provider call failed, and what that says about its side effect.

use std::time::Duration;

use crate::domain::sandbox::ProviderError as StoredError;
use crate::providers::wire::ProviderError;

/// What the call could not be sure of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UncertainKind {
    Timeout,
    ConnectionLost,
    MalformedBody,
    OversizedBody,
    InconsistentReceipt,
    Redirect,
    /// An error status without a v3 error body (an ingress's HTML page, a bare status, JSON of
    /// another shape): whatever answered, it was not the provider speaking plugin API v3.
    NotProviderAnswer {
        status: u16,
    },
    /// A v3 error body, not retryable, whose code is not one plugin API v3 calls terminal.
    UnknownError {
        status: u16,
    },
    /// The pages of a listing do not form one walk (a cursor came back, or it never ends).
    InconsistentPaging,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderCallError {
    /// The provider answered `retryable: true`: the sandbox is usable again; retry later.
    #[error("provider error {status} (recoverable) {}: {}", .error.code, .error.message)]
    Recoverable { status: u16, error: ProviderError },
    /// The provider answered `retryable: false` with a terminal code of plugin API v3
    /// (`codes::is_terminal`): the sandbox is broken.
    #[error("provider error {status} (terminal) {}: {}", .error.code, .error.message)]
    Terminal { status: u16, error: ProviderError },
    /// The provider refused the request as invalid (4xx with a v3 error body, not retryable):
    /// nothing was done.
    #[error("provider refused the request ({status}) {}: {}", .error.code, .error.message)]
    Refused { status: u16, error: ProviderError },
    /// The side effect may or may not have happened: retry with the same idempotency key.
    #[error("uncertain outcome ({kind:?}): {message}")]
    Uncertain {
        kind: UncertainKind,
        message: String,
    },
    /// The provider runs the operation under its key and has not finished (`202`): ask again
    /// with the same key after `retry_after`. Not a failure.
    #[error("the provider's {operation} is still in progress; ask again in {retry_after:?}")]
    InProgress {
        operation: String,
        retry_after: Duration,
    },
    /// No connection could be made, so nothing was sent.
    #[error("provider unreachable: {0}")]
    Unreachable(String),
    /// The client itself could not be built or the URL is unusable.
    #[error("invalid provider client configuration: {0}")]
    Config(String),
}

/// The stored code of a call that ran out of time before any answer came.
pub const TIMED_OUT: &str = "provider.timeout";

impl ProviderCallError {
    /// The error as the `{code, category, message, retryable}` shape records keep.
    pub fn to_provider_error(&self) -> StoredError {
        match self {
            ProviderCallError::Recoverable { error, .. }
            | ProviderCallError::Terminal { error, .. }
            | ProviderCallError::Refused { error, .. } => error.clone().into(),
            ProviderCallError::Uncertain { kind, message } => StoredError {
                code: match kind {
                    UncertainKind::Timeout => TIMED_OUT,
                    UncertainKind::ConnectionLost => "provider.connection_lost",
                    UncertainKind::MalformedBody => "provider.malformed_response",
                    UncertainKind::OversizedBody => "provider.oversized_response",
                    UncertainKind::InconsistentReceipt => "provider.inconsistent_receipt",
                    UncertainKind::Redirect => "provider.redirect",
                    UncertainKind::NotProviderAnswer { .. } => "provider.not_a_provider_answer",
                    UncertainKind::UnknownError { .. } => "provider.unknown_error",
                    UncertainKind::InconsistentPaging => "provider.inconsistent_paging",
                }
                .into(),
                category: StoredError::UNCERTAIN.into(),
                message: message.clone(),
                retryable: true,
            },
            ProviderCallError::InProgress {
                operation,
                retry_after,
            } => StoredError {
                code: crate::providers::codes::OPERATION_IN_PROGRESS.into(),
                category: "in_progress".into(),
                message: format!(
                    "the {operation} is still in progress; asked again in {} ms",
                    retry_after.as_millis()
                ),
                retryable: true,
            },
            ProviderCallError::Unreachable(message) => StoredError {
                code: "provider.unreachable".into(),
                category: "unavailable".into(),
                message: message.clone(),
                retryable: true,
            },
            ProviderCallError::Config(message) => StoredError {
                code: "provider.misconfigured".into(),
                category: "invalid_request".into(),
                message: message.clone(),
                retryable: false,
            },
        }
    }

    pub(super) fn uncertain(kind: UncertainKind, message: impl Into<String>) -> Self {
        ProviderCallError::Uncertain {
            kind,
            message: message.into(),
        }
    }
}
