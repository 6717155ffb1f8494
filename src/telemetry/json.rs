//! The JSON line format: one object per event, written straight into the line buffer.
//!
//! `{"timestamp", "level", "message", <the event's fields>, "target", "request_id"?, "span"?}`:
//! the request id of the request being handled, and the innermost span with its fields.
//! Span fields are stored as JSON when the span opens ([`JsonFields`]) and copied in as they
//! are, never parsed back.

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use super::context;

/// A line buffer grown past this by one long line is not kept for the next.
const MAX_REUSED_LINE: usize = 64 * 1024;

/// Formats events as JSON lines (see the module's documentation).
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonLine;

impl<S> FormatEvent<S, JsonFields> for JsonLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        LINE.with(|reused| match reused.try_borrow_mut() {
            Ok(mut line) => {
                line.clear();
                build_line(&mut line, ctx, event);
                let written = writer.write_str(&line);
                if line.capacity() > MAX_REUSED_LINE {
                    *line = String::with_capacity(512);
                }
                written
            }
            // Only if formatting a value logged an event of its own.
            Err(_) => {
                let mut line = String::with_capacity(512);
                build_line(&mut line, ctx, event);
                writer.write_str(&line)
            }
        })
    }
}

/// The whole JSON line of `event`, newline included, appended to `line`.
fn build_line<S>(line: &mut String, ctx: &FmtContext<'_, S, JsonFields>, event: &Event<'_>)
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    line.push_str("{\"timestamp\":\"");
    write_timestamp(line, SystemTime::now());
    line.push_str("\",\"level\":\"");
    line.push_str(event.metadata().level().as_str());
    line.push('"');
    event.record(&mut FieldsVisitor { out: line });
    line.push_str(",\"target\":");
    push_json_str(line, event.metadata().target());
    if let Some(id) = context::request_id() {
        line.push_str(",\"request_id\":");
        push_json_str(line, &id);
    }
    if let Some(span) = ctx.lookup_current() {
        line.push_str(",\"span\":{\"name\":");
        push_json_str(line, span.name());
        let extensions = span.extensions();
        if let Some(fields) = extensions.get::<FormattedFields<JsonFields>>() {
            let inner = fields
                .fields
                .trim()
                .strip_prefix('{')
                .and_then(|f| f.strip_suffix('}'))
                .unwrap_or("");
            if !inner.is_empty() {
                line.push(',');
                line.push_str(inner);
            }
        }
        line.push('}');
    }
    line.push_str("}\n");
}

/// Writes each field as `,"name":value`; `message` is named `message` like any other.
struct FieldsVisitor<'a> {
    out: &'a mut String,
}

impl FieldsVisitor<'_> {
    fn key(&mut self, field: &Field) {
        self.out.push(',');
        push_json_str(self.out, field.name());
        self.out.push(':');
    }
}

impl Visit for FieldsVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.key(field);
        push_json_str(self.out, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        self.out.push_str(itoa::Buffer::new().format(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.key(field);
        self.out.push_str(itoa::Buffer::new().format(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.key(field);
        self.out.push_str(if value { "true" } else { "false" });
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.key(field);
        if value.is_finite() {
            self.out.push_str(ryu::Buffer::new().format_finite(value));
        } else {
            self.out.push_str("null");
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_debug(field, &format_args!("{value}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.key(field);
        SCRATCH.with(|scratch| {
            let mut text = scratch.borrow_mut();
            text.clear();
            let _ = write!(text, "{value:?}");
            push_json_str(self.out, &text);
        });
    }
}

thread_local! {
    /// The line being formatted, reused from one event to the next.
    static LINE: RefCell<String> = RefCell::new(String::with_capacity(512));
    /// Debug-formatted values are written here first, to be escaped into the line.
    static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Appends `s` as a JSON string, quotes included.
pub fn push_json_str(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    // No early exit, so the scan vectorizes; almost every string needs no escape.
    let plain = !s.bytes().fold(false, |seen, b| {
        seen | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if plain {
        out.push_str(s);
        out.push('"');
        return;
    }
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let escaped = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if escaped.is_empty() {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push_str(escaped);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ` (UTC).
pub(super) fn write_timestamp(out: &mut String, now: SystemTime) {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    let mut digits = *b"0000-00-00T00:00:00.000000Z";
    let mut put = |at: usize, width: usize, mut value: u64| {
        for i in (at..at + width).rev() {
            digits[i] = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, 4, year.clamp(0, 9999) as u64);
    put(5, 2, month.into());
    put(8, 2, day.into());
    put(11, 2, rem / 3600);
    put(14, 2, rem / 60 % 60);
    put(17, 2, rem % 60);
    put(20, 6, since.subsec_micros().into());
    out.push_str(std::str::from_utf8(&digits).unwrap_or_default());
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// What the telemetry tests read back.
#[cfg(test)]
pub(super) mod testing {
    use std::io;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::format::JsonFields;

    use super::JsonLine;

    /// A log destination the test reads back.
    #[derive(Clone, Default)]
    pub struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Sink {
        pub fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    impl io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// The JSON lines `f` logs, as the service's JSON format writes them.
    pub fn json_lines_of(f: impl FnOnce()) -> String {
        let sink = Sink::default();
        let writer = sink.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .fmt_fields(JsonFields::new())
            .event_format(JsonLine)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        sink.text()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::json_lines_of;
    use super::*;

    #[test]
    fn a_line_carries_its_fields_the_request_id_and_the_current_span() {
        let text = json_lines_of(|| {
            let span = tracing::info_span!("lifecycle_step", run_id = "run_1", generation = 2);
            let _entered = span.enter();
            context::with_request_id("req-\"7\"".into(), || {
                tracing::warn!(error = %"it \"broke\"\n", attempt = 3u64, ok = false, "release failed");
            });
            tracing::info!(latency_ms = 1.5, "outside a request");
        });
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        let first = &lines[0];
        assert_eq!(first["level"], "WARN");
        assert_eq!(first["message"], "release failed");
        assert_eq!(first["error"], "it \"broke\"\n");
        assert_eq!(first["attempt"], 3);
        assert_eq!(first["ok"], false);
        assert_eq!(first["request_id"], "req-\"7\"");
        assert_eq!(first["span"]["name"], "lifecycle_step");
        assert_eq!(first["span"]["run_id"], "run_1");
        assert_eq!(first["span"]["generation"], 2);
        assert!(first["timestamp"].as_str().unwrap().ends_with('Z'));
        assert_eq!(lines[1]["latency_ms"], 1.5);
        assert!(lines[1].get("request_id").is_none());
    }

    #[test]
    fn strings_are_escaped_as_json() {
        let mut out = String::new();
        push_json_str(&mut out, "a\"b\\c\nd\u{1}é");
        assert_eq!(out, r#""a\"b\\c\nd\u0001é""#);
        let back: String = serde_json::from_str(&out).unwrap();
        assert_eq!(back, "a\"b\\c\nd\u{1}é");
    }

    #[test]
    fn timestamps_are_rfc3339_utc_with_microseconds() {
        let mut out = String::new();
        let t = UNIX_EPOCH + std::time::Duration::from_micros(1_796_178_750_123_456);
        write_timestamp(&mut out, t);
        assert_eq!(out, "2026-12-02T02:32:30.123456Z");
        let parsed = chrono::DateTime::parse_from_rfc3339(&out).unwrap();
        assert_eq!(parsed.timestamp_micros(), 1_796_178_750_123_456);
        for days in [-719_468, -1, 0, 59, 60, 365, 11_016, 20_789, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            let date = chrono::NaiveDate::from_ymd_opt(y as i32, m, d).unwrap();
            let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
            assert_eq!((date - epoch).num_days(), days, "{y}-{m}-{d}");
        }
    }
}
