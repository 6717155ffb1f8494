//! After a lost answer, everyone can find out where they stand: a runtime reads its run back
//! (state, lease holder, latest suspension) and a frontend lists its tenant's sessions.

use sagents::domain::token::Role;
use sagents::store::Backend;
use serde_json::Value;

use crate::common::app::{expect_json, expect_problem, TestApp};
use crate::on_both_backends;

on_both_backends!(
    a_runtime_reads_back_its_run_after_a_lost_answer,
    a_frontend_pages_through_its_sessions_newest_first
);

async fn a_runtime_reads_back_its_run_after_a_lost_answer(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, run_id, claim) = app.claimed_run("worker-7").await;
    let path = format!("/v1/runs/{run_id}");
    let running = app.get_ok(&path, &app.runtime).await;
    assert_eq!(running["run"]["state"], "running");
    assert_eq!(running["lease"]["worker_id"], "worker-7");
    assert_eq!(running["lease"]["expires_at"], claim["lease"]["expires_at"]);
    assert_eq!(running["latest_suspension_id"], Value::Null);

    // The suspend lands, but its answer is lost: reading back tells the runtime it did.
    let token = claim["lease"]["fencing_token"].as_i64().unwrap();
    app.suspend(&run_id, token, true).await;
    let suspended = app.get_ok(&path, &app.runtime).await;
    assert_eq!(suspended["run"]["state"], "suspended");
    assert_eq!(
        suspended["lease"],
        Value::Null,
        "handed back with the suspend"
    );
    let suspension = suspended["latest_suspension_id"].as_str().unwrap();
    assert!(suspension.starts_with("sus_"), "{suspension}");

    expect_problem(
        app.get(&path, &app.frontend).await,
        403,
        "auth.forbidden",
        None,
    )
    .await;
    let other = app.token(Role::Runtime, Some("other-tenant")).await;
    expect_problem(app.get(&path, &other).await, 404, "run.not_found", None).await;
}

async fn a_frontend_pages_through_its_sessions_newest_first(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut created = Vec::new();
    for _ in 0..5 {
        created.push(app.create_session().await);
    }
    let other = app.token(Role::Frontend, Some("other-tenant")).await;
    let theirs = expect_json(
        app.post("/v1/sessions", &other, &serde_json::json!({}))
            .await,
        201,
    )
    .await;

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/sessions?limit=2&cursor={c}"),
            None => "/v1/sessions?limit=2".to_string(),
        };
        let page = app.get_ok(&path, &app.frontend).await;
        for s in page["sessions"].as_array().unwrap() {
            seen.push(s["id"].as_str().unwrap().to_string());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    created.reverse();
    assert_eq!(seen, created, "every session once, newest first");
    assert!(!seen.contains(&theirs["id"].as_str().unwrap().to_string()));
    expect_problem(
        app.get("/v1/sessions?limit=0", &app.frontend).await,
        422,
        "request.invalid",
        Some("limit"),
    )
    .await;
    let foreign = format!("/v1/sessions?cursor={}", theirs["id"].as_str().unwrap());
    expect_problem(
        app.get(&foreign, &app.frontend).await,
        404,
        "session.not_found",
        None,
    )
    .await;
}
