//! Binding compute to a run: provision, restore or attach, each under its own key.

use chrono::{DateTime, Utc};

use super::{
    abandon, classify, clear_retry, schedule_retry, wait_in_progress, FailureClass, Next,
    OutcomeResult,
};
use crate::domain::resource::{ExecutionResourceRecord, ResourceEvent, ResourceState, RunEffect};
use crate::lifecycle::rules::Cadence;
use crate::providers::client::ProviderCallError;
use crate::providers::codes::{self, CHECKPOINT_NOT_FOUND};
use crate::providers::wire::SandboxHandle;

/// How compute is (re)bound to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindKind {
    Provision,
    Restore,
    Attach,
}

impl BindKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BindKind::Provision => "provision",
            BindKind::Restore => "restore",
            BindKind::Attach => "attach",
        }
    }

    /// The problem code a run fails with when this bind cannot succeed.
    pub fn failure_code(self) -> &'static str {
        match self {
            BindKind::Provision => "sandbox.provision_failed",
            BindKind::Restore => "sandbox.restore_failed",
            BindKind::Attach => "sandbox.attach_failed",
        }
    }
}

/// Deterministic, so every retry of the same bind (by any replica) reuses it.
pub fn bind_idempotency_key(record: &ExecutionResourceRecord, kind: BindKind) -> String {
    format!(
        "{}:g{}:{}",
        record.run_id,
        record.generation + 1,
        kind.as_str()
    )
}

/// The intent written before a provision or restore is sent: the key, so a run that ends
/// meanwhile knows compute may exist. From `released` this is the move to `restore_requested`.
pub fn begin_bind(
    mut record: ExecutionResourceRecord,
    kind: BindKind,
) -> OutcomeResult<ExecutionResourceRecord> {
    if record.state == ResourceState::Released {
        record.state = record.state.next(ResourceEvent::RestoreDue)?;
    }
    // Only a state that a ready sandbox can complete may start a bind.
    record.state.next(ResourceEvent::Ready)?;
    let key = bind_idempotency_key(&record, kind);
    if record.bind_idempotency_key.as_deref() != Some(key.as_str()) {
        record.bind_idempotency_key = Some(key);
    }
    Ok(record)
}

/// A ready sandbox: the next generation, with every release and retry field cleared.
pub fn bind_succeeded(
    mut record: ExecutionResourceRecord,
    kind: BindKind,
    handle: &SandboxHandle,
) -> OutcomeResult<ExecutionResourceRecord> {
    let event = match kind {
        BindKind::Attach => ResourceEvent::Attach,
        BindKind::Provision | BindKind::Restore => ResourceEvent::Ready,
    };
    record.state = record.state.next(event)?;
    record.generation += 1;
    record.provider_generation = i64::try_from(handle.generation).ok();
    record.sandbox_ref = Some(handle.r#ref.clone().into());
    record.bind_idempotency_key = None;
    record.disposition = None;
    record.sandbox_checkpoint = None;
    record.checkpoint_lost = false;
    record.blocking_job_ids.clear();
    record.blocking_child_run_ids.clear();
    record.release_idempotency_key = None;
    record.release_purpose = None;
    record.release_requested_at = None;
    record.released_at = None;
    record.compute_released = false;
    record.error = None;
    clear_retry(&mut record);
    Ok(record)
}

/// A provision, restore or attach failed. Retryable (or refused while a human waits): stay
/// and back off; in progress: stay and wait, no attempt counted. Otherwise the run
/// fails; a provision or restore leaves no compute (`released` through `Abandon`), while a
/// sandbox that could not be attached stays due so it gets terminated.
pub fn bind_failed(
    mut record: ExecutionResourceRecord,
    kind: BindKind,
    err: &ProviderCallError,
    now: DateTime<Utc>,
    jitter: f64,
    cadence: Cadence,
) -> OutcomeResult<Next> {
    if let ProviderCallError::InProgress { retry_after, .. } = err {
        wait_in_progress(&mut record, err, *retry_after, now, cadence);
        return Ok(Next::plain(record));
    }
    let retry = match classify(err) {
        FailureClass::Retry => true,
        // While a human waits, a refusal is no word on the sandbox: it is retried until an
        // operator gives up, unless the provider says what it needs is gone.
        FailureClass::Refused => cadence.is_resume() && !source_gone(kind, err),
        FailureClass::Final => false,
    };
    if retry {
        if kind != BindKind::Attach {
            record.state = record.state.next(ResourceEvent::BindFailed)?;
        }
        schedule_retry(&mut record, err.to_provider_error(), now, jitter, cadence);
        return Ok(Next::plain(record));
    }
    let error = err.to_provider_error();
    let effect = RunEffect::Fail {
        code: kind.failure_code().into(),
        message: format!("the sandbox {} failed: {}", kind.as_str(), error.message),
    };
    record = match kind {
        BindKind::Attach => {
            clear_retry(&mut record);
            record
        }
        BindKind::Provision | BindKind::Restore => abandon(record)?,
    };
    record.error = Some(error);
    Ok(Next { record, effect })
}

/// The provider's word that what the bind needs does not exist: the checkpoint to restore
/// from, or the sandbox to attach to.
fn source_gone(kind: BindKind, err: &ProviderCallError) -> bool {
    let ProviderCallError::Refused { error, .. } = err else {
        return false;
    };
    match kind {
        BindKind::Restore => error.code == CHECKPOINT_NOT_FOUND,
        BindKind::Attach => codes::is_sandbox_not_found(error),
        BindKind::Provision => false,
    }
}
