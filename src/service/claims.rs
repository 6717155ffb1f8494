//! Runtime claims, long-polled.

use std::time::Duration;

use tokio::time::Instant;

use super::shutdown::Shutdown;
use super::snapshot::WaitingGuard;
use crate::domain::claim::Claim;
use crate::metrics::Metrics;
use crate::store::{Store, StoreResult};

/// Work can also become ready without a notification (a lease expiring), so a waiting
/// claim retries at least this often.
pub const CLAIM_RETRY_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy)]
pub struct ClaimWait<'a> {
    pub tenant: Option<&'a str>,
    pub worker_id: &'a str,
    pub max: u32,
    pub ttl: chrono::Duration,
    pub wait: Duration,
}

/// Claims ready runs; with a wait, retries on every work notification until something is
/// claimed, the wait runs out, or the service shuts down (an empty list then).
pub async fn claim(
    store: &Store,
    shutdown: &Shutdown,
    metrics: &Metrics,
    q: ClaimWait<'_>,
) -> StoreResult<Vec<Claim>> {
    let mut work = store.hub().subscribe_work();
    work.borrow_and_update();
    let mut work_open = true;
    let deadline = Instant::now() + q.wait;
    let _waiting = (!q.wait.is_zero()).then(|| WaitingGuard::new(metrics));
    loop {
        let claims = store
            .claim_runs(q.tenant, q.worker_id, q.max, q.ttl)
            .await?;
        let remaining = deadline.saturating_duration_since(Instant::now());
        if !claims.is_empty() || remaining.is_zero() || shutdown.is_triggered() {
            return Ok(claims);
        }
        tokio::select! {
            changed = work.changed(), if work_open => work_open = changed.is_ok(),
            _ = tokio::time::sleep(remaining.min(CLAIM_RETRY_INTERVAL)) => {}
            _ = shutdown.wait() => return Ok(Vec::new()),
        }
    }
}
