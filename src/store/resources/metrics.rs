//! The operator's lifecycle figures: counts from one grouped query over the state index,
//! release latency from the released records.

use std::collections::BTreeMap;

use crate::clock::to_millis;
use crate::domain::resource::ResourceState;
use crate::metrics::LifecycleMetrics;
use crate::store::engine::{rows, Store, StoreResult};

/// The quantiles are taken over this many of the most recent releases.
const LATENCY_WINDOW: i64 = 10_000;

/// Nearest-rank quantile (`per_mille` of 1000) of ascending millisecond values, in seconds.
fn quantile_seconds(sorted_ms: &[i64], per_mille: usize) -> f64 {
    if sorted_ms.is_empty() {
        return 0.0;
    }
    let n = sorted_ms.len();
    let rank = (per_mille * n).div_ceil(1000).clamp(1, n);
    sorted_ms[rank - 1] as f64 / 1000.0
}

impl Store {
    pub async fn lifecycle_metrics(&self) -> StoreResult<LifecycleMetrics> {
        let now = self.now();
        let mut tx = self.begin_consistent_read().await?;
        let groups = sqlx::query(
            "SELECT state, COUNT(*) AS records, \
             CAST(COALESCE(SUM(retry_count), 0) AS BIGINT) AS retries, \
             MIN(state_since) AS oldest FROM execution_resources GROUP BY state",
        )
        .fetch_all(&mut *tx)
        .await?;
        let released = "FROM execution_resources WHERE state = 'released' \
             AND released_at IS NOT NULL AND release_requested_at IS NOT NULL";
        let totals = sqlx::query(&format!(
            "SELECT COUNT(*) AS releases, \
             CAST(COALESCE(SUM(released_at - release_requested_at), 0) AS BIGINT) AS total_ms \
             {released}"
        ))
        .fetch_one(&mut *tx)
        .await?;
        let mut recent: Vec<i64> = sqlx::query(&format!(
            "SELECT released_at - release_requested_at AS latency_ms {released} \
             ORDER BY released_at DESC LIMIT $1"
        ))
        .bind(LATENCY_WINDOW)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|row| rows::int(row, "latency_ms").map(|ms| ms.max(0)))
        .collect::<StoreResult<_>>()?;
        tx.commit().await?;

        let mut by_state: BTreeMap<String, i64> = ResourceState::ALL
            .iter()
            .map(|s| (s.as_str().to_owned(), 0))
            .collect();
        let mut retries = 0;
        let mut oldest_blocked = None;
        let mut oldest_attention = None;
        for row in &groups {
            let state: ResourceState = rows::enumeration(row, "state")?;
            by_state.insert(state.as_str().to_owned(), rows::int(row, "records")?);
            retries += rows::int(row, "retries")?;
            match state {
                ResourceState::ReleaseBlocked => oldest_blocked = rows::opt_int(row, "oldest")?,
                ResourceState::NeedsAttention => oldest_attention = rows::opt_int(row, "oldest")?,
                _ => {}
            }
        }
        let age = |since: Option<i64>| {
            since.map_or(0.0, |since| (to_millis(now) - since).max(0) as f64 / 1000.0)
        };
        let count = |s: ResourceState| by_state.get(s.as_str()).copied().unwrap_or(0);
        let releases = rows::int(&totals, "releases")?;
        let total_ms = rows::int(&totals, "total_ms")?;
        recent.sort_unstable();
        Ok(LifecycleMetrics {
            active_sandboxes: count(ResourceState::Active),
            retained_sandboxes: count(ResourceState::ReleaseBlocked),
            pending_releases: count(ResourceState::ReleaseBlocked)
                + count(ResourceState::ReleaseRequested)
                + count(ResourceState::ReleaseFailed)
                + count(ResourceState::NeedsAttention),
            release_failure_count: count(ResourceState::ReleaseFailed),
            release_retry_count: retries,
            max_blocked_age_seconds: age(oldest_blocked),
            needs_attention_count: count(ResourceState::NeedsAttention),
            oldest_attention_age_seconds: age(oldest_attention),
            average_release_latency_seconds: if releases > 0 {
                total_ms as f64 / releases as f64 / 1000.0
            } else {
                0.0
            },
            release_latency_p50_seconds: quantile_seconds(&recent, 500),
            release_latency_p95_seconds: quantile_seconds(&recent, 950),
            release_latency_p99_seconds: quantile_seconds(&recent, 990),
            records_by_state: by_state,
            generated_at: now,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let ms: Vec<i64> = (1..=100).map(|s| s * 1000).collect();
        assert_eq!(quantile_seconds(&ms, 500), 50.0);
        assert_eq!(quantile_seconds(&ms, 950), 95.0);
        assert_eq!(quantile_seconds(&ms, 990), 99.0);
        assert_eq!(quantile_seconds(&[1500], 990), 1.5);
        assert_eq!(quantile_seconds(&[1000, 3000], 500), 1.0);
        assert_eq!(quantile_seconds(&[], 500), 0.0);
    }
}
