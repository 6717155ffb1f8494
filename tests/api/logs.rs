//! The log never holds a request up: lines it had to drop are counted on `/metrics`.

use std::io::{self, Write};
use std::sync::mpsc;

use reqwest::Method;
use tracing_subscriber::fmt::MakeWriter;

use crate::common::app::TestApp;
use sagents::store::Backend;
use sagents::telemetry;

/// A log sink whose first write waits until the test lets it go.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_log_lines_are_exported_on_metrics() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (release, wait) = mpsc::channel();
    let (writer, guard) = telemetry::non_blocking(Stuck(Some(wait)), 2);
    app.state.metrics.track_log_drops(writer.error_counter());
    for _ in 0..10 {
        writer.make_writer().write_all(b"line\n").unwrap();
    }
    let dropped = writer.error_counter().dropped_lines();
    assert!(dropped >= 7, "{dropped}");

    let res = app
        .request(Method::GET, "/metrics", &app.admin)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let text = res.text().await.unwrap();
    assert!(
        text.contains("# TYPE sagents_log_lines_dropped_total counter\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("\nsagents_log_lines_dropped_total {dropped}\n")),
        "{text}"
    );
    release.send(()).unwrap();
    drop(guard);
    app.stop().await;
}
