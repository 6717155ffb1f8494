//! Who answered: a token's display name is kept with each decision it makes.

use serde_json::json;

use crate::common::app::{expect_problem, TestApp, TENANT};
use crate::common::db::Backend;
use crate::on_both_backends;

on_both_backends!(
    a_named_token_signs_its_decisions_with_its_name,
    the_audit_chain_is_served_exported_and_verified,
);

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

async fn the_audit_chain_is_served_exported_and_verified(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let s = app.suspended_with_interaction().await;
    let body = json!({"role": "frontend", "tenant": TENANT, "name": "Ann"});
    let ann = app
        .post_ok("/v1/admin/tokens", &app.admin, &body, 201)
        .await;
    let secret = ann["secret"].as_str().unwrap();
    let reply = json!({"decision": "approve", "comment": "ok to ship"});
    app.post_ok(&s.reply_path(), secret, &reply, 200).await;

    let mine = app.get_ok("/v1/audit", &app.frontend).await;
    let kinds: Vec<&str> = mine["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    // The app's own frontend and runtime tokens, Ann's, then her decision.
    assert_eq!(
        kinds,
        [
            "token.created",
            "token.created",
            "token.created",
            "interaction.resolved"
        ],
        "{mine}"
    );
    let decision = &mine["records"][3];
    assert_eq!(decision["actor_name"], "Ann");
    assert_eq!(decision["data"]["comment"], "ok to ship");
    assert_eq!(decision["prev_hash"], mine["records"][2]["hash"]);
    assert_eq!(mine["next_cursor"], json!(null));
    let as_admin = app
        .get_ok(&format!("/v1/audit?tenant={TENANT}"), &app.admin)
        .await;
    assert_eq!(as_admin, mine);
    let first = app.get_ok("/v1/audit?limit=1", &app.frontend).await;
    assert_eq!(first["next_cursor"], "1");
    let rest = app
        .get_ok("/v1/audit?limit=1&cursor=3", &app.frontend)
        .await;
    assert_eq!(rest["records"][0], mine["records"][3]);

    let other = app.get("/v1/audit?tenant=globex", &app.frontend).await;
    expect_problem(other, 403, "auth.forbidden", None).await;
    let system = app.get_ok("/v1/audit", &app.admin).await;
    assert_eq!(
        system["records"][0]["tenant"], "*",
        "an admin reads the system chain by default"
    );
    for bad in [
        "cursor=-1",
        "cursor=abc",
        "limit=0",
        "limit=1001",
        "tenant=a%20b",
    ] {
        let res = app.get(&format!("/v1/audit?{bad}"), &app.admin).await;
        assert_eq!(res.status(), 422, "{bad}");
    }
    let runtime = app.get("/v1/audit", &app.runtime).await;
    assert_eq!(runtime.status(), 403);

    let (ok, exported, stderr) = super::operator_cli::sagents_with(
        &app.database_url,
        &[],
        &["audit", "export", "--tenant", TENANT],
    );
    assert!(ok, "{stderr}");
    assert_eq!(exported.lines().count(), 4);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("chain.jsonl");
    std::fs::write(&file, &exported).unwrap();
    let path = file.to_str().unwrap();
    let (ok, verified, stderr) =
        super::operator_cli::sagents_with(&app.database_url, &[], &["audit", "verify", path]);
    assert!(ok && verified.contains("4 records"), "{verified}{stderr}");
    std::fs::write(&file, exported.replace("ok to ship", "ok to delete")).unwrap();
    let (ok, _, stderr) =
        super::operator_cli::sagents_with(&app.database_url, &[], &["audit", "verify", path]);
    assert!(!ok && stderr.contains("record 4"), "{stderr}");
}
