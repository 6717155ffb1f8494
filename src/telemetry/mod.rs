//! Logging: `tracing`, human-readable or JSON lines, filtered by `RUST_LOG`.
//!
//! A request has no span of its own: every line logged while it is handled carries its id
//! (`request_id`, from [`context`]), and its one `request finished` line carries method,
//! route, status and latency.
//!
//! A request never writes to stderr itself: it hands its formatted line to a bounded queue
//! that one background thread drains into a buffered stderr. When the queue is full the line
//! is dropped and counted (`sagents_log_lines_dropped_total`), so a slow log sink can lose
//! lines but can never slow a request down.

pub mod context;
pub mod json;
pub mod request_line;

use std::fmt;
use std::io::{self, BufWriter, Write};
use std::time::Duration;

use tracing::{Event, Subscriber};
use tracing_appender::non_blocking::{ErrorCounter, NonBlocking, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::fmt::format::{Format, Full, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;
use request_line::RequestLog;

const DEFAULT_FILTER: &str = "info,sqlx=warn,tower_http=info";
/// Lines waiting for the log thread before new ones are dropped (about 2 MB when full).
pub const LOG_QUEUE_LINES: usize = 8192;
/// The log thread writes whatever it has drained in one go, up to this many bytes per write.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;
/// After each write the log thread rests this long, so lines queued meanwhile are written
/// together and a request does not wake the thread for each line.
const WRITE_REST: Duration = Duration::from_millis(5);

/// The log's background writer. Dropping it writes out the queued lines and stops the
/// thread, so it lives as long as the process serves.
#[must_use = "dropping the guard stops the log"]
pub struct LogGuard {
    _worker: WorkerGuard,
    dropped: ErrorCounter,
    request_log: Option<RequestLog>,
}

impl LogGuard {
    /// Counts the lines dropped because the queue was full.
    pub fn dropped_lines(&self) -> ErrorCounter {
        self.dropped.clone()
    }

    /// The writer of request lines, for a JSON log.
    pub fn request_log(&self) -> Option<RequestLog> {
        self.request_log.clone()
    }

    /// Writes out every queued line and stops the log thread.
    pub fn flush(self) {}
}

/// Writes through `inner`; each flush (the queue drained) is followed by a rest.
struct Batched<W> {
    inner: W,
    rest: Duration,
}

impl<W: Write> Write for Batched<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()?;
        std::thread::sleep(self.rest);
        Ok(())
    }
}

/// A lossy, bounded, non-blocking writer over `out`, drained by a thread of its own.
pub fn non_blocking<W: Write + Send + 'static>(
    out: W,
    queue_lines: usize,
) -> (NonBlocking, WorkerGuard) {
    NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(queue_lines)
        .thread_name("sagents-log")
        .finish(out)
}

/// Installs the global subscriber writing through a non-blocking stderr. A second call
/// (tests) leaves the first subscriber in place.
pub fn init(format: LogFormat) -> LogGuard {
    let out = Batched {
        inner: BufWriter::with_capacity(WRITE_BUFFER_BYTES, io::stderr()),
        rest: WRITE_REST,
    };
    let (writer, worker) = non_blocking(out, LOG_QUEUE_LINES);
    let dropped = writer.error_counter();
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
    LogGuard {
        _worker: worker,
        dropped,
        request_log,
    }
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

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use tracing_subscriber::fmt::MakeWriter;

    use super::json::testing::Sink;
    use super::*;

    /// A sink whose first write waits until the test lets it go.
    struct Stuck(Option<mpsc::Receiver<()>>);

    impl Write for Stuck {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if let Some(release) = self.0.take() {
                let _ = release.recv();
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn json_lines_reach_the_sink_once_the_guard_is_dropped() {
        let sink = Sink::default();
        let out = Batched {
            inner: BufWriter::new(sink.clone()),
            rest: WRITE_REST,
        };
        let (writer, guard) = non_blocking(out, 16);
        let subscriber = tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_writer(writer)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            for n in 0..3 {
                tracing::info!(n, "request finished");
            }
        });
        drop(guard);
        let text = sink.text();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        for (n, line) in lines.iter().enumerate() {
            assert_eq!(line["message"], "request finished");
            assert_eq!(line["n"], n);
        }
    }

    #[test]
    fn a_full_queue_drops_and_counts_lines_without_waiting() {
        let (release, wait) = mpsc::channel();
        let (writer, guard) = non_blocking(Stuck(Some(wait)), 4);
        let dropped = writer.error_counter();
        for _ in 0..20 {
            // Each write returns at once although the sink is stuck on the first line.
            writer.make_writer().write_all(b"line\n").unwrap();
        }
        // At most one line is in the stuck write and four are queued.
        assert!(dropped.dropped_lines() >= 15, "{}", dropped.dropped_lines());
        release.send(()).unwrap();
        drop(guard);
    }
}
