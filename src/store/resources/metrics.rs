//! The operator's lifecycle figures: counts from one grouped query over the state index,
//! release latency and attempts from the history of every confirmed release.

use std::collections::BTreeMap;

use crate::clock::to_millis;
use crate::domain::resource::ResourceState;
use crate::metrics::{
    Histogram, LifecycleMetrics, ReleaseHistograms, RELEASE_ATTEMPT_BUCKETS,
    RELEASE_LATENCY_BUCKETS,
};
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

/// The release history's totals and the cumulative bucket counts of both histograms, in one
/// scan.
fn history_sql() -> String {
    let mut cols = vec![
        "COUNT(*) AS releases".to_owned(),
        "CAST(COALESCE(SUM(latency_ms), 0) AS BIGINT) AS latency_ms".to_owned(),
        "CAST(COALESCE(SUM(attempts), 0) AS BIGINT) AS attempts".to_owned(),
    ];
    for (i, bound) in RELEASE_LATENCY_BUCKETS.iter().enumerate() {
        let ms = (bound * 1000.0) as i64;
        cols.push(format!(
            "CAST(COALESCE(SUM(CASE WHEN latency_ms <= {ms} THEN 1 ELSE 0 END), 0) AS BIGINT) \
             AS l{i}"
        ));
    }
    for (i, bound) in RELEASE_ATTEMPT_BUCKETS.iter().enumerate() {
        let n = *bound as i64;
        cols.push(format!(
            "CAST(COALESCE(SUM(CASE WHEN attempts <= {n} THEN 1 ELSE 0 END), 0) AS BIGINT) \
             AS a{i}"
        ));
    }
    format!("SELECT {} FROM resource_releases", cols.join(", "))
}

fn buckets(row: &sqlx::any::AnyRow, prefix: char, n: usize) -> StoreResult<Vec<u64>> {
    (0..n)
        .map(|i| rows::int(row, &format!("{prefix}{i}")).map(|v| u64::try_from(v).unwrap_or(0)))
        .collect()
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
        let history = sqlx::query(&history_sql()).fetch_one(&mut *tx).await?;
        let mut recent: Vec<i64> = sqlx::query(
            "SELECT latency_ms FROM resource_releases ORDER BY released_at DESC LIMIT $1",
        )
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
        let mut release_retries = 0;
        let mut bind_retries = 0;
        let mut oldest_blocked = None;
        let mut oldest_attention = None;
        for row in &groups {
            let state: ResourceState = rows::enumeration(row, "state")?;
            by_state.insert(state.as_str().to_owned(), rows::int(row, "records")?);
            let retries = rows::int(row, "retries")?;
            match state {
                ResourceState::Provisioning | ResourceState::RestoreRequested => {
                    bind_retries += retries;
                }
                // A confirmed release's retries are in the history.
                ResourceState::ReleaseRequested
                | ResourceState::ReleaseFailed
                | ResourceState::NeedsAttention => release_retries += retries,
                _ => {}
            }
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
        let releases = rows::int(&history, "releases")?;
        let total_ms = rows::int(&history, "latency_ms")?;
        let attempts = rows::int(&history, "attempts")?;
        recent.sort_unstable();
        let released = u64::try_from(releases).unwrap_or(0);
        let histograms = ReleaseHistograms {
            latency: Histogram {
                bounds: RELEASE_LATENCY_BUCKETS.to_vec(),
                cumulative: buckets(&history, 'l', RELEASE_LATENCY_BUCKETS.len())?,
                count: released,
                sum: total_ms as f64 / 1000.0,
            },
            attempts: Histogram {
                bounds: RELEASE_ATTEMPT_BUCKETS.to_vec(),
                cumulative: buckets(&history, 'a', RELEASE_ATTEMPT_BUCKETS.len())?,
                count: released,
                sum: attempts as f64,
            },
        };
        Ok(LifecycleMetrics {
            active_sandboxes: count(ResourceState::Active),
            retained_sandboxes: count(ResourceState::ReleaseBlocked),
            pending_releases: count(ResourceState::ReleaseBlocked)
                + count(ResourceState::ReleaseRequested)
                + count(ResourceState::ReleaseFailed)
                + count(ResourceState::NeedsAttention),
            release_failure_count: count(ResourceState::ReleaseFailed),
            release_retry_count: release_retries + (attempts - releases).max(0),
            bind_retry_count: bind_retries,
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
            histograms,
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
