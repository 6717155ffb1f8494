//! The log's queue: every line is appended to one shared, bounded buffer, and a thread of
//! its own writes the buffer out in one go.
//!
//! A line costs its writer a lock and a copy: no allocation per line, nothing for the log
//! thread to free, and the thread is woken only when it sleeps on an empty buffer. When the
//! buffer is full the line is dropped and counted, so a slow sink loses lines but never
//! holds a writer up.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    dropped: Arc<AtomicU64>,
    limit_bytes: usize,
}

#[derive(Default)]
struct State {
    lines: Vec<u8>,
    /// The log thread is waiting for a line.
    idle: bool,
    closed: bool,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Appends lines to the queue; cheap to clone. Each `write` is kept whole.
#[derive(Clone)]
pub struct LogWriter {
    shared: Arc<Shared>,
}

/// How many lines the queue dropped because it was full.
#[derive(Clone, Debug, Default)]
pub struct DroppedLines(Arc<AtomicU64>);

impl DroppedLines {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The log thread. Dropping it writes out what is queued and stops the thread.
#[must_use = "dropping the guard stops the log"]
pub struct LogThread {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// A queue of at most `limit_bytes` drained into `out` by a thread named `sagents-log`,
/// which rests `rest` after each write so that the lines queued meanwhile go out together.
pub fn spawn<W: Write + Send + 'static>(
    mut out: W,
    limit_bytes: usize,
    rest: Duration,
) -> io::Result<(LogWriter, LogThread)> {
    let shared = Arc::new(Shared {
        state: Mutex::new(State::default()),
        wake: Condvar::new(),
        dropped: Arc::default(),
        limit_bytes,
    });
    let drained = shared.clone();
    let thread = std::thread::Builder::new()
        .name("sagents-log".into())
        .spawn(move || {
            // Swapped with the queue's buffer: the two keep their capacity between batches.
            let mut batch = Vec::new();
            loop {
                let closed = {
                    let mut state = drained.state();
                    while state.lines.is_empty() && !state.closed {
                        state.idle = true;
                        state = drained.wake.wait(state).unwrap_or_else(|e| e.into_inner());
                    }
                    std::mem::swap(&mut state.lines, &mut batch);
                    state.closed
                };
                // A sink that fails loses these lines; the next batch tries again.
                let _ = out.write_all(&batch).and_then(|()| out.flush());
                batch.clear();
                if closed && drained.state().lines.is_empty() {
                    return;
                }
                std::thread::sleep(rest);
            }
        })?;
    Ok((
        LogWriter {
            shared: shared.clone(),
        },
        LogThread {
            shared,
            thread: Some(thread),
        },
    ))
}

impl LogWriter {
    /// Queues `line`, or counts it dropped when the queue has no room for it.
    pub fn push(&self, line: &[u8]) {
        let shared = &*self.shared;
        let mut state = shared.state();
        if state.closed || state.lines.len() + line.len() > shared.limit_bytes {
            drop(state);
            shared.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        state.lines.extend_from_slice(line);
        let wake = std::mem::take(&mut state.idle);
        drop(state);
        if wake {
            shared.wake.notify_one();
        }
    }

    pub fn dropped_lines(&self) -> DroppedLines {
        DroppedLines(self.shared.dropped.clone())
    }
}

impl Write for &LogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.push(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LogWriter {
    type Writer = &'a LogWriter;

    fn make_writer(&'a self) -> &'a LogWriter {
        self
    }
}

impl Drop for LogThread {
    fn drop(&mut self) {
        self.shared.state().closed = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;
    use crate::telemetry::json::testing::Sink;

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
    fn every_line_is_written_in_order_by_the_time_the_thread_stops() {
        let sink = Sink::default();
        let (writer, thread) = spawn(sink.clone(), 1 << 20, Duration::from_millis(1)).unwrap();
        let writers: Vec<_> = (0..4)
            .map(|t| {
                let writer = writer.clone();
                std::thread::spawn(move || {
                    for n in 0..500 {
                        writer.push(format!("{t} {n}\n").as_bytes());
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        drop(thread);
        let text = sink.text();
        for t in 0..4 {
            let mine: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with(&format!("{t} ")))
                .collect();
            let expected: Vec<String> = (0..500).map(|n| format!("{t} {n}")).collect();
            assert_eq!(mine, expected);
        }
        assert_eq!(writer.dropped_lines().get(), 0);
    }

    #[test]
    fn tracing_events_reach_the_sink_as_whole_lines() {
        let sink = Sink::default();
        let (writer, thread) = spawn(sink.clone(), 1 << 20, Duration::ZERO).unwrap();
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
        drop(thread);
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
        let (writer, thread) = spawn(Stuck(Some(wait)), 20, Duration::ZERO).unwrap();
        writer.push(b"first\n");
        // The thread takes the first line and is stuck writing it.
        while !writer.shared.state().lines.is_empty() {
            std::thread::yield_now();
        }
        for _ in 0..10 {
            writer.push(b"line\n");
        }
        // Four lines of five bytes fill the queue; the other six are dropped.
        assert_eq!(writer.dropped_lines().get(), 6);
        release.send(()).unwrap();
        drop(thread);
        writer.push(b"after the end\n");
        assert_eq!(writer.dropped_lines().get(), 7);
    }
}
