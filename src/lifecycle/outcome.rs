//! How a plan decision or a provider call's result becomes the next record (and, rarely, an
//! effect on the run). Pure: every state change goes through [`ResourceState::next`].

use chrono::{DateTime, Utc};

use super::rules::{self, Blockers, Cadence};
use crate::domain::interaction::SuspensionReason;
use crate::domain::resource::ExecutionResourceRecord;
use crate::domain::resource::ReleasePurpose;
use crate::domain::resource::RunEffect;
use crate::domain::resource::{ResourceEvent, ResourceState, ResourceTransitionError};
use crate::domain::sandbox::ProviderError;
use crate::domain::sandbox::ReleaseDisposition;
use crate::domain::SuspensionId;
use crate::providers::client::{ProviderCallError, TIMED_OUT};
use crate::providers::codes::OPERATION_IN_PROGRESS;
use crate::providers::wire::{CheckpointRef, SandboxReleaseReceipt};

mod bind;
mod broken;
mod handles;
pub use bind::{begin_bind, bind_failed, bind_idempotency_key, bind_succeeded, BindKind};
pub use broken::{
    broken_while_resuming, is_terminal_word, with_terminal_word, BROKEN_TERMINATE_ATTEMPTS,
};
pub use handles::{bind_mismatched, handle_is_own, handle_mismatch, HANDLE_MISMATCH};

pub type OutcomeResult<T> = Result<T, ResourceTransitionError>;

/// A record to write and what the same write does to the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Next {
    pub record: ExecutionResourceRecord,
    pub effect: RunEffect,
}

impl Next {
    pub fn plain(record: ExecutionResourceRecord) -> Self {
        Next {
            record,
            effect: RunEffect::None,
        }
    }
}

/// Whether retrying a failed call can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// The provider promises the sandbox is usable again, or the outcome is unknown, or the
    /// provider (or its registration) is unavailable: retry later with the same key.
    Retry,
    /// The provider refused the request itself (a 4xx that is not about authorisation):
    /// nothing was done, and nothing is known to be wrong with the sandbox. A release so
    /// refused is a configuration problem for an operator and is retried with backoff; a
    /// provision, restore or attach so refused fails the run unless a human waits on it.
    Refused,
    /// The provider says the sandbox is broken and cannot be recovered (a terminal code,
    /// `codes::is_terminal`): the only error that forces a terminate and loses a snapshot.
    Final,
}

pub fn classify(e: &ProviderCallError) -> FailureClass {
    match e {
        // Not allowed to ask (a rotated token, a proxy): nothing was done, and nothing is
        // known of the sandbox. Retried until the registration is fixed.
        ProviderCallError::Refused { status, .. } if is_auth_refusal(*status) => {
            FailureClass::Retry
        }
        ProviderCallError::Refused { .. } => FailureClass::Refused,
        ProviderCallError::Terminal { .. } => FailureClass::Final,
        ProviderCallError::Recoverable { .. }
        | ProviderCallError::Uncertain { .. }
        | ProviderCallError::InProgress { .. }
        | ProviderCallError::Unreachable(_)
        | ProviderCallError::Config(_) => FailureClass::Retry,
    }
}

/// 401, 403 and 407: the request was not authorised, so it was not acted on.
pub fn is_auth_refusal(status: u16) -> bool {
    matches!(status, 401 | 403 | 407)
}

pub const SNAPSHOT_LOST: &str = "sandbox.snapshot_lost";

/// One more failed attempt, retried after the cadence's wait. While someone waits, an
/// attempt that timed out is asked again after the cadence's first wait, whatever the streak
/// before it: its timeout kept them waiting already, and a provider still at it under the
/// same key is joined by the repeat.
fn schedule_retry(
    record: &mut ExecutionResourceRecord,
    error: ProviderError,
    now: DateTime<Utc>,
    jitter: f64,
    cadence: Cadence,
) {
    record.retry_count = record.retry_count.saturating_add(1);
    let timed_out = error.outcome_unknown() && error.code == TIMED_OUT;
    let attempts = match timed_out && cadence != Cadence::Release {
        true => 1,
        false => u32::try_from(record.retry_count).unwrap_or(u32::MAX),
    };
    record.next_retry_at = Some(retry_at(now, cadence.delay(attempts, now, jitter)));
    record.error = Some(error);
}

/// The provider still works on the operation under its key: not a failure. The state and
/// the count of attempts stay; the same key is asked again after `retry_after`, but never
/// sooner than the cadence's first wait nor than an eighth of how long the release has run
/// (a provider that answers "in progress" forever is not polled ever faster), and never
/// later than the cadence's cap.
fn wait_in_progress(
    record: &mut ExecutionResourceRecord,
    err: &ProviderCallError,
    retry_after: std::time::Duration,
    now: DateTime<Utc>,
    cadence: Cadence,
) {
    let floor = cadence.delay(1, now, 0.0);
    let patience = record
        .release_requested_at
        .and_then(|at| (now - at).to_std().ok())
        .map_or(std::time::Duration::ZERO, |ran| ran / 8);
    let wait = retry_after.max(floor).max(patience).min(cadence.cap());
    record.next_retry_at = Some(retry_at(now, wait));
    record.error = Some(err.to_provider_error());
}

/// Whether the record's last answer was the provider's word that the operation still runs.
pub fn in_progress(record: &ExecutionResourceRecord) -> bool {
    record
        .error
        .as_ref()
        .is_some_and(|e| e.code == OPERATION_IN_PROGRESS)
}

pub(super) fn retry_at(now: DateTime<Utc>, delay: std::time::Duration) -> DateTime<Utc> {
    let at = chrono::Duration::from_std(delay)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .unwrap_or(now);
    crate::clock::truncate_ms(at)
}

fn clear_retry(record: &mut ExecutionResourceRecord) {
    record.retry_count = 0;
    record.next_retry_at = None;
}

/// A resuming run whose release failed definitely: the provider answered, so the sandbox runs
/// as before (a recoverable error promises it). One write drops the release and records the
/// attach intent, so the sandbox is attached next instead of waiting out the backoff.
pub fn abandon_release(
    mut record: ExecutionResourceRecord,
) -> OutcomeResult<ExecutionResourceRecord> {
    record.state = record.state.next(ResourceEvent::ReleaseAbandoned)?;
    record.disposition = None;
    record.release_idempotency_key = None;
    record.release_purpose = None;
    record.release_requested_at = None;
    record.error = None;
    clear_retry(&mut record);
    record.bind_idempotency_key = Some(bind_idempotency_key(&record, BindKind::Attach));
    Ok(record)
}

/// A resuming run's failed release whose sandbox the provider reports not running (an earlier
/// attempt may have done it, its answer or its write lost): the outcome is unknown, so the
/// release is finished under its key before anything is attached, at once: the provider
/// answered, and a backoff from before the reply does not hold a resume.
pub fn release_unsettled(mut record: ExecutionResourceRecord) -> ExecutionResourceRecord {
    record.error = Some(ProviderError {
        code: "release.unsettled".into(),
        category: ProviderError::UNCERTAIN.into(),
        message: "the sandbox is not running; the release may have been done".into(),
        retryable: true,
    });
    record.next_retry_at = None;
    record
}

/// The `error.code` of a resuming run's failed release whose sandbox could not be inspected.
pub const INSPECT_FAILED: &str = "release.inspect_failed";

/// A resuming run's failed release whose sandbox could not be inspected (the provider down):
/// nothing is known of the sandbox, so nothing changes but the wait, which counts as an
/// attempt. The release's outcome is not made unknown by a failed read.
pub fn inspect_failed(
    mut record: ExecutionResourceRecord,
    err: &ProviderCallError,
    now: DateTime<Utc>,
    jitter: f64,
    cadence: Cadence,
) -> ExecutionResourceRecord {
    let error = ProviderError {
        code: INSPECT_FAILED.into(),
        category: "unavailable".into(),
        message: format!("the sandbox could not be inspected: {err}"),
        retryable: true,
    };
    schedule_retry(&mut record, error, now, jitter, cadence);
    record
}

/// The run ended before any provision or restore was attempted: no compute exists.
pub fn abandon(mut record: ExecutionResourceRecord) -> OutcomeResult<ExecutionResourceRecord> {
    record.state = record.state.next(ResourceEvent::Abandon)?;
    record.bind_idempotency_key = None;
    record.compute_released = false;
    clear_retry(&mut record);
    Ok(record)
}

/// Something still needs the sandbox: keep it and record what holds it.
pub fn block(
    mut record: ExecutionResourceRecord,
    disposition: ReleaseDisposition,
    blockers: &Blockers,
    suspension: Option<(&SuspensionId, SuspensionReason)>,
) -> OutcomeResult<ExecutionResourceRecord> {
    if record.state != ResourceState::ReleaseBlocked {
        record.state = record.state.next(ResourceEvent::SuspendBlocked)?;
    }
    record.disposition = Some(disposition);
    record.blocking_job_ids = blockers.job_ids.clone();
    record.blocking_child_run_ids = blockers.child_run_ids.clone();
    if let Some((id, reason)) = suspension {
        record.suspension_id = Some(id.clone());
        record.suspension_reason = Some(reason);
    }
    Ok(record)
}

/// The intent written before a release is sent: `release_requested` with its key. A release
/// re-issued over one under way keeps the time compute was first asked back.
pub fn begin_release(
    mut record: ExecutionResourceRecord,
    disposition: ReleaseDisposition,
    purpose: ReleasePurpose,
    suspension: Option<(&SuspensionId, SuspensionReason)>,
    now: DateTime<Utc>,
) -> OutcomeResult<ExecutionResourceRecord> {
    let under_way = matches!(
        record.state,
        ResourceState::ReleaseRequested
            | ResourceState::ReleaseFailed
            | ResourceState::NeedsAttention
    );
    let requested_at = record.release_requested_at.filter(|_| under_way);
    record.state = record.state.next(ResourceEvent::ReleaseDue)?;
    if let Some((id, reason)) = suspension {
        record.suspension_id = Some(id.clone());
        record.suspension_reason = Some(reason);
    }
    record.release_idempotency_key = Some(rules::release_idempotency_key(
        &record.run_id,
        record.generation,
        record.suspension_id.as_ref(),
        purpose,
    ));
    record.release_purpose = Some(purpose);
    record.disposition = Some(disposition);
    record.release_requested_at = requested_at.or(Some(now));
    record.released_at = None;
    record.compute_released = false;
    record.blocking_job_ids.clear();
    record.blocking_child_run_ids.clear();
    record.error = None;
    clear_retry(&mut record);
    Ok(record)
}

/// A receipt the client found consistent. Only `compute_released` counts as a release;
/// anything else is an attempt that failed and is retried with the same key.
pub fn release_answered(
    record: ExecutionResourceRecord,
    receipt: &SandboxReleaseReceipt,
    now: DateTime<Utc>,
    jitter: f64,
    cadence: Cadence,
) -> OutcomeResult<ExecutionResourceRecord> {
    if !receipt.compute_released {
        let error = ProviderError {
            code: "provider.compute_not_released".into(),
            category: "uncertain".into(),
            message: format!(
                "the `{}` receipt leaves the sandbox `{}`",
                receipt.disposition, receipt.state
            ),
            retryable: true,
        };
        let mut record = record;
        // A snapshot taken before a failed kill is kept: the retry finishes the kill.
        if let Some(taken) = snapshot_taken(Some(receipt)) {
            record.sandbox_checkpoint = Some(taken.into());
        }
        return release_attempt_failed(record, error, now, jitter, cadence);
    }
    let mut record = record;
    record.state = record.state.next(ResourceEvent::ReleaseConfirmed)?;
    record.compute_released = true;
    record.released_at = Some(now);
    record.sandbox_checkpoint = match receipt.disposition.into() {
        ReleaseDisposition::SnapshotAndTerminate => receipt.checkpoint.clone().map(Into::into),
        _ if keeps_checkpoint(&record) => record.sandbox_checkpoint.take(),
        _ => None,
    };
    if record.release_purpose != Some(ReleasePurpose::ForcedTerminate) {
        record.error = None;
    }
    clear_retry(&mut record);
    Ok(record)
}

/// A terminate the provider did not confirm, settled by inspecting the sandbox: the provider
/// reports it terminated or knows it no more. Released, with that evidence in `error` (after
/// the reason of a forced terminate, which stays). `compute_released` stays false: only a
/// release receipt may say so.
pub fn release_confirmed_by_inspect(
    mut record: ExecutionResourceRecord,
    evidence: &str,
    receipt: Option<&SandboxReleaseReceipt>,
    now: DateTime<Utc>,
) -> OutcomeResult<ExecutionResourceRecord> {
    record.state = record.state.next(ResourceEvent::ReleaseConfirmed)?;
    record.compute_released = false;
    record.released_at = Some(now);
    // An unconfirmed snapshot receipt may still name the checkpoint it took.
    if let Some(checkpoint) = snapshot_taken(receipt) {
        record.sandbox_checkpoint = Some(checkpoint.into());
    } else if !keeps_checkpoint(&record) {
        // A snapshot that was asked for and never taken is lost with the sandbox.
        record.checkpoint_lost |=
            record.disposition == Some(ReleaseDisposition::SnapshotAndTerminate);
        record.sandbox_checkpoint = None;
    }
    record.error = Some(match record.error.take() {
        Some(mut reason)
            if record.release_purpose == Some(ReleasePurpose::ForcedTerminate)
                || is_terminal_word(&reason) =>
        {
            reason.message = format!("{}; released on inspect: {evidence}", reason.message);
            reason
        }
        _ => ProviderError {
            code: RELEASED_ON_INSPECT.into(),
            category: "evidence".into(),
            message: evidence.into(),
            retryable: false,
        },
    });
    clear_retry(&mut record);
    Ok(record)
}

/// The checkpoint a snapshot receipt names, confirmed or not.
fn snapshot_taken(receipt: Option<&SandboxReleaseReceipt>) -> Option<CheckpointRef> {
    receipt
        .filter(|r| {
            ReleaseDisposition::from(r.disposition) == ReleaseDisposition::SnapshotAndTerminate
        })
        .and_then(|r| r.checkpoint.clone())
}

/// A terminate that is not the run's end keeps the checkpoint the record holds: one kept
/// through a reconcile, or one a snapshot took before its kill failed.
fn keeps_checkpoint(record: &ExecutionResourceRecord) -> bool {
    match record.release_purpose {
        Some(ReleasePurpose::Reconcile) => true,
        Some(ReleasePurpose::ForcedTerminate) => record.sandbox_checkpoint.is_some(),
        Some(ReleasePurpose::Suspend) => {
            record.disposition == Some(ReleaseDisposition::SnapshotAndTerminate)
                && record.sandbox_checkpoint.is_some()
        }
        _ => false,
    }
}

/// The `error.code` of a record released on the evidence of an inspect, not of a receipt.
pub const RELEASED_ON_INSPECT: &str = "release.confirmed_by_inspect";

fn release_attempt_failed(
    mut record: ExecutionResourceRecord,
    error: ProviderError,
    now: DateTime<Utc>,
    jitter: f64,
    cadence: Cadence,
) -> OutcomeResult<ExecutionResourceRecord> {
    record.state = record.state.next(ResourceEvent::ReleaseAttemptFailed)?;
    schedule_retry(&mut record, error, now, jitter, cadence);
    Ok(record)
}

/// A release call failed. A broken sandbox (a terminal error) is never left as if it ran:
/// it gets a forced `terminate` under a new key, and a lost snapshot is recorded. A failing
/// `terminate` can only be retried. A release still in progress keeps its state and waits.
pub fn release_failed(
    mut record: ExecutionResourceRecord,
    err: &ProviderCallError,
    now: DateTime<Utc>,
    jitter: f64,
    cadence: Cadence,
) -> OutcomeResult<ExecutionResourceRecord> {
    if let ProviderCallError::InProgress { retry_after, .. } = err {
        wait_in_progress(&mut record, err, *retry_after, now, cadence);
        return Ok(record);
    }
    let forced = classify(err) == FailureClass::Final
        && record.disposition != Some(ReleaseDisposition::Terminate);
    if !forced {
        let error = forced_reason_kept(&record, err.to_provider_error());
        return release_attempt_failed(record, error, now, jitter, cadence);
    }
    // A checkpoint already named by a receipt of this release exists: it is not lost.
    let lost_snapshot = record.disposition == Some(ReleaseDisposition::SnapshotAndTerminate)
        && record.sandbox_checkpoint.is_none();
    record = begin_release(
        record,
        ReleaseDisposition::Terminate,
        ReleasePurpose::ForcedTerminate,
        None,
        now,
    )?;
    record.checkpoint_lost |= lost_snapshot;
    record.error = Some(err.to_provider_error());
    Ok(record)
}

const TERMINATE_RETRY: &str = "; the forced terminate's last attempt failed: ";

/// A forced terminate's failed attempt keeps the provider's word that forced it (which also
/// says why a snapshot was lost), with the attempt's failure in its message.
fn forced_reason_kept(record: &ExecutionResourceRecord, error: ProviderError) -> ProviderError {
    match &record.error {
        Some(reason)
            if record.release_purpose == Some(ReleasePurpose::ForcedTerminate)
                && !reason.retryable =>
        {
            let cause = reason
                .message
                .split(TERMINATE_RETRY)
                .next()
                .unwrap_or_default();
            ProviderError {
                message: format!("{cause}{TERMINATE_RETRY}{}: {}", error.code, error.message),
                ..reason.clone()
            }
        }
        _ => error,
    }
}

/// The sandbox checkpoint is gone: the resuming run fails instead of hanging.
pub fn snapshot_lost(record: ExecutionResourceRecord) -> Next {
    let message = "the sandbox checkpoint was lost when the provider reported the sandbox \
                   broken; the run cannot resume"
        .to_string();
    Next {
        record,
        effect: RunEffect::Fail {
            code: SNAPSHOT_LOST.into(),
            message,
        },
    }
}

#[cfg(test)]
#[path = "outcome_tests.rs"]
mod tests;
