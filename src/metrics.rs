//! Process-wide counters shared by the store, the HTTP layer and the workers, and their
//! Prometheus text rendering.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::telemetry::queue::DroppedLines;

#[derive(Debug, Default)]
pub struct Metrics {
    pub lease_claims: AtomicU64,
    pub lease_takeovers: AtomicU64,
    /// Lifecycle claim transactions that leased at least one run.
    pub lifecycle_claims: AtomicU64,
    pub fenced_rejections: AtomicU64,
    /// Transactions the group commit wrote, and the writes in them.
    pub group_commits: AtomicU64,
    pub grouped_writes: AtomicU64,
    /// Groups that failed as a whole, whose writes were then retried one by one.
    pub group_fallbacks: AtomicU64,
    /// Snapshots read from the database: the snapshot cache did not have them.
    pub snapshot_reads: AtomicU64,
    /// Requests currently held by a long-poll (snapshot or claims).
    pub long_polls_waiting: AtomicI64,
    pub http: HttpMetrics,
    pub lifecycle: LifecycleCounters,
    pub resume: ResumeStages,
    /// The log's count of lines it dropped because its queue was full.
    log_lines_dropped: OnceLock<DroppedLines>,
}

impl Metrics {
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Exports the log's dropped-line count; the first counter given is the one kept.
    pub fn track_log_drops(&self, counter: DroppedLines) {
        let _ = self.log_lines_dropped.set(counter);
    }

    pub fn log_lines_dropped(&self) -> u64 {
        self.log_lines_dropped.get().map_or(0, DroppedLines::get)
    }

    /// Prometheus text exposition (format 0.0.4) of everything this process counts.
    pub fn render_prometheus(&self) -> String {
        let mut out = String::new();
        let counters = [
            (
                "sagents_lease_claims_total",
                "Leases granted to runtime workers.",
                &self.lease_claims,
            ),
            (
                "sagents_lifecycle_claims_total",
                "Lifecycle claim transactions that leased at least one run.",
                &self.lifecycle_claims,
            ),
            (
                "sagents_lease_takeovers_total",
                "Leases granted over an expired lease.",
                &self.lease_takeovers,
            ),
            (
                "sagents_fenced_rejections_total",
                "Writes refused because their fencing token was stale.",
                &self.fenced_rejections,
            ),
            (
                "sagents_group_commits_total",
                "Transactions of the group commit: lifecycle record saves, lease hand-backs and the API's writes, written together.",
                &self.group_commits,
            ),
            (
                "sagents_grouped_writes_total",
                "Writes made by those transactions.",
                &self.grouped_writes,
            ),
            (
                "sagents_group_fallbacks_total",
                "Grouped transactions that failed as a whole; their writes were retried alone.",
                &self.group_fallbacks,
            ),
            (
                "sagents_snapshot_reads_total",
                "Session snapshots read from the database because the cache did not have them.",
                &self.snapshot_reads,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            let _ = writeln!(out, "{name} {}", value.load(Ordering::Relaxed));
        }
        let _ = writeln!(
            out,
            "# HELP sagents_log_lines_dropped_total Log lines dropped because the log's queue was full.\n\
             # TYPE sagents_log_lines_dropped_total counter\nsagents_log_lines_dropped_total {}",
            self.log_lines_dropped()
        );
        let _ = writeln!(
            out,
            "# HELP sagents_long_polls_waiting Requests currently held by a long-poll.\n\
             # TYPE sagents_long_polls_waiting gauge\nsagents_long_polls_waiting {}",
            self.long_polls_waiting.load(Ordering::Relaxed)
        );
        self.http.render(&mut out);
        self.lifecycle.render(&mut out);
        self.resume.render(&mut out);
        out
    }
}

mod gauges;
mod http;
mod resume;
pub use gauges::{
    render_lifecycle_gauges, Histogram, LifecycleMetrics, ReleaseHistograms,
    RELEASE_ATTEMPT_BUCKETS, RELEASE_LATENCY_BUCKETS,
};
pub use http::{HttpMetrics, LATENCY_BUCKETS};
pub use resume::{BoundResume, ResumeStages, ResumeTimings, RESUME_STAGES, RESUME_STAGE_BUCKETS};

type Labelled<K> = Mutex<BTreeMap<K, u64>>;

fn bump<K: Ord>(map: &Labelled<K>, key: K) {
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    *map.entry(key).or_default() += 1;
}

fn read<K: Ord>(map: &Labelled<K>, key: &K) -> u64 {
    let map = map.lock().unwrap_or_else(|e| e.into_inner());
    map.get(key).copied().unwrap_or(0)
}

/// What the lifecycle coordinators of this process did.
#[derive(Debug, Default)]
pub struct LifecycleCounters {
    /// `(disposition, outcome)`: outcome is `released`, `failed` (retried later), `refused`
    /// (the provider refused the request: a configuration problem, retried later),
    /// `abandoned` (the run resumed first; the running sandbox was kept) or
    /// `forced_terminate` (the provider reported the sandbox broken).
    releases: Labelled<(String, String)>,
    /// By operation: `release`, `provision`, `restore`, `attach`.
    retries: Labelled<String>,
    /// Failed release calls by class: `retry`, `uncertain`, `refused`, `final`.
    release_failures: Labelled<String>,
    /// Receipts the provider marked `duplicate` (a retry of a release it had done), by
    /// disposition.
    release_duplicates: Labelled<String>,
    /// Records that entered `needs_attention`, by disposition.
    attention_entered: Labelled<String>,
    /// Provider answers that named a sandbox other than the one asked for, by operation
    /// (`provision`, `restore`, `attach`).
    handle_mismatches: Labelled<String>,
    /// What the reconciler did, by action (`orphan_terminated`, `ended_terminated`,
    /// `record_reopened`, `checkpoint_deleted`, ...).
    reconciler_actions: Labelled<String>,
    /// Reconciler passes over one provider, by outcome (`ok`, `skipped`, `failed`).
    reconciler_passes: Labelled<String>,
    /// `(endpoint, status)`: status is `ok`, the HTTP status of a provider error, or
    /// `uncertain` / `unreachable` / `error` when there was none.
    provider_calls: Labelled<(String, String)>,
}

impl LifecycleCounters {
    pub fn release(&self, disposition: &str, outcome: &str) {
        bump(&self.releases, (disposition.to_owned(), outcome.to_owned()));
    }

    pub fn retry(&self, operation: &str) {
        bump(&self.retries, operation.to_owned());
    }

    pub fn release_failure(&self, class: &str) {
        bump(&self.release_failures, class.to_owned());
    }

    pub fn release_duplicate(&self, disposition: &str) {
        bump(&self.release_duplicates, disposition.to_owned());
    }

    pub fn attention_entered(&self, disposition: &str) {
        bump(&self.attention_entered, disposition.to_owned());
    }

    pub fn handle_mismatch(&self, operation: &str) {
        bump(&self.handle_mismatches, operation.to_owned());
    }

    pub fn handle_mismatches(&self, operation: &str) -> u64 {
        read(&self.handle_mismatches, &operation.to_owned())
    }

    pub fn attention_entries(&self, disposition: &str) -> u64 {
        read(&self.attention_entered, &disposition.to_owned())
    }

    pub fn reconciler_action(&self, action: &str) {
        bump(&self.reconciler_actions, action.to_owned());
    }

    pub fn reconciler_actions(&self, action: &str) -> u64 {
        read(&self.reconciler_actions, &action.to_owned())
    }

    pub fn reconciler_pass(&self, outcome: &str) {
        bump(&self.reconciler_passes, outcome.to_owned());
    }

    pub fn reconciler_passes(&self, outcome: &str) -> u64 {
        read(&self.reconciler_passes, &outcome.to_owned())
    }

    pub fn release_failures(&self, class: &str) -> u64 {
        read(&self.release_failures, &class.to_owned())
    }

    pub fn release_duplicates(&self, disposition: &str) -> u64 {
        read(&self.release_duplicates, &disposition.to_owned())
    }

    pub fn provider_call(&self, endpoint: &str, status: &str) {
        bump(
            &self.provider_calls,
            (endpoint.to_owned(), status.to_owned()),
        );
    }

    pub fn releases(&self, disposition: &str, outcome: &str) -> u64 {
        read(
            &self.releases,
            &(disposition.to_owned(), outcome.to_owned()),
        )
    }

    pub fn retries(&self, operation: &str) -> u64 {
        read(&self.retries, &operation.to_owned())
    }

    pub fn provider_calls(&self, endpoint: &str, status: &str) -> u64 {
        read(
            &self.provider_calls,
            &(endpoint.to_owned(), status.to_owned()),
        )
    }

    fn render(&self, out: &mut String) {
        let name = "sagents_lifecycle_releases_total";
        let _ = writeln!(
            out,
            "# HELP {name} Sandbox releases by disposition and outcome.\n# TYPE {name} counter"
        );
        for ((disposition, outcome), n) in self
            .releases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            let _ = writeln!(
                out,
                "{name}{{disposition=\"{}\",outcome=\"{}\"}} {n}",
                escape(disposition),
                escape(outcome)
            );
        }
        let one_label = [
            (
                "sagents_lifecycle_retries_total",
                "Provider operations scheduled for a retry with backoff.",
                "operation",
                &self.retries,
            ),
            (
                "sagents_lifecycle_release_failures_total",
                "Failed release calls by class (retry, uncertain, refused, final).",
                "class",
                &self.release_failures,
            ),
            (
                "sagents_lifecycle_release_duplicates_total",
                "Release receipts the provider marked duplicate, by disposition.",
                "disposition",
                &self.release_duplicates,
            ),
            (
                "sagents_lifecycle_attention_entered_total",
                "Releases that could not be confirmed within their attempt budget.",
                "disposition",
                &self.attention_entered,
            ),
            (
                "sagents_lifecycle_handle_mismatches_total",
                "Provider answers naming another run's, tenant's, spec's or policy's sandbox, by operation.",
                "operation",
                &self.handle_mismatches,
            ),
            (
                "sagents_reconciler_actions_total",
                "What the reconciler changed after comparing inventories with records.",
                "action",
                &self.reconciler_actions,
            ),
            (
                "sagents_reconciler_passes_total",
                "Reconciler passes over one provider, by outcome.",
                "outcome",
                &self.reconciler_passes,
            ),
        ];
        for (name, help, label, map) in one_label {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (value, n) in map.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                let _ = writeln!(out, "{name}{{{label}=\"{}\"}} {n}", escape(value));
            }
        }
        let name = "sagents_provider_calls_total";
        let _ = writeln!(
            out,
            "# HELP {name} Calls to sandbox providers by endpoint and status.\n# TYPE {name} counter"
        );
        for ((endpoint, status), n) in self
            .provider_calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            let _ = writeln!(
                out,
                "{name}{{endpoint=\"{}\",status=\"{}\"}} {n}",
                escape(endpoint),
                escape(status)
            );
        }
    }
}

pub(crate) fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn renders_the_log_drop_counter_with_or_without_a_log() {
        let m = Metrics::default();
        assert!(m
            .render_prometheus()
            .contains("\nsagents_log_lines_dropped_total 0\n"));
        let (writer, _thread) =
            crate::telemetry::queue::spawn(std::io::sink(), 64, std::time::Duration::ZERO).unwrap();
        m.track_log_drops(writer.dropped_lines());
        let text = m.render_prometheus();
        assert!(text.contains("# TYPE sagents_log_lines_dropped_total counter\n"));
        assert!(text.contains("\nsagents_log_lines_dropped_total 0\n"));
    }

    #[test]
    fn renders_counters_and_cumulative_histograms() {
        let m = Metrics::default();
        Metrics::inc(&m.lease_claims);
        m.http
            .observe("GET", "/v1/x/{id}", 200, Duration::from_millis(3));
        m.http
            .observe("GET", "/v1/x/{id}", 404, Duration::from_millis(300));
        let text = m.render_prometheus();
        assert!(text.contains("sagents_lease_claims_total 1\n"));
        assert!(text.contains(
            "sagents_http_requests_total{method=\"GET\",route=\"/v1/x/{id}\",status=\"404\"} 1"
        ));
        let b = "sagents_http_request_duration_seconds_bucket{method=\"GET\",route=\"/v1/x/{id}\"";
        assert!(text.contains(&format!("{b},le=\"0.001\"}} 0")));
        assert!(text.contains(&format!("{b},le=\"0.005\"}} 1")));
        assert!(text.contains(&format!("{b},le=\"0.5\"}} 2")));
        assert!(text.contains(&format!("{b},le=\"+Inf\"}} 2")));
        assert_eq!(m.http.requests("GET", "/v1/x/{id}", 200), 1);
    }

    #[test]
    fn renders_lifecycle_counters_and_gauges() {
        let m = Metrics::default();
        m.lifecycle.release("snapshot_and_terminate", "released");
        m.lifecycle.release("snapshot_and_terminate", "released");
        m.lifecycle.release("terminate", "failed");
        m.lifecycle.retry("release");
        m.lifecycle.provider_call("release", "503");
        let text = m.render_prometheus();
        assert!(text.contains(
            "sagents_lifecycle_releases_total{disposition=\"snapshot_and_terminate\",outcome=\"released\"} 2\n"
        ));
        assert!(text.contains(
            "sagents_lifecycle_releases_total{disposition=\"terminate\",outcome=\"failed\"} 1\n"
        ));
        assert!(text.contains("sagents_lifecycle_retries_total{operation=\"release\"} 1\n"));
        assert!(
            text.contains("sagents_provider_calls_total{endpoint=\"release\",status=\"503\"} 1\n")
        );
        assert_eq!(
            m.lifecycle.releases("snapshot_and_terminate", "released"),
            2
        );
        assert_eq!(m.lifecycle.provider_calls("release", "ok"), 0);

        let snapshot = LifecycleMetrics {
            active_sandboxes: 3,
            retained_sandboxes: 1,
            pending_releases: 2,
            release_failure_count: 1,
            release_retry_count: 4,
            bind_retry_count: 1,
            max_blocked_age_seconds: 12.5,
            needs_attention_count: 2,
            oldest_attention_age_seconds: 7200.0,
            average_release_latency_seconds: 0.25,
            release_latency_p50_seconds: 0.2,
            release_latency_p95_seconds: 0.5,
            release_latency_p99_seconds: 0.75,
            records_by_state: [("active".to_string(), 3)].into_iter().collect(),
            generated_at: chrono::Utc::now(),
            histograms: ReleaseHistograms {
                latency: Histogram {
                    bounds: vec![0.5, 1.0],
                    cumulative: vec![1, 3],
                    count: 4,
                    sum: 7.5,
                },
                attempts: Histogram::default(),
            },
        };
        let mut out = String::new();
        render_lifecycle_gauges(&snapshot, &mut out);
        assert!(out.contains("sagents_lifecycle_bind_retry_count 1\n"));
        for line in [
            "# TYPE sagents_lifecycle_release_duration_seconds histogram\n",
            "sagents_lifecycle_release_duration_seconds_bucket{le=\"0.5\"} 1\n",
            "sagents_lifecycle_release_duration_seconds_bucket{le=\"1\"} 3\n",
            "sagents_lifecycle_release_duration_seconds_bucket{le=\"+Inf\"} 4\n",
            "sagents_lifecycle_release_duration_seconds_sum 7.5\n",
            "sagents_lifecycle_release_duration_seconds_count 4\n",
            "sagents_lifecycle_release_attempts_count 0\n",
        ] {
            assert!(out.contains(line), "{line} in {out}");
        }
        assert!(out.contains("sagents_lifecycle_active_sandboxes 3\n"));
        assert!(out.contains("sagents_lifecycle_max_blocked_age_seconds 12.5\n"));
        assert!(out.contains("sagents_lifecycle_needs_attention 2\n"));
        assert!(out.contains("sagents_lifecycle_needs_attention_oldest_age_seconds 7200\n"));
        assert!(out.contains("sagents_lifecycle_release_latency_seconds{quantile=\"0.95\"} 0.5\n"));
        assert!(out.contains("sagents_lifecycle_records{state=\"active\"} 3\n"));
        assert!(out.contains("# TYPE sagents_lifecycle_pending_releases gauge\n"));
    }
}
