//! The server's edges: a client that sends no request head is cut off (one being answered is
//! not), connections past the cap wait for a free slot, and no request can add label values
//! to `/metrics`.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::app::{Options, TestApp};
use sagents::store::Backend;

const BOUND: Duration = Duration::from_secs(10);

async fn connect(app: &TestApp) -> TcpStream {
    TcpStream::connect(app.base.trim_start_matches("http://"))
        .await
        .unwrap()
}

/// Sends one keep-alive request and reads its whole (small) answer.
async fn exchange(stream: &mut TcpStream, request_line: &str) -> String {
    let req = format!("{request_line}\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    read_answer(stream).await
}

async fn read_answer(stream: &mut TcpStream) -> String {
    let mut buf = vec![0u8; 16 * 1024];
    let n = stream.read(&mut buf).await.unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Reads until the server closes the connection (bounded).
async fn closed_by_server(stream: &mut TcpStream) {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(BOUND, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(_)) => continue,
            Err(_) => panic!("the server kept the connection open"),
        }
    }
}

/// A server that cuts off connections idle for one second.
async fn with_idle_timeout_of_one_second() -> TestApp {
    TestApp::spawn_with(
        Backend::Sqlite,
        Options {
            http_idle_timeout_seconds: Some(1),
            ..Options::default()
        },
    )
    .await
}

#[tokio::test]
async fn idle_and_slow_clients_are_cut_off() {
    let app = with_idle_timeout_of_one_second().await;
    // Connected, never a byte.
    let mut silent = connect(&app).await;
    // Half a request head.
    let mut slow = connect(&app).await;
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost")
        .await
        .unwrap();
    // A full request, then an idle keep-alive.
    let mut idle = connect(&app).await;
    assert!(exchange(&mut idle, "GET /healthz HTTP/1.1")
        .await
        .starts_with("HTTP/1.1 200"));
    for stream in [&mut silent, &mut slow, &mut idle] {
        closed_by_server(stream).await;
    }
    app.stop().await;
}

/// A long-poll that outlasts the idle timeout is answered: the connection is busy while it
/// waits, and idle (then cut off) only once its answer is written.
#[tokio::test]
async fn a_long_poll_longer_than_the_idle_timeout_is_answered() {
    let app = with_idle_timeout_of_one_second().await;
    let session = app.create_session().await;
    let (etag, _) = app.snapshot(&session).await;
    let mut stream = connect(&app).await;
    let req = format!(
        "GET /v1/sessions/{session}/snapshot?wait_seconds=3 HTTP/1.1\r\nHost: x\r\n\
         Authorization: Bearer {}\r\nIf-None-Match: {etag}\r\n\r\n",
        app.frontend
    );
    stream.write_all(req.as_bytes()).await.unwrap();
    let answer = tokio::time::timeout(BOUND, read_answer(&mut stream))
        .await
        .expect("answered");
    assert!(answer.starts_with("HTTP/1.1 304"), "{answer}");
    closed_by_server(&mut stream).await;
    app.stop().await;
}

#[tokio::test]
async fn connections_past_the_cap_wait_for_a_free_slot() {
    let app = TestApp::spawn_with(
        Backend::Sqlite,
        Options {
            max_connections: Some(1),
            ..Options::default()
        },
    )
    .await;
    let mut first = connect(&app).await;
    assert!(exchange(&mut first, "GET /healthz HTTP/1.1")
        .await
        .starts_with("HTTP/1.1 200"));
    let mut second = connect(&app).await;
    second
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let waited = tokio::time::timeout(Duration::from_millis(300), read_answer(&mut second)).await;
    assert!(waited.is_err(), "served past the cap: {waited:?}");
    let metrics = &app.state.metrics.http;
    assert_eq!(
        metrics
            .connections_open
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    assert!(
        metrics
            .connection_limit_reached
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1
    );
    drop(first);
    let answer = tokio::time::timeout(BOUND, read_answer(&mut second))
        .await
        .expect("served once the first connection closed");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(second);
    app.stop().await;
}

#[tokio::test]
async fn unknown_methods_add_no_label_values() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let mut stream = connect(&app).await;
    for method in ["BREW", "PROPFIND", "XYZZY"] {
        let answer = exchange(&mut stream, &format!("{method} /healthz HTTP/1.1")).await;
        assert!(answer.starts_with("HTTP/1.1 4"), "{answer}");
    }
    drop(stream);
    let text = app.get("/metrics", &app.admin).await.text().await.unwrap();
    assert!(text.contains("method=\"other\""), "{text}");
    for method in ["BREW", "PROPFIND", "XYZZY"] {
        assert!(!text.contains(method), "{method} became a label");
    }
    assert!(text.contains("sagents_http_connections_open "));
    app.stop().await;
}
