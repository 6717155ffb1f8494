//! Ten thousand snapshot long-polls held by one `sagents serve` process: its memory stays
//! small, one change answers them all, and SIGTERM stops it cleanly.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

const WAITERS: usize = 10_000;
/// Measured: about 24 KB per waiting request, of which about 14 KB is hyper's own
/// per-connection and per-request floor (read buffer, parsed request, connection task).
const MAX_RSS_GROWTH_MB: u64 = 300;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sagents(db: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sagents"));
    cmd.args(args)
        .env("SAGENTS_DATABASE_URL", db)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    cmd
}

fn create_token(db: &str, role: &str) -> String {
    let out = sagents(db, &["token", "create", "--role", role])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let secret = String::from_utf8(out.stdout).unwrap();
    assert_eq!(secret.lines().count(), 1, "only the secret on stdout");
    secret.trim().to_owned()
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Sends one request on a fresh connection and returns the status code. At most as many
/// connections as `connecting` has permits are being opened at once.
async fn raw_get(addr: &str, path: &str, headers: &str, connecting: &Semaphore) -> u16 {
    let permit = connecting.acquire().await.unwrap();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n{headers}\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    drop(permit);
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "connection closed before a response");
        head.extend_from_slice(&buf[..n]);
    }
    std::str::from_utf8(&head[9..12]).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_long_polls_are_cheap() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}/scale.db", dir.path().display());
    let (frontend, runtime, admin) = (
        create_token(&db, "frontend"),
        create_token(&db, "runtime"),
        create_token(&db, "admin"),
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut server = Server(
        sagents(
            &db,
            &["serve", "--listen", &addr, "--long-poll-max-seconds", "120"],
        )
        .stdout(Stdio::null())
        .spawn()
        .unwrap(),
    );
    let client = reqwest::Client::new();
    let base = format!("http://{addr}");
    crate::common::app::until(|| async {
        client.get(format!("{base}/healthz")).send().await.is_ok()
    })
    .await;

    let session: serde_json::Value = client
        .post(format!("{base}/v1/sessions"))
        .bearer_auth(&frontend)
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let session_id = session["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/sessions/{session_id}/snapshot?wait_seconds=120");
    let headers = format!(
        "Authorization: Bearer {frontend}\r\nIf-None-Match: \"{}\"\r\n",
        session["revision"]
    );
    let connecting = Arc::new(Semaphore::new(256));
    let at_once = raw_get(&addr, &path.replace("120", "0"), &headers, &connecting).await;
    assert_eq!(at_once, 304);
    let baseline = rss_kib(server.0.id());

    let mut waiters = Vec::with_capacity(WAITERS);
    for _ in 0..WAITERS {
        let (addr, path, headers, connecting) = (
            addr.clone(),
            path.clone(),
            headers.clone(),
            connecting.clone(),
        );
        waiters.push(tokio::spawn(async move {
            raw_get(&addr, &path, &headers, &connecting).await
        }));
    }
    let metrics = |admin: String| {
        let client = client.clone();
        let url = format!("{base}/metrics");
        async move {
            client
                .get(url)
                .bearer_auth(admin)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    let waiting_line = format!("sagents_long_polls_waiting {WAITERS}\n");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !metrics(admin.clone()).await.contains(&waiting_line) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "waiters never all waited"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let growth_mb = rss_kib(server.0.id()).saturating_sub(baseline) / 1024;
    eprintln!(
        "SCALE baseline_kib={baseline} held_kib={}",
        rss_kib(server.0.id())
    );
    assert!(
        growth_mb < MAX_RSS_GROWTH_MB,
        "{WAITERS} waiting long-polls grew the server by {growth_mb} MB"
    );

    // One change answers every waiter with the new snapshot.
    let created = client
        .post(format!("{base}/v1/sessions/{session_id}/runs"))
        .bearer_auth(&runtime)
        .json(&serde_json::json!({"resolved_spec_hash": format!("sha256:{}", "a".repeat(64))}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    for w in waiters {
        let status = tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .expect("every waiter is answered")
            .unwrap();
        assert_eq!(status, 200);
    }

    // SIGTERM: a graceful stop with a clean exit.
    let pid = i32::try_from(server.0.id()).unwrap();
    // SAFETY: kill takes plain integers and touches no memory of ours.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let exit = loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no exit after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(exit.success(), "exit after SIGTERM: {exit:?}");
}
