//! The lifecycle figures read from the database at scrape time, and their Prometheus gauges.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::escape;

/// The operator's view of the lifecycle (never changes anything a user sees).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LifecycleMetrics {
    /// Records `active`.
    pub active_sandboxes: i64,
    /// Records `release_blocked`.
    pub retained_sandboxes: i64,
    /// `release_blocked` + `release_requested` + `release_failed` + `needs_attention`.
    pub pending_releases: i64,
    /// Records `release_failed`.
    pub release_failure_count: i64,
    /// Failed release attempts: those of every confirmed release, and the retries of the
    /// releases still pending (`release_requested`, `release_failed`, `needs_attention`).
    pub release_retry_count: i64,
    /// Retries of the provisions and restores still pending (records `provisioning` or
    /// `restore_requested`).
    pub bind_retry_count: i64,
    /// Age of the oldest `release_blocked` record (0 when none).
    pub max_blocked_age_seconds: f64,
    /// Records `needs_attention`: releases that could not be confirmed within their budget.
    pub needs_attention_count: i64,
    /// Time since the oldest `needs_attention` record entered that state (0 when none).
    pub oldest_attention_age_seconds: f64,
    /// Mean of `released_at − release_requested_at` over every confirmed release, of runs
    /// restored since too (0 when none).
    pub average_release_latency_seconds: f64,
    /// Quantiles of the same latency over the most recent 10,000 releases.
    pub release_latency_p50_seconds: f64,
    pub release_latency_p95_seconds: f64,
    pub release_latency_p99_seconds: f64,
    /// Records in each state, by state name.
    pub records_by_state: std::collections::BTreeMap<String, i64>,
    pub generated_at: DateTime<Utc>,
    /// Prometheus histograms over every confirmed release (not in the JSON).
    #[serde(skip)]
    pub histograms: ReleaseHistograms,
}

/// Upper bounds (seconds) of the release latency histogram's buckets.
pub const RELEASE_LATENCY_BUCKETS: [f64; 12] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

/// Upper bounds of the attempts-per-release histogram's buckets.
pub const RELEASE_ATTEMPT_BUCKETS: [f64; 7] = [1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0];

/// A Prometheus histogram as read: cumulative counts per upper bound, the count and the sum.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    pub bounds: Vec<f64>,
    pub cumulative: Vec<u64>,
    pub count: u64,
    pub sum: f64,
}

/// Suspend to released latency, and attempts, of every confirmed release.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReleaseHistograms {
    pub latency: Histogram,
    pub attempts: Histogram,
}

impl Histogram {
    fn render(&self, name: &str, help: &str, out: &mut String) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (bound, n) in self.bounds.iter().zip(&self.cumulative) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {n}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}", self.sum);
        let _ = writeln!(out, "{name}_count {}", self.count);
    }
}

/// The lifecycle gauges of `metrics_snapshot`, read from the database at scrape time.
pub fn render_lifecycle_gauges(m: &LifecycleMetrics, out: &mut String) {
    let gauges = [
        (
            "sagents_lifecycle_active_sandboxes",
            "Execution resources `active`.",
            m.active_sandboxes as f64,
        ),
        (
            "sagents_lifecycle_retained_sandboxes",
            "Execution resources `release_blocked` (compute kept).",
            m.retained_sandboxes as f64,
        ),
        (
            "sagents_lifecycle_pending_releases",
            "Execution resources blocked, requested or failed.",
            m.pending_releases as f64,
        ),
        (
            "sagents_lifecycle_release_failures",
            "Execution resources `release_failed`.",
            m.release_failure_count as f64,
        ),
        (
            "sagents_lifecycle_release_retry_count",
            "Failed release attempts: of every confirmed release, and of those still pending.",
            m.release_retry_count as f64,
        ),
        (
            "sagents_lifecycle_bind_retry_count",
            "Retries of the provisions and restores still pending.",
            m.bind_retry_count as f64,
        ),
        (
            "sagents_lifecycle_max_blocked_age_seconds",
            "Age of the oldest `release_blocked` execution resource.",
            m.max_blocked_age_seconds,
        ),
        (
            "sagents_lifecycle_needs_attention",
            "Execution resources `needs_attention` (a release an operator should look at).",
            m.needs_attention_count as f64,
        ),
        (
            "sagents_lifecycle_needs_attention_oldest_age_seconds",
            "Time since the oldest `needs_attention` execution resource entered that state.",
            m.oldest_attention_age_seconds,
        ),
        (
            "sagents_lifecycle_release_latency_average_seconds",
            "Mean time from release requested to released, over every confirmed release.",
            m.average_release_latency_seconds,
        ),
    ];
    for (name, help, value) in gauges {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
        );
    }
    let name = "sagents_lifecycle_release_latency_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Release latency quantiles over the most recent releases.\n# TYPE {name} gauge"
    );
    for (q, v) in [
        ("0.5", m.release_latency_p50_seconds),
        ("0.95", m.release_latency_p95_seconds),
        ("0.99", m.release_latency_p99_seconds),
    ] {
        let _ = writeln!(out, "{name}{{quantile=\"{q}\"}} {v}");
    }
    m.histograms.latency.render(
        "sagents_lifecycle_release_duration_seconds",
        "Time from release requested to released, of every confirmed release.",
        out,
    );
    m.histograms.attempts.render(
        "sagents_lifecycle_release_attempts",
        "Attempts each confirmed release took.",
        out,
    );
    let name = "sagents_lifecycle_records";
    let _ = writeln!(
        out,
        "# HELP {name} Execution resources by state.\n# TYPE {name} gauge"
    );
    for (state, n) in &m.records_by_state {
        let _ = writeln!(out, "{name}{{state=\"{}\"}} {n}", escape(state));
    }
}
