//! Process-wide counters shared by the store, the HTTP layer and the workers, and their
//! Prometheus text rendering.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

#[derive(Debug, Default)]
pub struct Metrics {
    pub lease_claims: AtomicU64,
    pub lease_takeovers: AtomicU64,
    pub fenced_rejections: AtomicU64,
    /// Requests currently held by a long-poll (snapshot or claims).
    pub long_polls_waiting: AtomicI64,
    pub http: HttpMetrics,
}

impl Metrics {
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
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
                "sagents_lease_takeovers_total",
                "Leases granted over an expired lease.",
                &self.lease_takeovers,
            ),
            (
                "sagents_fenced_rejections_total",
                "Writes refused because their fencing token was stale.",
                &self.fenced_rejections,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            let _ = writeln!(out, "{name} {}", value.load(Ordering::Relaxed));
        }
        let _ = writeln!(
            out,
            "# HELP sagents_long_polls_waiting Requests currently held by a long-poll.\n\
             # TYPE sagents_long_polls_waiting gauge\nsagents_long_polls_waiting {}",
            self.long_polls_waiting.load(Ordering::Relaxed)
        );
        self.http.render(&mut out);
        out
    }
}

/// Upper bounds (seconds) of the request latency histogram buckets.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0,
];

#[derive(Debug, Default)]
pub struct HttpMetrics {
    routes: Mutex<BTreeMap<(String, String), RouteStats>>,
}

#[derive(Debug, Default)]
struct RouteStats {
    by_status: BTreeMap<u16, u64>,
    buckets: [u64; LATENCY_BUCKETS.len()],
    count: u64,
    sum_seconds: f64,
}

impl HttpMetrics {
    /// `route` is the matched route template (bounded cardinality), never the raw path.
    pub fn observe(&self, method: &str, route: &str, status: u16, latency: Duration) {
        let secs = latency.as_secs_f64();
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        let stats = routes
            .entry((method.to_owned(), route.to_owned()))
            .or_default();
        *stats.by_status.entry(status).or_default() += 1;
        for (bucket, bound) in stats.buckets.iter_mut().zip(LATENCY_BUCKETS) {
            if secs <= bound {
                *bucket += 1;
            }
        }
        stats.count += 1;
        stats.sum_seconds += secs;
    }

    pub fn requests(&self, method: &str, route: &str, status: u16) -> u64 {
        let routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        routes
            .get(&(method.to_owned(), route.to_owned()))
            .and_then(|s| s.by_status.get(&status).copied())
            .unwrap_or(0)
    }

    fn render(&self, out: &mut String) {
        let routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(
            out,
            "# HELP sagents_http_requests_total HTTP requests by method, route and status.\n\
             # TYPE sagents_http_requests_total counter"
        );
        for ((method, route), stats) in routes.iter() {
            for (status, n) in &stats.by_status {
                let _ = writeln!(
                    out,
                    "sagents_http_requests_total{{method=\"{}\",route=\"{}\",status=\"{status}\"}} {n}",
                    escape(method),
                    escape(route)
                );
            }
        }
        let name = "sagents_http_request_duration_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} HTTP request latency by method and route.\n# TYPE {name} histogram"
        );
        for ((method, route), stats) in routes.iter() {
            let labels = format!("method=\"{}\",route=\"{}\"", escape(method), escape(route));
            for (n, bound) in stats.buckets.iter().zip(LATENCY_BUCKETS) {
                let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {n}");
            }
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels},le=\"+Inf\"}} {}\n{name}_sum{{{labels}}} {}\n{name}_count{{{labels}}} {}",
                stats.count, stats.sum_seconds, stats.count
            );
        }
    }
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
