//! The error codes of plugin API v3 that carry a sandbox's fate. A client treats only these,
//! in a v3 error body, as evidence; any other answer (an HTML page, a bare status, a body of
//! another shape) says nothing about the sandbox.

use crate::wire::ProviderError;

/// 404: the provider knows no such sandbox.
pub const SANDBOX_NOT_FOUND: &str = "sandbox.not_found";
/// 404: the provider knows no such checkpoint.
pub const CHECKPOINT_NOT_FOUND: &str = "checkpoint.not_found";
/// 409 to a release: the sandbox is terminated and no release under this key was done, so
/// the disposition asked for (a snapshot) is impossible.
pub const SANDBOX_TERMINATED: &str = "sandbox.terminated";
/// 500: the sandbox's processes are gone; only `terminate` applies.
pub const SANDBOX_LOST: &str = "sandbox.lost";
/// 500: the sandbox's processes could not be killed.
pub const SANDBOX_KILL_FAILED: &str = "sandbox.kill_failed";
/// 500: the checkpoint's archive is gone.
pub const CHECKPOINT_MISSING: &str = "checkpoint.missing";
/// 500: the checkpoint's archive does not match its digest.
pub const CHECKPOINT_CORRUPT: &str = "checkpoint.corrupt";

/// The codes that say a sandbox (or checkpoint) is broken and will not come back.
pub const TERMINAL_CODES: &[&str] = &[
    SANDBOX_LOST,
    SANDBOX_KILL_FAILED,
    CHECKPOINT_MISSING,
    CHECKPOINT_CORRUPT,
];

/// The category of every terminal error.
pub const SANDBOX_FAILURE: &str = "sandbox_failure";

/// `202 Accepted` to a release or restore: the operation runs under its key; ask again with
/// the same key after `retry_after_ms` (also sent as `Retry-After`, in seconds).
pub const OPERATION_IN_PROGRESS: &str = "operation.in_progress";

/// Whether `error` is a provider's word that the sandbox (or checkpoint) is broken for good:
/// not retryable, with a terminal code or the terminal category.
pub fn is_terminal(error: &ProviderError) -> bool {
    !error.retryable
        && (TERMINAL_CODES.contains(&error.code.as_str()) || error.category == SANDBOX_FAILURE)
}

/// Whether `error` is the provider's word that it knows no such sandbox.
pub fn is_sandbox_not_found(error: &ProviderError) -> bool {
    error.code == SANDBOX_NOT_FOUND
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(code: &str, category: &str, retryable: bool) -> ProviderError {
        ProviderError {
            code: code.into(),
            category: category.into(),
            message: String::new(),
            retryable,
        }
    }

    #[test]
    fn terminal_needs_the_word_and_no_retry() {
        assert!(is_terminal(&err(SANDBOX_LOST, "x", false)));
        assert!(is_terminal(&err("vendor.vm_gone", SANDBOX_FAILURE, false)));
        assert!(!is_terminal(&err(SANDBOX_LOST, SANDBOX_FAILURE, true)));
        assert!(!is_terminal(&err("provider.internal", "internal", false)));
        assert!(is_sandbox_not_found(&err(
            SANDBOX_NOT_FOUND,
            "not_found",
            false
        )));
        assert!(!is_sandbox_not_found(&err(
            "route.not_found",
            "not_found",
            false
        )));
    }
}
