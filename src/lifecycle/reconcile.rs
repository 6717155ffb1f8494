//! The reconciler's judgements, as pure functions: what a provider's inventory says against
//! what the records say, and which checkpoints have outlived their use.

use chrono::{DateTime, Duration, Utc};

use super::outcome::{begin_release, OutcomeResult};
use crate::domain::resource::{
    ExecutionResourceRecord, ReleasePurpose, ResourceEvent, ResourceState,
};
use crate::domain::sandbox::ReleaseDisposition;
use crate::providers::wire::{CheckpointItem, InventoryItem};
use crate::store::RunView;

/// What to do about one sandbox the provider lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The records account for it (or it holds no compute, or it may still be being bound).
    Keep,
    /// No record owns it (no such run, another tenant's run, a run now bound to another
    /// sandbox, or a run that ended with its record released): terminate it at the provider.
    Orphan(&'static str),
    /// Its run's record says released while the provider lists compute: reopen the record so
    /// that the coordinator terminates it.
    FalselyReleased,
}

/// A sandbox younger than `min_age` whose live run exists is left alone: its bind may not be
/// recorded yet. A run that has ended binds nothing more, so it owns no other sandbox.
pub fn judge(
    item: &InventoryItem,
    run: Option<&RunView>,
    now: DateTime<Utc>,
    min_age: Duration,
) -> Verdict {
    if !item.state.holds_compute() {
        return Verdict::Keep;
    }
    let Some(run) = run else {
        return Verdict::Orphan("no_run");
    };
    if run.tenant_id != item.labels.tenant_id {
        return Verdict::Orphan("other_tenant");
    }
    let Some(record) = &run.record else {
        return Verdict::Orphan("no_record");
    };
    let bound = record
        .sandbox_ref
        .as_ref()
        .is_some_and(|r| r.sandbox_id == item.r#ref.sandbox_id);
    if bound {
        return match record.state {
            ResourceState::Released => Verdict::FalselyReleased,
            _ => Verdict::Keep,
        };
    }
    if run.state.is_terminal() {
        return Verdict::Orphan("run_ended");
    }
    let young = item.created_at.is_none_or(|at| now - at < min_age);
    if record.bind_idempotency_key.is_some() || young {
        return Verdict::Keep;
    }
    Verdict::Orphan("not_bound")
}

/// A checkpoint is deleted once nothing can restore from it: its run is unknown or ended
/// more than `grace` ago, or it is older than `grace` and not its live run's latest. Never
/// while its run's record has a release under way: a release whose answer was lost took it,
/// and the retry under the same key names it.
pub fn checkpoint_expired(
    item: &CheckpointItem,
    run: Option<&RunView>,
    now: DateTime<Utc>,
    grace: Duration,
) -> bool {
    let aged = now - item.checkpoint.created_at >= grace;
    let Some(run) = run else {
        return aged;
    };
    if run
        .record
        .as_ref()
        .is_some_and(|r| release_under_way(r.state))
    {
        return false;
    }
    if run.state.is_terminal() {
        return now - run.updated_at >= grace;
    }
    let latest = run
        .record
        .as_ref()
        .and_then(|r| r.sandbox_checkpoint.as_ref())
        .is_some_and(|c| c.checkpoint_id == item.checkpoint.checkpoint_id);
    aged && !latest
}

/// A release was asked for and its outcome is not settled yet.
fn release_under_way(state: ResourceState) -> bool {
    matches!(
        state,
        ResourceState::ReleaseRequested
            | ResourceState::ReleaseFailed
            | ResourceState::NeedsAttention
    )
}

/// The record said released, but the sandbox still holds compute: a terminate under a
/// `reconcile` key, keeping the sandbox checkpoint a resume restores from.
pub fn reopen(
    mut record: ExecutionResourceRecord,
    now: DateTime<Utc>,
) -> OutcomeResult<ExecutionResourceRecord> {
    record.state = record.state.next(ResourceEvent::Reopened)?;
    record.release_requested_at = None;
    let mut record = begin_release(
        record,
        ReleaseDisposition::Terminate,
        ReleasePurpose::Reconcile,
        None,
        now,
    )?;
    record.due_at = Some(now);
    Ok(record)
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
