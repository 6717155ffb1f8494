//! HTTP request counts and latency by method and route, and the connections being served.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use super::escape;

/// Upper bounds (seconds) of the request latency histogram buckets.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0,
];

#[derive(Debug, Default)]
pub struct HttpMetrics {
    /// By method label, then route.
    routes: Mutex<BTreeMap<&'static str, BTreeMap<String, RouteStats>>>,
    /// Connections being served now.
    pub connections_open: AtomicI64,
    /// Times a connection waited because `SAGENTS_MAX_CONNECTIONS` were open.
    pub connection_limit_reached: AtomicU64,
}

#[derive(Debug, Default)]
struct RouteStats {
    by_status: BTreeMap<u16, u64>,
    buckets: [u64; LATENCY_BUCKETS.len()],
    count: u64,
    sum_seconds: f64,
}

/// The `method` label: a standard method, or `other`, so no request can add label values.
pub fn method_label(method: &str) -> &'static str {
    const STANDARD: [&str; 9] = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE",
    ];
    STANDARD
        .into_iter()
        .find(|m| *m == method)
        .unwrap_or("other")
}

impl HttpMetrics {
    /// `route` is the matched route template (bounded cardinality), never the raw path.
    pub fn observe(&self, method: &str, route: &str, status: u16, latency: Duration) {
        let secs = latency.as_secs_f64();
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        let by_route = routes.entry(method_label(method)).or_default();
        // A route seen before costs no allocation.
        if !by_route.contains_key(route) {
            by_route.insert(route.to_owned(), RouteStats::default());
        }
        let Some(stats) = by_route.get_mut(route) else {
            return;
        };
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
            .get(method_label(method))
            .and_then(|r| r.get(route))
            .and_then(|s| s.by_status.get(&status).copied())
            .unwrap_or(0)
    }

    pub(super) fn render(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP sagents_http_connections_open HTTP connections being served.\n\
             # TYPE sagents_http_connections_open gauge\n\
             sagents_http_connections_open {}\n\
             # HELP sagents_http_connection_limit_reached_total Connections that waited for a free slot.\n\
             # TYPE sagents_http_connection_limit_reached_total counter\n\
             sagents_http_connection_limit_reached_total {}",
            self.connections_open.load(Ordering::Relaxed),
            self.connection_limit_reached.load(Ordering::Relaxed)
        );
        let routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(
            out,
            "# HELP sagents_http_requests_total HTTP requests by method, route and status.\n\
             # TYPE sagents_http_requests_total counter"
        );
        let each = || {
            routes
                .iter()
                .flat_map(|(method, r)| r.iter().map(move |(route, stats)| (*method, route, stats)))
        };
        for (method, route, stats) in each() {
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
        for (method, route, stats) in each() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_methods_share_one_label() {
        let m = HttpMetrics::default();
        for method in ["GET", "BREW", "PROPFIND", "get"] {
            m.observe(method, "/x", 405, Duration::from_millis(1));
        }
        assert_eq!(m.requests("GET", "/x", 405), 1);
        assert_eq!(m.requests("other", "/x", 405), 3);
        let mut out = String::new();
        m.render(&mut out);
        assert!(!out.contains("BREW") && !out.contains("PROPFIND"));
        assert!(out.contains("sagents_http_connections_open 0"));
    }
}
