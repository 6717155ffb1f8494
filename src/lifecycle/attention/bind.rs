//! A bind (provision, restore or attach) that keeps failing while a human waits: marked for
//! operators after its budget, and given up on only by an operator's word.

use chrono::{DateTime, Utc};

use super::AttentionPolicy;
use crate::domain::resource::{ExecutionResourceRecord, ResourceState, RunEffect};
use crate::domain::sandbox::ProviderError;
use crate::lifecycle::outcome::{self, BindKind, Next, OutcomeResult};
use crate::lifecycle::rules::Cadence;

/// A bind for a resuming run needs an operator only after failing this long since the reply.
pub const BIND_ATTENTION_MIN_FAILING: chrono::Duration = chrono::Duration::minutes(2);

/// A bind the provider still reports in progress this long after the reply needs an
/// operator too, however few attempts it took.
pub const BIND_IN_PROGRESS_ATTENTION_AFTER: chrono::Duration = chrono::Duration::minutes(10);

pub use crate::domain::resource::BIND_NEEDS_ATTENTION;

/// Whether the record's bind is marked as needing an operator.
pub fn bind_needs_attention(record: &ExecutionResourceRecord) -> bool {
    record
        .error
        .as_ref()
        .is_some_and(|e| e.code == BIND_NEEDS_ATTENTION)
}

/// A bind that failed `attempt_budget` times for a resuming run, for at least
/// [`BIND_ATTENTION_MIN_FAILING`] since the reply (or that is still in progress
/// [`BIND_IN_PROGRESS_ATTENTION_AFTER`] after it), is marked `bind.needs_attention` (its last
/// error in the message) for operators, who may give up on it; it keeps being retried at the
/// resume cadence. Decided afresh after every failure, so the mark follows the last error.
pub fn escalate_bind(
    mut record: ExecutionResourceRecord,
    kind: BindKind,
    policy: AttentionPolicy,
    now: DateTime<Utc>,
    cadence: Cadence,
) -> ExecutionResourceRecord {
    let Cadence::Resume { since } = cadence else {
        return record;
    };
    let budget = i64::from(policy.attempt_budget.max(1));
    let stuck = outcome::in_progress(&record) && now - since >= BIND_IN_PROGRESS_ATTENTION_AFTER;
    if !stuck && (record.retry_count < budget || now - since < BIND_ATTENTION_MIN_FAILING) {
        return record;
    }
    if let Some(last) = record
        .error
        .as_mut()
        .filter(|e| e.code != BIND_NEEDS_ATTENTION)
    {
        let waited = (now - since).num_seconds();
        last.message = match stuck {
            true => format!(
                "the {} is still in progress at the provider {waited} s after the reply: {}",
                kind.as_str(),
                last.message
            ),
            false => format!(
                "the {} failed {} times in {waited} s since the reply; last error `{}`: {}",
                kind.as_str(),
                record.retry_count,
                last.code,
                last.message
            ),
        };
        last.code = BIND_NEEDS_ATTENTION.into();
    }
    record
}

/// The code a run fails with when an operator gives up on its bind.
pub const BIND_ABANDONED: &str = "sandbox.bind_abandoned";

/// The bind a record in this state is retrying, as the plan asks for it.
fn bind_kind(record: &ExecutionResourceRecord) -> BindKind {
    match record.state {
        ResourceState::Active | ResourceState::ReleaseBlocked => BindKind::Attach,
        ResourceState::RestoreRequested
            if record.sandbox_checkpoint.is_some() && !record.checkpoint_lost =>
        {
            BindKind::Restore
        }
        _ => BindKind::Provision,
    }
}

/// The operator gives up on a bind that needs attention: the run fails with
/// `sandbox.bind_abandoned`, naming the bind and its last error. A provision or restore ends
/// its record `released` without compute (a sandbox the provider made meanwhile belongs to
/// an ended run, which the reconciler terminates); a sandbox that could not be attached is
/// terminated as the end of the run.
pub fn give_up(
    record: ExecutionResourceRecord,
    reason: &str,
    now: DateTime<Utc>,
) -> OutcomeResult<Next> {
    let kind = bind_kind(&record);
    let last = record
        .error
        .as_ref()
        .map_or_else(String::new, |e| format!("; {}", e.message));
    let message = format!(
        "an operator gave up on the sandbox {} ({reason}){last}",
        kind.as_str()
    );
    let mut record = match kind {
        BindKind::Attach => record,
        BindKind::Provision | BindKind::Restore => outcome::abandon(record)?,
    };
    record.retry_count = 0;
    record.next_retry_at = None;
    record.error = Some(ProviderError {
        code: BIND_ABANDONED.into(),
        category: "operator".into(),
        message: message.clone(),
        retryable: false,
    });
    record.due_at = Some(now);
    Ok(Next {
        record,
        effect: RunEffect::Fail {
            code: BIND_ABANDONED.into(),
            message,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::sandbox::{ResolvedSandboxSpec, WorkspaceMode};
    use crate::domain::RunId;

    fn failing(state: ResourceState) -> ExecutionResourceRecord {
        let spec = ResolvedSandboxSpec::example("local", WorkspaceMode::Isolated);
        let mut r =
            ExecutionResourceRecord::provisioning(RunId::new(), spec, "h".into(), Utc::now());
        r.state = state;
        r.bind_idempotency_key = Some("k".into());
        r.retry_count = 14;
        r.error = Some(ProviderError {
            code: BIND_NEEDS_ATTENTION.into(),
            category: "unavailable".into(),
            message: "the provision failed 14 times in 130 s since the reply".into(),
            retryable: true,
        });
        r
    }

    #[test]
    fn giving_up_fails_the_run_and_leaves_no_compute_behind() {
        let now = Utc::now();
        let next = give_up(failing(ResourceState::Provisioning), "provider gone", now).unwrap();
        assert_eq!(next.record.state, ResourceState::Released);
        assert!(!next.record.compute_released);
        assert_eq!(next.record.due_at, Some(now));
        let RunEffect::Fail { code, message } = &next.effect else {
            panic!("the run fails: {next:?}");
        };
        assert_eq!(code, BIND_ABANDONED);
        assert!(
            message.contains("sandbox provision (provider gone)"),
            "{message}"
        );
        assert!(message.contains("failed 14 times"), "{message}");

        let attach = give_up(failing(ResourceState::Active), "x", now).unwrap();
        assert_eq!(
            attach.record.state,
            ResourceState::Active,
            "the sandbox is terminated as the end of the run"
        );
        assert!(matches!(attach.effect, RunEffect::Fail { .. }));
    }
}
