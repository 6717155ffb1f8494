//! The whole life of a run, as a frontend and a runtime worker see it.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::app::{expect_json, hash, TestApp};
use crate::on_both_backends;
use sagents::store::Backend;

on_both_backends!(
    whole_cycle,
    claims_long_poll_wakes_on_new_work,
    events_page_through_the_log
);

async fn whole_cycle(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (session_id, run_id, claim) = app.claimed_run("worker-1").await;
    assert_eq!(claim["kind"], "start");
    assert_eq!(claim["run"]["id"], run_id.as_str());
    assert_eq!(claim["run"]["state"], "running");
    assert_eq!(claim["expected"]["resolved_spec_hash"], hash('a'));
    let token = claim["lease"]["fencing_token"].as_i64().unwrap();
    let lease_id = claim["lease"]["lease_id"].as_str().unwrap().to_owned();

    let hb = app
        .post_ok(
            &format!("/v1/runtime/leases/{lease_id}/heartbeat"),
            &app.runtime,
            &json!({"fencing_token": token}),
            200,
        )
        .await;
    assert!(hb["expires_at"].is_string());

    let job = app
        .post_ok(
            &format!("/v1/runs/{run_id}/jobs"),
            &app.runtime,
            &json!({"fencing_token": token, "kind": "shell", "execution_affinity": "external"}),
            201,
        )
        .await;
    assert_eq!(job["state"], "running");
    assert_eq!(job["pause_behavior"], "detach");
    let job_id = job["id"].as_str().unwrap().to_owned();

    app.suspend(&run_id, token, true).await;

    // Jobs finish after their run handed back its lease: no fencing token needed.
    let done = app
        .request(
            reqwest::Method::PATCH,
            &format!("/v1/runs/{run_id}/jobs/{job_id}"),
            &app.runtime,
        )
        .json(&json!({"state": "completed"}))
        .send()
        .await
        .unwrap();
    assert_eq!(expect_json(done, 200).await["state"], "completed");

    let snapshot_path = format!("/v1/sessions/{session_id}/snapshot");
    let res = app.get(&snapshot_path, &app.frontend).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["cache-control"], "no-cache");
    let etag = res.headers()["etag"].to_str().unwrap().to_owned();
    let snap: serde_json::Value = res.json().await.unwrap();
    assert_eq!(etag, format!("\"{}\"", snap["session"]["revision"]));
    assert_eq!(snap["runs"][0]["status"], "waiting_for_input");
    let pending = &snap["pending_interactions"][0];
    assert_eq!(pending["allowed_decisions"], json!(["approve", "deny"]));
    assert_eq!(pending["payload"]["command"], "rm -rf build");
    let interaction_id = pending["id"].as_str().unwrap().to_owned();
    for forbidden in ["sandbox", "lease", "fencing_token", "retry_count"] {
        assert!(!snap.to_string().contains(forbidden), "{forbidden} leaked");
    }

    let repeat = app
        .request(reqwest::Method::GET, &snapshot_path, &app.frontend)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(repeat.status(), 304);
    assert_eq!(repeat.headers()["etag"].to_str().unwrap(), etag);
    assert!(repeat.bytes().await.unwrap().is_empty());

    // A long-poll started before the reply wakes on it.
    let poll = {
        let req = app
            .request(
                reqwest::Method::GET,
                &format!("{snapshot_path}?wait_seconds=30"),
                &app.frontend,
            )
            .header("if-none-match", &etag);
        tokio::spawn(async move {
            let res = req.send().await.unwrap();
            let at = Instant::now();
            (
                res.status().as_u16(),
                res.headers()["etag"].to_str().unwrap().to_owned(),
                at,
            )
        })
    };
    app.until_waiting(1).await;
    let reply = app
        .post_ok(
            &format!("/v1/sessions/{session_id}/interactions/{interaction_id}/reply"),
            &app.frontend,
            &json!({"decision": "approve", "payload": {"note": "ok"}}),
            200,
        )
        .await;
    let replied_at = Instant::now();
    assert_eq!(reply["interaction"]["status"], "resolved");
    assert_eq!(reply["interaction"]["resolution"]["decision"], "approve");
    assert_eq!(reply["run_status"], "resuming");
    let (status, new_etag, woke_at) = tokio::time::timeout(Duration::from_secs(5), poll)
        .await
        .expect("long-poll answers")
        .unwrap();
    assert_eq!(status, 200);
    assert_ne!(new_etag, etag);
    let lag = woke_at.saturating_duration_since(replied_at);
    assert!(
        lag < Duration::from_millis(100),
        "long-poll woke {lag:?} after the reply"
    );

    let (_, snap) = app.snapshot(&session_id).await;
    assert_eq!(snap["runs"][0]["status"], "resuming");
    assert_eq!(snap["pending_interactions"], json!([]));

    let claim = app.claim_one("worker-2").await;
    assert_eq!(claim["kind"], "resume");
    assert_eq!(claim["checkpoint"]["sequence"], 1);
    assert_eq!(claim["checkpoint"]["state"], json!({"step": 1}));
    assert_eq!(claim["checkpoint"]["codec_version"], "v1");
    let token2 = claim["lease"]["fencing_token"].as_i64().unwrap();
    assert!(token2 > token);

    let running = app
        .post_ok(
            &format!("/v1/runs/{run_id}/resumed"),
            &app.runtime,
            &json!({"fencing_token": token2, "resolved_spec_hash": hash('a')}),
            200,
        )
        .await;
    assert_eq!(running["state"], "running");
    let completed = app
        .post_ok(
            &format!("/v1/runs/{run_id}/complete"),
            &app.runtime,
            &json!({"fencing_token": token2, "output": {"answer": 42}}),
            200,
        )
        .await;
    assert_eq!(completed["state"], "completed");
    assert_eq!(completed["output"]["answer"], 42);
    let (_, snap) = app.snapshot(&session_id).await;
    assert_eq!(snap["runs"][0]["status"], "completed");
    app.stop().await;
}

async fn claims_long_poll_wakes_on_new_work(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let session_id = app.create_session().await;
    let empty = app
        .post_ok(
            "/v1/runtime/claims",
            &app.runtime,
            &json!({"worker_id": "w"}),
            200,
        )
        .await;
    assert_eq!(empty, json!({"claims": []}));

    let poll = {
        let req = app
            .request(reqwest::Method::POST, "/v1/runtime/claims", &app.runtime)
            .json(&json!({"worker_id": "w", "wait_seconds": 30}));
        tokio::spawn(async move {
            let res = req.send().await.unwrap();
            (
                Instant::now(),
                res.json::<serde_json::Value>().await.unwrap(),
            )
        })
    };
    app.until_waiting(1).await;
    let run_id = app.create_run(&session_id).await;
    let created_at = Instant::now();
    let (woke_at, body) = tokio::time::timeout(Duration::from_secs(5), poll)
        .await
        .expect("claim long-poll answers")
        .unwrap();
    assert_eq!(body["claims"][0]["run"]["id"], run_id.as_str());
    assert!(woke_at.saturating_duration_since(created_at) < Duration::from_millis(500));
    app.stop().await;
}

async fn events_page_through_the_log(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let s = app.suspended_with_interaction().await;
    let path = format!("/v1/sessions/{}/events", s.session_id);
    let all = app.get_ok(&path, &app.frontend).await;
    let events = all["events"].as_array().unwrap();
    assert!(events.len() >= 2, "{all}");
    let seqs: Vec<i64> = events
        .iter()
        .map(|e| e["sequence"].as_i64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(all["next_after"], *seqs.last().unwrap());

    let first = app.get_ok(&format!("{path}?limit=1"), &app.frontend).await;
    assert_eq!(first["events"].as_array().unwrap().len(), 1);
    let rest = app
        .get_ok(
            &format!("{path}?after={}", first["next_after"]),
            &app.frontend,
        )
        .await;
    assert_eq!(rest["events"].as_array().unwrap().len(), events.len() - 1);
    let none = app
        .get_ok(
            &format!("{path}?after={}", all["next_after"]),
            &app.frontend,
        )
        .await;
    assert_eq!(none["events"], json!([]));
    assert_eq!(none["next_after"], all["next_after"]);
    app.stop().await;
}
