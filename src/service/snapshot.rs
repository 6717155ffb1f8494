//! Snapshot reads, conditional and long-polled.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::shutdown::Shutdown;
use crate::domain::snapshot::if_none_match_matches;
use crate::domain::SessionId;
use crate::metrics::Metrics;
use crate::snapshot_cache::Encoded;
use crate::store::{Store, StoreResult};

#[derive(Debug, Clone, PartialEq)]
pub enum SnapshotOutcome {
    /// The caller's ETag is current: `304` with this revision.
    NotModified { revision: i64 },
    /// The snapshot and its JSON body.
    Current(Arc<Encoded>),
}

#[derive(Debug, Clone, Copy)]
pub struct SnapshotRead<'a> {
    pub tenant: Option<&'a str>,
    pub session_id: &'a SessionId,
    pub if_none_match: Option<&'a str>,
    /// How long to hold the request while the ETag stays current (zero: answer at once).
    pub wait: Duration,
}

/// Answers from the revision alone while nothing changed; reads the full snapshot only when
/// it has. A waiting request holds one in-memory subscription and no database connection;
/// database reads are boxed so that their state is not part of the waiting future.
pub async fn read_snapshot(
    store: &Store,
    shutdown: &Shutdown,
    metrics: &Metrics,
    q: SnapshotRead<'_>,
) -> StoreResult<SnapshotOutcome> {
    let Some(inm) = q.if_none_match else {
        return Ok(SnapshotOutcome::Current(
            Box::pin(store.encoded_snapshot(q.tenant, q.session_id)).await?,
        ));
    };
    // Subscribe before reading, so a change between the read and the wait is not missed.
    let mut watch =
        (!q.wait.is_zero()).then(|| store.hub().subscribe_session(q.session_id.as_str()));
    let mut revision = Box::pin(store.session_revision(q.tenant, q.session_id)).await?;
    if let Some(watch) = watch.as_mut() {
        let _waiting = WaitingGuard::new(metrics);
        let deadline = Instant::now() + q.wait;
        while if_none_match_matches(inm, revision) && !shutdown.is_triggered() {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                break;
            }
            let changed = tokio::select! {
                changed = watch.changed(remaining) => changed,
                _ = shutdown.wait() => false,
            };
            if !changed {
                break;
            }
            revision = Box::pin(store.session_revision(q.tenant, q.session_id)).await?;
        }
    }
    if if_none_match_matches(inm, revision) {
        Ok(SnapshotOutcome::NotModified { revision })
    } else {
        let snapshot = Box::pin(store.encoded_snapshot(q.tenant, q.session_id)).await?;
        Ok(SnapshotOutcome::Current(snapshot))
    }
}

/// Counts a request in `long_polls_waiting` for as long as it lives.
pub struct WaitingGuard<'a>(&'a Metrics);

impl<'a> WaitingGuard<'a> {
    pub fn new(metrics: &'a Metrics) -> Self {
        metrics.long_polls_waiting.fetch_add(1, Ordering::Relaxed);
        Self(metrics)
    }
}

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.long_polls_waiting.fetch_sub(1, Ordering::Relaxed);
    }
}
