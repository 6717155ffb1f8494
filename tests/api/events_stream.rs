//! Live session events over server-sent events: replay then live, resumption without loss or
//! repetition, tenant scope, heartbeats, shutdown, and another replica's commits.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::app::{expect_problem, Options, TestApp};
use crate::on_both_backends;
use sagents::domain::token::Role;
use sagents::store::Backend;

on_both_backends!(
    a_stream_replays_the_log_then_follows_commits_live,
    a_stream_resumes_after_the_last_event_id_without_loss_or_repeat,
    events_committed_while_a_stream_opens_arrive_once_each_in_order,
    streams_are_tenant_scoped_and_bad_positions_are_problems,
    an_idle_stream_sends_heartbeats,
    a_stream_outlives_the_connection_idle_timeout,
    shutdown_ends_open_streams_cleanly,
    a_lease_taken_over_is_not_shown_to_frontends
);

#[derive(Debug, Default)]
struct Frame {
    id: Option<i64>,
    event: Option<String>,
    data: Option<Value>,
    comment: bool,
}

struct SseReader {
    res: reqwest::Response,
    buf: String,
}

impl SseReader {
    async fn open(app: &TestApp, path: &str, last_event_id: Option<&str>) -> SseReader {
        let mut req = app.request(Method::GET, path, &app.frontend);
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["content-type"], "text/event-stream");
        SseReader {
            res,
            buf: String::new(),
        }
    }

    /// The next frame (event or comment), or `None` when the stream ended; fails after 5 s.
    async fn frame(&mut self) -> Option<Frame> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                return Some(parse(&block));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let chunk = tokio::time::timeout(left, self.res.chunk())
                .await
                .expect("a frame within 5 s")
                .expect("the stream reads");
            match chunk {
                Some(bytes) => self.buf.push_str(std::str::from_utf8(&bytes).unwrap()),
                None => {
                    assert!(self.buf.trim().is_empty(), "a partial frame: {}", self.buf);
                    return None;
                }
            }
        }
    }

    /// The next event, skipping heartbeats.
    async fn event(&mut self) -> Frame {
        loop {
            let frame = self.frame().await.expect("the stream is open");
            if !frame.comment {
                return frame;
            }
        }
    }
}

fn parse(block: &str) -> Frame {
    let mut frame = Frame::default();
    for line in block.lines().filter(|l| !l.is_empty()) {
        if line.starts_with(':') {
            frame.comment = true;
        } else if let Some(v) = line.strip_prefix("id: ") {
            frame.id = Some(v.parse().unwrap());
        } else if let Some(v) = line.strip_prefix("event: ") {
            frame.event = Some(v.to_owned());
        } else if let Some(v) = line.strip_prefix("data: ") {
            frame.data = Some(serde_json::from_str(v).unwrap());
        } else {
            panic!("unexpected line {line:?}");
        }
    }
    frame
}

/// The session's whole stored log, through the paged endpoint.
async fn stored(app: &TestApp, session_id: &str) -> Vec<Value> {
    let page = app
        .get_ok(
            &format!("/v1/sessions/{session_id}/events?limit=1000"),
            &app.frontend,
        )
        .await;
    page["events"].as_array().unwrap().clone()
}

fn stream_path(session_id: &str) -> String {
    format!("/v1/sessions/{session_id}/events/stream")
}

async fn a_stream_replays_the_log_then_follows_commits_live(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let s = app.suspended_with_interaction().await;
    let log = stored(&app, &s.session_id).await;
    assert!(log.len() >= 4, "{log:?}");
    let mut sse = SseReader::open(&app, &stream_path(&s.session_id), None).await;
    for expected in &log {
        let frame = sse.event().await;
        assert_eq!(frame.id, expected["sequence"].as_i64());
        assert_eq!(frame.event.as_deref(), expected["type"].as_str());
        assert_eq!(frame.data.as_ref(), Some(expected));
    }
    app.post_ok(
        &s.reply_path(),
        &app.frontend,
        &json!({"decision": "approve"}),
        200,
    )
    .await;
    let next = log.len() as i64 + 1;
    let resolved = sse.event().await;
    assert_eq!(resolved.id, Some(next));
    assert_eq!(resolved.event.as_deref(), Some("interaction.resolved"));
    let data = resolved.data.unwrap();
    assert_eq!(data["data"]["interaction_id"], s.interaction_id.as_str());
    assert_eq!(data["session_id"], s.session_id.as_str());
    let resuming = sse.event().await;
    assert_eq!(resuming.id, Some(next + 1));
    assert_eq!(resuming.event.as_deref(), Some("run.resuming"));
    assert_eq!(stored(&app, &s.session_id).await.len() as i64, next + 1);
}

async fn a_stream_resumes_after_the_last_event_id_without_loss_or_repeat(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let s = app.suspended_with_interaction().await;
    let path = stream_path(&s.session_id);
    let mut first = SseReader::open(&app, &path, None).await;
    let one = first.event().await;
    let two = first.event().await;
    assert_eq!((one.id, two.id), (Some(1), Some(2)));
    drop(first);

    // Events committed while no stream is open are replayed on reconnect.
    app.post_ok(
        &s.reply_path(),
        &app.frontend,
        &json!({"decision": "approve"}),
        200,
    )
    .await;
    let total = stored(&app, &s.session_id).await.len() as i64;
    // The header wins over the query, as when an EventSource reconnects to its first URL.
    let mut again = SseReader::open(&app, &format!("{path}?after=0"), Some("2")).await;
    for id in 3..=total {
        assert_eq!(again.event().await.id, Some(id));
    }
    let mut by_query = SseReader::open(&app, &format!("{path}?after={}", total - 1), None).await;
    let last = by_query.event().await;
    assert_eq!(last.id, Some(total));
    assert_eq!(last.event.as_deref(), Some("run.resuming"));

    // Nothing after the end yet: the next event is the next commit.
    let mut at_end = SseReader::open(&app, &path, Some(&total.to_string())).await;
    app.post_ok(
        &format!("/v1/sessions/{}/runs/{}/cancel", s.session_id, s.run_id),
        &app.frontend,
        &json!({}),
        200,
    )
    .await;
    assert_eq!(at_end.event().await.id, Some(total + 1));
}

async fn events_committed_while_a_stream_opens_arrive_once_each_in_order(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (session_id, run_id, claim) = app.claimed_run("w").await;
    let token = claim["lease"]["fencing_token"].as_i64().unwrap();
    let jobs = 30;
    let writer = {
        let req = |_| {
            app.request(
                Method::POST,
                &format!("/v1/runs/{run_id}/jobs"),
                &app.runtime,
            )
            .json(
                &json!({"fencing_token": token, "kind": "shell", "execution_affinity": "external"}),
            )
        };
        let reqs: Vec<_> = (0..jobs).map(req).collect();
        tokio::spawn(async move {
            for r in reqs {
                assert_eq!(r.send().await.unwrap().status(), 201);
            }
        })
    };
    // Streams opened at different moments of the writes, from different positions.
    let mut streams = Vec::new();
    for after in [0, 1, 2] {
        let reader = SseReader::open(
            &app,
            &format!("{}?after={after}", stream_path(&session_id)),
            None,
        )
        .await;
        streams.push((after, reader));
    }
    writer.await.unwrap();
    let total = stored(&app, &session_id).await.len() as i64;
    assert!(total >= jobs, "{total}");
    for (after, mut sse) in streams {
        for id in after + 1..=total {
            assert_eq!(sse.event().await.id, Some(id), "stream from {after}");
        }
    }
}

async fn streams_are_tenant_scoped_and_bad_positions_are_problems(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let session_id = app.create_session().await;
    let path = stream_path(&session_id);
    let other = app.token(Role::Frontend, Some("other-tenant")).await;
    let res = app.get(&path, &other).await;
    expect_problem(res, 404, "session.not_found", None).await;
    let res = app.get(&stream_path("ses_nonsense"), &app.frontend).await;
    expect_problem(res, 404, "session.not_found", None).await;
    let res = app.get(&path, &app.runtime).await;
    expect_problem(res, 403, "auth.forbidden", None).await;
    for query in ["?after=-1", "?after=x"] {
        let res = app.get(&format!("{path}{query}"), &app.frontend).await;
        expect_problem(res, 422, "request.invalid", Some("after")).await;
    }
    for header in ["-3", "abc", ""] {
        let res = app
            .request(Method::GET, &path, &app.frontend)
            .header("last-event-id", header)
            .send()
            .await
            .unwrap();
        expect_problem(res, 422, "request.invalid", Some("Last-Event-ID")).await;
    }
    // The header wins over `after`, but a negative `after` is refused all the same.
    let res = app
        .request(Method::GET, &format!("{path}?after=-263"), &app.frontend)
        .header("last-event-id", "12")
        .send()
        .await
        .unwrap();
    expect_problem(res, 422, "request.invalid", Some("after")).await;
}

/// A server with one-second heartbeats, a session and a stream of it from its first event on.
async fn heartbeat_stream(backend: Backend, opts: Options) -> (TestApp, String, SseReader) {
    let app = TestApp::spawn_with(
        backend,
        Options {
            sse_heartbeat_seconds: Some(1),
            ..opts
        },
    )
    .await;
    let session_id = app.create_session().await;
    let sse = SseReader::open(&app, &stream_path(&session_id), Some("1")).await;
    (app, session_id, sse)
}

async fn an_idle_stream_sends_heartbeats(backend: Backend) {
    let (_app, _, mut sse) = heartbeat_stream(backend, Options::default()).await;
    let started = Instant::now();
    let frame = sse.frame().await.expect("open");
    assert!(frame.comment, "a heartbeat, not an event: {frame:?}");
    let gap = started.elapsed();
    assert!(
        gap >= Duration::from_millis(900) && gap < Duration::from_secs(3),
        "{gap:?}"
    );
    assert!(sse.frame().await.expect("open").comment);
}

/// The idle cut-off is for connections that send no request: a stream being answered keeps
/// its connection however long it lasts.
async fn a_stream_outlives_the_connection_idle_timeout(backend: Backend) {
    let idle = Options {
        http_idle_timeout_seconds: Some(1),
        ..Options::default()
    };
    let (app, session_id, mut sse) = heartbeat_stream(backend, idle).await;
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(2500) {
        assert!(sse.frame().await.expect("open").comment);
    }
    app.create_run(&session_id).await;
    assert_eq!(sse.event().await.event.as_deref(), Some("run.created"));
}

async fn shutdown_ends_open_streams_cleanly(backend: Backend) {
    let mut app = TestApp::spawn(backend).await;
    let session_id = app.create_session().await;
    let mut sse = SseReader::open(&app, &stream_path(&session_id), None).await;
    assert_eq!(sse.event().await.event.as_deref(), Some("session.created"));
    let server = app.take_server();
    app.trigger_shutdown();
    let ended = tokio::time::timeout(Duration::from_secs(2), async {
        while sse.frame().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the stream ends promptly");
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the server stops")
        .unwrap()
        .expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_on_one_replica_reaches_a_stream_on_the_other_within_a_second() {
    let a = TestApp::spawn(Backend::Postgres).await;
    let b = a.second_replica().await;
    let s = a.suspended_with_interaction().await;
    let total = stored(&a, &s.session_id).await.len() as i64;
    let mut sse = SseReader::open(&a, &stream_path(&s.session_id), Some(&total.to_string())).await;
    b.post_ok(
        &s.reply_path(),
        &b.frontend,
        &json!({"decision": "approve"}),
        200,
    )
    .await;
    let replied_at = Instant::now();
    let frame = sse.event().await;
    let lag = replied_at.elapsed();
    assert_eq!(frame.id, Some(total + 1));
    assert_eq!(frame.event.as_deref(), Some("interaction.resolved"));
    assert!(
        lag < Duration::from_secs(1),
        "replica A streamed it {lag:?} later"
    );
    drop(sse);
    b.stop().await;
    a.stop().await;
}

async fn a_lease_taken_over_is_not_shown_to_frontends(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        Options {
            manual_clock: true,
            ..Options::default()
        },
    )
    .await;
    let (session_id, run_id, _) = app.claimed_run("worker-1").await;
    app.advance(chrono::Duration::hours(1));
    let again = app.claim_one("worker-2").await;
    assert_eq!(again["run"]["id"], run_id.as_str(), "{again}");
    let log = app
        .get_ok(
            &format!("/v1/admin/sessions/{session_id}/events"),
            &app.admin,
        )
        .await;
    assert!(
        log["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "lease.taken_over"),
        "kept for operators: {log}"
    );
    let operators_only = app
        .get(
            &format!("/v1/admin/sessions/{session_id}/events"),
            &app.frontend,
        )
        .await;
    assert_eq!(operators_only.status(), 403);

    let seen = stored(&app, &session_id).await;
    assert!(!seen.is_empty());
    assert!(
        seen.iter()
            .all(|e| !e["type"].as_str().unwrap().starts_with("lease.")),
        "{seen:?}"
    );
    let mut sse = SseReader::open(&app, &stream_path(&session_id), None).await;
    for expected in &seen {
        assert_eq!(sse.event().await.data.as_ref(), Some(expected));
    }
    app.create_run(&session_id).await;
    let next = sse.event().await;
    assert_eq!(
        next.event.as_deref(),
        Some("run.created"),
        "the stream skips the take-over too"
    );
}
