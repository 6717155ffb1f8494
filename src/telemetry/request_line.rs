//! The `request finished` line of every answered request, written in the JSON format without
//! going through `tracing`'s dispatch and field visitor.
//!
//! It is the one line logged per request, so its cost is paid on every request: formatted
//! here from typed values it costs a fraction of the generic path. It is byte for byte the line
//! [`super::json::JsonLine`] makes of the same event (a test holds them together), passes the
//! same filter (`RUST_LOG`, for [`TARGET`] at `info`) and goes through the same bounded queue.

use std::cell::RefCell;
use std::time::SystemTime;

use super::json::{push_json_str, write_timestamp};
use super::queue::LogWriter;

/// The target the line names, as the envelope's `tracing` event would.
pub const TARGET: &str = "sagents::http::server::envelope";
pub const MESSAGE: &str = "request finished";

/// The fields of one request's line.
#[derive(Debug, Clone, Copy)]
pub struct RequestLine<'a> {
    pub method: &'a str,
    pub route: &'a str,
    pub status: u16,
    /// Whole microseconds: the line shows milliseconds to three decimals at most.
    pub latency_us: u64,
    pub request_id: &'a str,
}

/// The latency a `tracing` event of the line carries, the same number the line shows.
pub fn latency_ms(latency_us: u64) -> f64 {
    latency_us as f64 / 1000.0
}

/// Writes request lines into the log's queue. Only a JSON log has one.
#[derive(Clone)]
pub struct RequestLog {
    writer: LogWriter,
}

impl RequestLog {
    pub(super) fn new(writer: LogWriter) -> Self {
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
            self.writer.push(buf.as_bytes());
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
    push_millis(out, line.latency_us);
    out.push_str(",\"target\":");
    push_json_str(out, TARGET);
    out.push_str(",\"request_id\":");
    push_json_str(out, line.request_id);
    out.push_str("}\n");
}

/// `latency_us` in milliseconds as JSON's float formatting writes [`latency_ms`] of it
/// (`0.0`, `0.042`, `12.5`), from integers instead of a shortest-float search.
fn push_millis(out: &mut String, latency_us: u64) {
    // Past 15 digits a float no longer holds every microsecond exactly.
    if latency_us >= 1_000_000_000_000_000 {
        out.push_str(ryu::Buffer::new().format_finite(latency_ms(latency_us)));
        return;
    }
    out.push_str(itoa::Buffer::new().format(latency_us / 1000));
    out.push('.');
    let fraction = latency_us % 1000;
    if fraction == 0 {
        out.push('0');
        return;
    }
    let digits = [
        b'0' + (fraction / 100) as u8,
        b'0' + (fraction / 10 % 10) as u8,
        b'0' + (fraction % 10) as u8,
    ];
    let significant = 3 - digits.iter().rev().take_while(|d| **d == b'0').count();
    out.push_str(std::str::from_utf8(&digits[..significant]).unwrap_or("0"));
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
            latency_us: 421,
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
                    latency_ms = latency_ms(line.latency_us)
                );
            });
        });
        let mut direct = String::new();
        format(&mut direct, &line, SystemTime::now());
        assert_eq!(untimed(&direct), untimed(&generic));
        let parsed: serde_json::Value = serde_json::from_str(&direct).unwrap();
        assert_eq!(parsed["request_id"], "req-\"1\"");
        assert_eq!(parsed["status"], 304);
        assert_eq!(parsed["latency_ms"], 0.421);
    }

    #[test]
    fn milliseconds_are_written_as_the_float_formatter_writes_them() {
        let samples = (0..20_000)
            .chain((0..40).map(|k| 7u64.pow(k / 2) * (k as u64 + 1)))
            .chain([999_999_999_999_999, 1_000_000_000_000_000, u64::MAX]);
        for us in samples {
            let mut ours = String::new();
            push_millis(&mut ours, us);
            let float = ryu::Buffer::new().format_finite(latency_ms(us)).to_owned();
            assert_eq!(ours, float, "{us} µs");
        }
    }
}
