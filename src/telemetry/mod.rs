//! Logging: `tracing`, human-readable or JSON lines, filtered by `RUST_LOG`.
//!
//! A request has no span of its own: every line logged while it is handled carries its id
//! (`request_id`, from [`context`]), and its one `request finished` line carries method,
//! route, status and latency.
//!
//! A request never writes to stderr itself: it appends its formatted line to a bounded queue
//! ([`queue`]) that one background thread writes out. When the queue is full the line is
//! dropped and counted (`sagents_log_lines_dropped_total`), so a slow log sink can lose lines
//! but can never slow a request down. When stderr is a file, the thread syncs it as it goes
//! ([`writeback`]), so that its pages never pile up for the database's `fsync`s to wait behind.

pub mod context;
pub mod json;
pub mod queue;
pub mod request_line;
pub mod writeback;

use std::fmt;
use std::io;
use std::time::Duration;

use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{Format, Full, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;
use request_line::RequestLog;

const DEFAULT_FILTER: &str = "info,sqlx=warn,tower_http=info";
/// Bytes of lines waiting for the log thread before new lines are dropped (8,000 request
/// lines or more).
pub const LOG_QUEUE_BYTES: usize = 2 << 20;
/// After each write the log thread rests this long, so lines queued meanwhile are written
/// together and a request does not wake the thread for each line.
const WRITE_REST: Duration = Duration::from_millis(5);

/// The log's background writer. Dropping it writes out the queued lines and stops the
/// thread, so it lives as long as the process serves.
#[must_use = "dropping the guard stops the log"]
pub struct LogGuard {
    _thread: queue::LogThread,
    dropped: queue::DroppedLines,
    request_log: Option<RequestLog>,
}

impl LogGuard {
    /// Counts the lines dropped because the queue was full.
    pub fn dropped_lines(&self) -> queue::DroppedLines {
        self.dropped.clone()
    }

    /// The writer of request lines, for a JSON log.
    pub fn request_log(&self) -> Option<RequestLog> {
        self.request_log.clone()
    }

    /// Writes out every queued line and stops the log thread.
    pub fn flush(self) {}
}

/// Installs the global subscriber writing through a non-blocking stderr. A second call
/// (tests) leaves the first subscriber in place.
pub fn init(format: LogFormat) -> io::Result<LogGuard> {
    let out = writeback::Writeback::new(io::stderr(), writeback::SYNC_EVERY);
    let (writer, thread) = queue::spawn(out, LOG_QUEUE_BYTES, WRITE_REST)?;
    let dropped = writer.dropped_lines();
    let request_log = (format == LogFormat::Json).then(|| RequestLog::new(writer.clone()));
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(false);
    let _ = match format {
        LogFormat::Pretty => builder
            .event_format(PrettyLine(Format::default().with_ansi(false)))
            .try_init(),
        LogFormat::Json => builder
            .fmt_fields(tracing_subscriber::fmt::format::JsonFields::new())
            .event_format(json::JsonLine)
            .try_init(),
    };
    Ok(LogGuard {
        _thread: thread,
        dropped,
        request_log,
    })
}

/// The default human-readable line, followed by ` request_id=…` while a request is handled.
struct PrettyLine(Format<Full>);

impl<S, N> FormatEvent<S, N> for PrettyLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let Some(id) = context::request_id() else {
            return self.0.format_event(ctx, writer, event);
        };
        let mut line = String::with_capacity(256);
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        let line = line.trim_end_matches('\n');
        writeln!(writer, "{line} request_id={id}")
    }
}
