//! The log never holds a request up: lines it had to drop are counted on `/metrics`.

use std::time::Duration;

use reqwest::Method;

use crate::common::app::TestApp;
use sagents::store::Backend;
use sagents::telemetry;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_log_lines_are_exported_on_metrics() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    // A queue of 8 bytes: each 16-byte line is dropped whatever the log thread is doing.
    let (writer, thread) = telemetry::queue::spawn(std::io::sink(), 8, Duration::ZERO).unwrap();
    app.state.metrics.track_log_drops(writer.dropped_lines());
    for _ in 0..7 {
        writer.push(b"a 16-byte line.\n");
    }
    let dropped = writer.dropped_lines().get();
    assert_eq!(dropped, 7);

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
    drop(thread);
    app.stop().await;
}

/// The served binary writes one JSON line per request straight into its log queue, and every
/// one of them is in the log once the process has stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_binary_logs_every_request_line_by_the_time_it_stops() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}/logs.db", dir.path().display());
    let bin = env!("CARGO_BIN_EXE_sagents");
    let token = std::process::Command::new(bin)
        .args(["token", "create", "--role", "frontend", "--tenant", "t"])
        .env("SAGENTS_DATABASE_URL", &db)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(token.status.success());
    let token = String::from_utf8(token.stdout).unwrap().trim().to_owned();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log_path = dir.path().join("server.log");
    let mut server = std::process::Command::new(bin)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--log-format", "json"])
        .env("SAGENTS_DATABASE_URL", &db)
        .env_remove("RUST_LOG")
        .stdout(std::fs::File::create(dir.path().join("stdout")).unwrap())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    crate::common::app::until(|| async {
        client.get(format!("{base}/healthz")).send().await.is_ok()
    })
    .await;
    let path = "/v1/sessions/ses_00000000000000000000000000000000/snapshot";
    let asked = 300;
    for _ in 0..asked {
        let res = client
            .get(format!("{base}{path}"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 404);
    }
    let stopped = std::process::Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    assert!(server.wait().unwrap().success());
    let log = std::fs::read_to_string(&log_path).unwrap();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{e}: {l}"))
        })
        .filter(|l| l["route"] == "/v1/sessions/{session_id}/snapshot")
        .collect();
    assert_eq!(lines.len(), asked, "{log}");
    for line in &lines {
        assert_eq!(line["message"], "request finished");
        assert_eq!(line["status"], 404);
        assert!(line["request_id"].as_str().is_some_and(|id| id.len() == 32));
    }
}
