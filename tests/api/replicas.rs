//! Two replicas on one PostgreSQL database: a change on one wakes long-polls on the other.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::app::TestApp;
use sagents::store::Backend;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_on_one_replica_wakes_a_long_poll_on_the_other() {
    let a = TestApp::spawn(Backend::Postgres).await;
    let b = a.second_replica().await;
    let s = a.suspended_with_interaction().await;
    let (etag, _) = a.snapshot(&s.session_id).await;
    assert_eq!(
        b.snapshot(&s.session_id).await.0,
        etag,
        "one database, one revision"
    );

    let poll = {
        let req = a
            .request(
                reqwest::Method::GET,
                &format!("/v1/sessions/{}/snapshot?wait_seconds=30", s.session_id),
                &a.frontend,
            )
            .header("if-none-match", &etag);
        tokio::spawn(async move {
            let res = req.send().await.unwrap();
            (
                Instant::now(),
                res.status().as_u16(),
                res.json::<serde_json::Value>().await.unwrap(),
            )
        })
    };
    a.until_waiting(1).await;
    b.post_ok(
        &s.reply_path(),
        &b.frontend,
        &json!({"decision": "approve"}),
        200,
    )
    .await;
    let replied_at = Instant::now();
    let (woke_at, status, snap) = tokio::time::timeout(Duration::from_secs(5), poll)
        .await
        .expect("the long-poll on replica A answers")
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(snap["runs"][0]["status"], "resuming");
    let lag = woke_at.saturating_duration_since(replied_at);
    assert!(
        lag < Duration::from_secs(1),
        "replica A woke {lag:?} after the reply on B"
    );

    // Work created through B wakes a claim long-poll held by A.
    let resumed = a.claim_one("wa").await;
    assert_eq!(resumed["kind"], "resume");
    let claim = {
        let req = a
            .request(reqwest::Method::POST, "/v1/runtime/claims", &a.runtime)
            .json(&json!({"worker_id": "wa", "wait_seconds": 30}));
        tokio::spawn(async move {
            let body = req
                .send()
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap();
            (Instant::now(), body)
        })
    };
    a.until_waiting(1).await;
    let run_id = b.create_run(&s.session_id).await;
    let created_at = Instant::now();
    let (woke_at, claimed) = tokio::time::timeout(Duration::from_secs(5), claim)
        .await
        .expect("the claim answers")
        .unwrap();
    assert_eq!(claimed["claims"][0]["run"]["id"], run_id.as_str());
    let lag = woke_at.saturating_duration_since(created_at);
    assert!(
        lag < Duration::from_millis(500),
        "replica A claimed {lag:?} after B created the run"
    );
    b.stop().await;
    a.stop().await;
}
