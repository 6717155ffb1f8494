//! The `request finished` line of every answered request, written in the JSON format without
//! going through `tracing`'s dispatch and field visitor.
//!
//! It is the one line logged per request, so its cost is paid on every request: formatted
//! here from typed values it costs a fraction of the generic path. It is byte for byte the line
//! [`super::json::JsonLine`] makes of the same event (a test holds them together), passes the
//! same filter (`RUST_LOG`, for [`TARGET`] at `info`) and goes through the same bounded queue.

use std::cell::RefCell;
use std::io::Write as _;
use std::time::SystemTime;

use tracing_appender::non_blocking::NonBlocking;
use tracing_subscriber::fmt::MakeWriter;

use super::json::{push_json_str, write_timestamp};

/// The target the line names, as the envelope's `tracing` event would.
pub const TARGET: &str = "sagents::http::envelope";
pub const MESSAGE: &str = "request finished";

/// The fields of one request's line.
#[derive(Debug, Clone, Copy)]
pub struct RequestLine<'a> {
    pub method: &'a str,
    pub route: &'a str,
    pub status: u16,
    pub latency_ms: f64,
    pub request_id: &'a str,
}

/// Writes request lines into the log's queue. Only a JSON log has one.
#[derive(Clone)]
pub struct RequestLog {
    writer: NonBlocking,
}

impl RequestLog {
    pub(super) fn new(writer: NonBlocking) -> Self {
        Self { writer }
    }

    /// Whether the filter lets the line through.
    pub fn enabled(&self) -> bool {
        tracing::enabled!(target: TARGET, tracing::Level::INFO)
    }

    /// Queues the line (or counts it dropped when the queue is full).
    pub fn write(&self, line: &RequestLine<'_>) {
        LINE.with(|buf| {
            let Ok(mut buf) = buf.try_borrow_mut() else {
                return;
            };
            buf.clear();
            format(&mut buf, line, SystemTime::now());
            let _ = self.writer.make_writer().write_all(buf.as_bytes());
        });
    }
}

thread_local! {
    static LINE: RefCell<String> = RefCell::new(String::with_capacity(512));
}

/// The JSON line, newline included, appended to `out`.
fn format(out: &mut String, line: &RequestLine<'_>, now: SystemTime) {
    out.push_str("{\"timestamp\":\"");
    write_timestamp(out, now);
    out.push_str("\",\"level\":\"INFO\",\"message\":");
    push_json_str(out, MESSAGE);
    out.push_str(",\"method\":");
    push_json_str(out, line.method);
    out.push_str(",\"route\":");
    push_json_str(out, line.route);
    out.push_str(",\"status\":");
    out.push_str(itoa::Buffer::new().format(line.status));
    out.push_str(",\"latency_ms\":");
    if line.latency_ms.is_finite() {
        out.push_str(ryu::Buffer::new().format_finite(line.latency_ms));
    } else {
        out.push_str("null");
    }
    out.push_str(",\"target\":");
    push_json_str(out, TARGET);
    out.push_str(",\"request_id\":");
    push_json_str(out, line.request_id);
    out.push_str("}\n");
}

#[cfg(test)]
mod tests {
    use super::super::context;
    use super::super::json::testing::json_lines_of;
    use super::*;

    /// `line` without its timestamp, which differs between two writes.
    fn untimed(line: &str) -> String {
        let (_, rest) = line.split_once("\",\"level\"").unwrap();
        rest.to_owned()
    }

    #[test]
    fn the_line_is_the_json_formatters_line_of_the_same_event() {
        let line = RequestLine {
            method: "GET",
            route: "/v1/sessions/{session_id}/snapshot",
            status: 304,
            latency_ms: 0.0421,
            request_id: "req-\"1\"",
        };
        let generic = json_lines_of(|| {
            context::with_request_id(line.request_id.into(), || {
                tracing::info!(
                    target: TARGET,
                    message = MESSAGE,
                    method = line.method,
                    route = line.route,
                    status = line.status,
                    latency_ms = line.latency_ms
                );
            });
        });
        let mut direct = String::new();
        format(&mut direct, &line, SystemTime::now());
        assert_eq!(untimed(&direct), untimed(&generic));
        let parsed: serde_json::Value = serde_json::from_str(&direct).unwrap();
        assert_eq!(parsed["request_id"], "req-\"1\"");
        assert_eq!(parsed["status"], 304);
    }
}
