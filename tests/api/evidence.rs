//! Who answered: a token's display name is kept with each decision it makes.

use serde_json::json;

use crate::common::app::{expect_problem, TestApp, TENANT};
use crate::common::db::Backend;
use crate::on_both_backends;

on_both_backends!(a_named_token_signs_its_decisions_with_its_name);

async fn a_named_token_signs_its_decisions_with_its_name(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let s = app.suspended_with_interaction().await;
    let body = json!({"role": "frontend", "tenant": TENANT, "name": "Ann Example (ops)"});
    let created = app
        .post_ok("/v1/admin/tokens", &app.admin, &body, 201)
        .await;
    assert_eq!(created["name"], "Ann Example (ops)");
    let secret = created["secret"].as_str().unwrap();

    let answer = app
        .post_ok(
            &s.reply_path(),
            secret,
            &json!({"decision": "approve"}),
            200,
        )
        .await;
    let resolution = &answer["interaction"]["resolution"];
    assert_eq!(
        resolution["resolved_by"],
        format!("token:{}", created["id"].as_str().unwrap())
    );
    assert_eq!(resolution["resolved_by_name"], "Ann Example (ops)");
    let log = app
        .get_ok(
            &format!("/v1/sessions/{}/events", s.session_id),
            &app.frontend,
        )
        .await;
    let resolved = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "interaction.resolved")
        .expect("the resolution is logged");
    assert_eq!(resolved["data"]["resolved_by_name"], "Ann Example (ops)");
    let tokens = app.get_ok("/v1/admin/tokens", &app.admin).await;
    let listed = tokens["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == created["id"])
        .unwrap();
    assert_eq!(listed["name"], "Ann Example (ops)");
    assert!(listed.get("secret").is_none());

    let before = app.get_ok("/v1/admin/tokens", &app.admin).await;
    for name in [
        json!(""),
        json!("tab\there"),
        json!("x".repeat(129)),
        json!(7),
    ] {
        let body = json!({"role": "frontend", "tenant": TENANT, "name": name});
        let res = app.post("/v1/admin/tokens", &app.admin, &body).await;
        expect_problem(res, 422, "request.invalid", Some("name")).await;
    }
    assert_eq!(app.get_ok("/v1/admin/tokens", &app.admin).await, before);
}
