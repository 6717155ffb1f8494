//! Keeps a lease alive while its holder works: renewed every third of its time to live.

use std::time::Duration;

use crate::domain::claim::Lease;
use crate::store::{Store, StoreError};

/// Why a lease can no longer be kept; the work under it must stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseEnd {
    /// Another holder has it, or it expired.
    Lost,
    /// Renewals keep failing and it would expire before the next one.
    Expiring,
}

/// Renews `lease` every `ttl / 3` and returns only when it cannot be kept. A failed renewal
/// is tolerated while the lease outlives the next attempt.
pub async fn keep_lease(store: &Store, lease: &Lease, ttl: Duration) -> LeaseEnd {
    let period = ttl / 3;
    let Ok(chrono_ttl) = chrono::Duration::from_std(ttl) else {
        return LeaseEnd::Expiring;
    };
    let chrono_period = chrono::Duration::from_std(period).unwrap_or(chrono_ttl);
    let mut expires_at = lease.expires_at;
    loop {
        tokio::time::sleep(period).await;
        match store
            .heartbeat(None, &lease.lease_id, lease.fencing_token, chrono_ttl)
            .await
        {
            Ok(renewed) => expires_at = renewed.expires_at,
            Err(StoreError::LeaseLost) => return LeaseEnd::Lost,
            Err(e) => {
                tracing::warn!(lease_id = %lease.lease_id, error = %e, "lease renewal failed");
                if store.now() + chrono_period >= expires_at {
                    return LeaseEnd::Expiring;
                }
            }
        }
    }
}
