//! A resuming run whose sandbox the provider called broken and cannot terminate: the human
//! is told instead of waiting on a terminate that keeps failing; the terminate goes on as
//! the end of the run (and reaches operators if it never succeeds).

use crate::domain::resource::{ExecutionResourceRecord, RunEffect};
use crate::domain::sandbox::{ProviderError, ReleaseDisposition};
use crate::providers::codes;

use super::Next;

/// Terminal answers to a terminate in a row (the attempt count) before the run is told.
pub const BROKEN_TERMINATE_ATTEMPTS: i64 = 3;

/// The provider's terminal word as a record keeps it (not retryable, a terminal code or
/// category of plugin API v3).
pub fn is_terminal_word(e: &ProviderError) -> bool {
    !e.retryable
        && (codes::TERMINAL_CODES.contains(&e.code.as_str())
            || e.category == codes::SANDBOX_FAILURE)
}

/// The record with the provider's terminal word of `result` as its error, so a release
/// settled by an inspect after it still says why its snapshot was lost.
pub fn with_terminal_word<T>(
    mut record: ExecutionResourceRecord,
    result: &Result<T, crate::providers::client::ProviderCallError>,
) -> ExecutionResourceRecord {
    if let Err(e) = result {
        let word = e.to_provider_error();
        if is_terminal_word(&word) {
            record.error = Some(word);
        }
    }
    record
}

/// For a resuming run whose sandbox is not running: when its terminate has failed at least
/// [`BROKEN_TERMINATE_ATTEMPTS`] times and last with the provider's terminal word, and no
/// checkpoint could bring the run back, the run fails with that word.
pub fn broken_while_resuming(record: &ExecutionResourceRecord) -> Option<Next> {
    let error = record.error.as_ref()?;
    let restorable = record.sandbox_checkpoint.is_some() && !record.checkpoint_lost;
    if record.disposition != Some(ReleaseDisposition::Terminate)
        || restorable
        || record.retry_count < BROKEN_TERMINATE_ATTEMPTS
        || !is_terminal_word(error)
    {
        return None;
    }
    let message = format!(
        "the provider reported the sandbox broken and could not terminate it ({}: {}); the run \
         cannot resume",
        error.code, error.message
    );
    Some(Next {
        record: record.clone(),
        effect: RunEffect::Fail {
            code: error.code.clone(),
            message,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::resource::ResourceState;
    use crate::lifecycle::outcome::tests::record;

    fn kill_failed() -> ProviderError {
        ProviderError {
            code: "sandbox.kill_failed".into(),
            category: "sandbox_failure".into(),
            message: "the sandbox's process group did not die after SIGKILL".into(),
            retryable: false,
        }
    }

    fn failing(attempts: i64, error: ProviderError) -> ExecutionResourceRecord {
        let mut r = record(ResourceState::ReleaseFailed);
        r.disposition = Some(ReleaseDisposition::Terminate);
        r.retry_count = attempts;
        r.error = Some(error);
        r
    }

    #[test]
    fn a_terminate_the_provider_keeps_calling_broken_fails_the_resuming_run_with_its_word() {
        let next = broken_while_resuming(&failing(3, kill_failed())).unwrap();
        match next.effect {
            RunEffect::Fail { code, message } => {
                assert_eq!(code, "sandbox.kill_failed");
                assert!(message.contains("did not die"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            next.record.state,
            ResourceState::ReleaseFailed,
            "still released"
        );
    }

    #[test]
    fn a_release_settled_by_an_inspect_after_a_terminal_word_keeps_that_word() {
        use crate::domain::resource::ReleasePurpose;
        use crate::providers::client::ProviderCallError;
        let mut r = record(ResourceState::ReleaseRequested);
        r.disposition = Some(ReleaseDisposition::SnapshotAndTerminate);
        r.release_purpose = Some(ReleasePurpose::Suspend);
        let lost = ProviderCallError::Terminal {
            status: 500,
            error: sagents_plugin_api::wire::ProviderError {
                code: "sandbox.lost".into(),
                category: "sandbox_failure".into(),
                message: "snapshot failed and the sandbox could not be resumed".into(),
                retryable: false,
            },
        };
        let result: Result<(), _> = Err(lost);
        let settled = crate::lifecycle::outcome::release_confirmed_by_inspect(
            with_terminal_word(r, &result),
            "inspect reports the sandbox terminated",
            None,
            chrono::Utc::now(),
        )
        .unwrap();
        assert!(settled.checkpoint_lost);
        let error = settled.error.unwrap();
        assert_eq!(error.code, "sandbox.lost", "the provider's word stays");
        assert!(
            error.message.contains("released on inspect"),
            "{}",
            error.message
        );
    }

    #[test]
    fn a_first_terminal_word_a_retryable_error_or_a_checkpoint_keeps_the_run_waiting() {
        assert!(broken_while_resuming(&failing(2, kill_failed())).is_none());
        let busy = ProviderError {
            retryable: true,
            ..kill_failed()
        };
        assert!(broken_while_resuming(&failing(5, busy)).is_none());
        let mut snapshot = failing(5, kill_failed());
        snapshot.disposition = Some(ReleaseDisposition::SnapshotAndTerminate);
        assert!(broken_while_resuming(&snapshot).is_none());
    }
}
