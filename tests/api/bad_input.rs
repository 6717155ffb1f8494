//! Bad input of every kind gets a precise 4xx problem and changes nothing.

use reqwest::Method;
use serde_json::json;

use crate::common::app::{expect_problem, hash, suspend_body, TestApp};
use crate::on_both_backends;
use sagents::store::Backend;

on_both_backends!(bad_input_is_refused_and_changes_nothing);

struct Case {
    name: &'static str,
    method: Method,
    path: String,
    token: String,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    status: u16,
    code: &'static str,
    field: Option<&'static str>,
}

fn spec(version: &str) -> serde_json::Value {
    json!({
        "spec_version": version,
        "provider_id": "local",
        "spec_hash": hash('1'),
        "policy_hash": hash('2'),
        "workspace_mode": "isolated",
    })
}

async fn bad_input_is_refused_and_changes_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let s = app.suspended_with_interaction().await;
    let reply = s.reply_path();
    let runs = format!("/v1/sessions/{}/runs", s.session_id);
    let suspend = format!("/v1/runs/{}/suspend", s.run_id);
    let snapshot = format!("/v1/sessions/{}/snapshot", s.session_id);
    let (fe, rt) = (app.frontend.clone(), app.runtime.clone());
    let json_case = |name,
                     method: Method,
                     path: &str,
                     token: &str,
                     body: serde_json::Value,
                     status,
                     code,
                     field| Case {
        name,
        method,
        path: path.to_owned(),
        token: token.to_owned(),
        content_type: Some("application/json"),
        body: serde_json::to_vec(&body).unwrap(),
        status,
        code,
        field,
    };
    let mut v2_shaped = spec("sagents.sandbox-spec/v2");
    v2_shaped["sandbox_class"] = json!("microvm");
    let mut bad_enum = spec("sagents.sandbox-spec/v3");
    bad_enum["workspace_mode"] = json!("cloud");
    let mut duplicate = suspend_body(1, 2, true);
    duplicate["interaction"]["allowed_decisions"] = json!(["approve", "approve"]);
    let with_interaction = |fields: serde_json::Value| {
        let mut body = suspend_body(1, 2, true);
        for (k, v) in fields.as_object().unwrap() {
            body["interaction"][k] = v.clone();
        }
        body
    };
    // Deadlines and what they do: each refused on the field named.
    let expiry_cases = [
        (
            "two deadlines",
            json!({"expires_at": "2999-01-01T00:00:00Z", "expires_in_seconds": 60}),
            "interaction.expires_in_seconds",
        ),
        (
            "a deadline of no time",
            json!({"expires_in_seconds": 0}),
            "interaction.expires_in_seconds",
        ),
        (
            "a warning without a deadline",
            json!({"warn_before_seconds": 10}),
            "interaction.warn_before_seconds",
        ),
        (
            "an expiry decision left out",
            json!({"expires_in_seconds": 60, "on_expiry": {"action": "decide"}}),
            "interaction.on_expiry.decision",
        ),
        (
            "an expiry decision not allowed",
            json!({"expires_in_seconds": 60, "on_expiry": {"action": "decide", "decision": "maybe"}}),
            "interaction.on_expiry.decision",
        ),
        (
            "an unknown expiry action",
            json!({"expires_in_seconds": 60, "on_expiry": {"action": "explode"}}),
            "interaction.on_expiry.action",
        ),
    ];
    let mut wrong_nested_type = suspend_body(1, 2, false);
    wrong_nested_type["checkpoint"]["sequence"] = json!("two");

    let mut cases = vec![
        Case {
            name: "malformed JSON",
            method: Method::POST,
            path: reply.clone(),
            token: fe.clone(),
            content_type: Some("application/json"),
            body: b"{\"decision\": \"approve\",".to_vec(),
            status: 400,
            code: "request.malformed_json",
            field: None,
        },
        json_case(
            "unknown field",
            Method::POST,
            &reply,
            &fe,
            json!({"decision": "approve", "extra": 1}),
            422,
            "request.invalid",
            Some("extra"),
        ),
        json_case(
            "missing field",
            Method::POST,
            &reply,
            &fe,
            json!({"payload": {}}),
            422,
            "request.invalid",
            Some("decision"),
        ),
        json_case(
            "wrong type",
            Method::POST,
            &reply,
            &fe,
            json!({"decision": 5}),
            422,
            "request.invalid",
            Some("decision"),
        ),
        json_case(
            "decision not allowed",
            Method::POST,
            &reply,
            &fe,
            json!({"decision": "maybe"}),
            422,
            "request.invalid",
            Some("decision"),
        ),
        json_case(
            "payload not an object",
            Method::POST,
            &reply,
            &fe,
            json!({"decision": "approve", "payload": [1]}),
            422,
            "request.invalid",
            Some("payload"),
        ),
        json_case(
            "digest not hexadecimal",
            Method::POST,
            &reply,
            &fe,
            json!({"decision": "approve", "payload_sha256": "SHA256:ABC"}),
            422,
            "request.invalid",
            Some("payload_sha256"),
        ),
        json_case(
            "empty comment",
            Method::POST,
            &reply,
            &fe,
            json!({"decision": "approve", "comment": ""}),
            422,
            "request.invalid",
            Some("comment"),
        ),
        json_case(
            "not an object",
            Method::POST,
            &reply,
            &fe,
            json!(["approve"]),
            422,
            "request.invalid",
            Some("body"),
        ),
        json_case(
            "bad enum",
            Method::POST,
            &runs,
            &rt,
            json!({"resolved_spec_hash": hash('a'), "sandbox_spec": bad_enum}),
            422,
            "request.invalid",
            Some("sandbox_spec.workspace_mode"),
        ),
        json_case(
            "bad hash",
            Method::POST,
            &runs,
            &rt,
            json!({"resolved_spec_hash": "sha256:xyz"}),
            422,
            "request.invalid",
            Some("resolved_spec_hash"),
        ),
        json_case(
            "bad id in body",
            Method::POST,
            &runs,
            &rt,
            json!({"resolved_spec_hash": hash('a'), "parent_run_id": "run_nope"}),
            422,
            "request.invalid",
            Some("parent_run_id"),
        ),
        json_case(
            "v2 spec",
            Method::POST,
            &runs,
            &rt,
            json!({"resolved_spec_hash": hash('a'), "sandbox_spec": spec("sagents.sandbox-spec/v2")}),
            422,
            "sandbox.spec_unsupported",
            Some("sandbox_spec.spec_version"),
        ),
        json_case(
            "v2-shaped spec",
            Method::POST,
            &runs,
            &rt,
            json!({"resolved_spec_hash": hash('a'), "sandbox_spec": v2_shaped}),
            422,
            "sandbox.spec_unsupported",
            Some("sandbox_spec.spec_version"),
        ),
        json_case(
            "duplicate decisions",
            Method::POST,
            &suspend,
            &rt,
            duplicate,
            422,
            "request.invalid",
            Some("interaction.allowed_decisions"),
        ),
        json_case(
            "wrong nested type",
            Method::POST,
            &suspend,
            &rt,
            wrong_nested_type,
            422,
            "request.invalid",
            Some("checkpoint.sequence"),
        ),
        json_case(
            "token out of range",
            Method::POST,
            &suspend,
            &rt,
            json!({"fencing_token": 1e30, "reason": "manual_pause"}),
            422,
            "request.invalid",
            Some("fencing_token"),
        ),
        json_case(
            "wait too long (claims)",
            Method::POST,
            "/v1/runtime/claims",
            &rt,
            json!({"worker_id": "w", "wait_seconds": 61}),
            422,
            "request.invalid",
            Some("wait_seconds"),
        ),
        json_case(
            "max out of range",
            Method::POST,
            "/v1/runtime/claims",
            &rt,
            json!({"worker_id": "w", "max": 0}),
            422,
            "request.invalid",
            Some("max"),
        ),
        json_case(
            "bad worker id",
            Method::POST,
            "/v1/runtime/claims",
            &rt,
            json!({"worker_id": "has space"}),
            422,
            "request.invalid",
            Some("worker_id"),
        ),
        Case {
            name: "oversized body",
            method: Method::POST,
            path: reply.clone(),
            token: fe.clone(),
            content_type: Some("application/json"),
            body: serde_json::to_vec(
                &json!({"decision": "approve", "payload": {"x": "a".repeat(1_100_000)}}),
            )
            .unwrap(),
            status: 413,
            code: "request.too_large",
            field: None,
        },
        Case {
            name: "wrong content type",
            method: Method::POST,
            path: reply.clone(),
            token: fe.clone(),
            content_type: Some("text/plain"),
            body: b"{\"decision\": \"approve\"}".to_vec(),
            status: 415,
            code: "request.unsupported_media_type",
            field: None,
        },
        Case {
            name: "no content type",
            method: Method::POST,
            path: reply.clone(),
            token: fe.clone(),
            content_type: None,
            body: b"{\"decision\": \"approve\"}".to_vec(),
            status: 415,
            code: "request.unsupported_media_type",
            field: None,
        },
        json_case(
            "malformed session id",
            Method::POST,
            &format!(
                "/v1/sessions/ses_nope/interactions/{}/reply",
                s.interaction_id
            ),
            &fe,
            json!({"decision": "approve"}),
            404,
            "session.not_found",
            None,
        ),
        json_case(
            "malformed interaction id",
            Method::POST,
            &format!("/v1/sessions/{}/interactions/int_123/reply", s.session_id),
            &fe,
            json!({"decision": "approve"}),
            404,
            "interaction.not_found",
            None,
        ),
        json_case(
            "id of the wrong kind",
            Method::POST,
            &format!("/v1/sessions/{}/runs/{}/cancel", s.session_id, s.session_id),
            &fe,
            json!({}),
            404,
            "run.not_found",
            None,
        ),
        json_case(
            "malformed run id",
            Method::POST,
            "/v1/runs/run_%20x/suspend",
            &rt,
            suspend_body(1, 2, false),
            404,
            "run.not_found",
            None,
        ),
        json_case(
            "path not UTF-8",
            Method::POST,
            "/v1/runs/%ff%fe/suspend",
            &rt,
            suspend_body(1, 2, false),
            404,
            "route.not_found",
            None,
        ),
        json_case(
            "malformed lease id",
            Method::POST,
            "/v1/runtime/leases/lease-1/heartbeat",
            &rt,
            json!({"fencing_token": 1}),
            404,
            "lease.not_found",
            None,
        ),
        json_case(
            "wait too long (snapshot)",
            Method::GET,
            &format!("{snapshot}?wait_seconds=61"),
            &fe,
            json!(null),
            422,
            "request.invalid",
            Some("wait_seconds"),
        ),
        json_case(
            "wait not a number",
            Method::GET,
            &format!("{snapshot}?wait_seconds=soon"),
            &fe,
            json!(null),
            422,
            "request.invalid",
            Some("wait_seconds"),
        ),
        json_case(
            "negative wait",
            Method::GET,
            &format!("{snapshot}?wait_seconds=-1"),
            &fe,
            json!(null),
            422,
            "request.invalid",
            Some("wait_seconds"),
        ),
        json_case(
            "events limit",
            Method::GET,
            &format!("/v1/sessions/{}/events?limit=0", s.session_id),
            &fe,
            json!(null),
            422,
            "request.invalid",
            Some("limit"),
        ),
        json_case(
            "events after",
            Method::GET,
            &format!("/v1/sessions/{}/events?after=-5", s.session_id),
            &fe,
            json!(null),
            422,
            "request.invalid",
            Some("after"),
        ),
    ];
    cases.extend(expiry_cases.into_iter().map(|(name, fields, field)| {
        let body = with_interaction(fields);
        json_case(
            name,
            Method::POST,
            &suspend,
            &rt,
            body,
            422,
            "request.invalid",
            Some(field),
        )
    }));

    let (etag, before) = app.snapshot(&s.session_id).await;
    let mut seen = std::collections::HashSet::new();
    for case in cases {
        assert!(seen.insert(case.name), "duplicate case name {}", case.name);
        let mut req = app.request(case.method.clone(), &case.path, &case.token);
        if let Some(ct) = case.content_type {
            req = req.header("content-type", ct);
        }
        if case.method == Method::POST {
            req = req.body(case.body.clone());
        }
        eprintln!("case: {}", case.name);
        let res = match req.send().await {
            Ok(res) => Some(res),
            // The server answers 413 from the length alone and closes; a client still writing
            // the body may see the reset instead of that answer.
            Err(e) if case.status == 413 && !e.is_connect() && !e.is_timeout() => None,
            Err(e) => panic!("{}: {e}", case.name),
        };
        if let Some(res) = res {
            check_problem(res, &case).await;
        }
        assert_eq!(
            app.snapshot(&s.session_id).await,
            (etag.clone(), before.clone()),
            "{} changed the snapshot",
            case.name
        );
    }

    // The interaction is still pending and answerable.
    let ok = app
        .post_ok(&reply, &app.frontend, &json!({"decision": "approve"}), 200)
        .await;
    assert_eq!(ok["run_status"], "resuming");
    app.stop().await;
}

async fn check_problem(res: reqwest::Response, case: &Case) {
    if case.status == 413 {
        assert_eq!(res.headers()["connection"], "close", "{}", case.name);
    }
    let problem = expect_problem(res, case.status, case.code, case.field).await;
    if case.code == "request.malformed_json" {
        let detail = problem["detail"].as_str().unwrap();
        assert!(
            detail.contains("line 1") && detail.contains("column"),
            "{}: {detail}",
            case.name
        );
    }
}
