//! Requests the OpenAPI document calls valid are accepted, and its links lead somewhere:
//! each case here was a schema-valid request the server refused.

use serde_json::{json, Value};

use crate::common::app::{expect_json, expect_problem, TestApp};
use crate::on_both_backends;
use sagents::store::Backend;

on_both_backends!(
    integers_written_with_a_zero_fraction_are_integers,
    an_inbox_cursor_of_the_documented_shape_is_accepted,
    text_limits_count_characters,
    an_attention_reason_is_checked_as_documented,
);

async fn integers_written_with_a_zero_fraction_are_integers(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, _, claim) = app.claimed_run("w1").await;
    let lease = claim["lease"]["lease_id"].as_str().unwrap();
    let token = claim["lease"]["fencing_token"].as_i64().unwrap();
    let path = format!("/v1/runtime/leases/{lease}/heartbeat");
    // JSON Schema's `integer` admits `7.0`; the body is sent as written.
    let body = format!(r#"{{"fencing_token": {token}.0}}"#);
    let res = app
        .request(reqwest::Method::POST, &path, &app.runtime)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    expect_json(res, 200).await;
    // A large one must parse exactly (no rounding to a neighbouring float): a wrong token.
    let res = app
        .request(reqwest::Method::POST, &path, &app.runtime)
        .header("content-type", "application/json")
        .body(r#"{"fencing_token": 3987429980096649.0}"#)
        .send()
        .await
        .unwrap();
    expect_problem(res, 409, "lease.lost", None).await;
    for bad in ["1.5", "1e400"] {
        let res = app
            .request(reqwest::Method::POST, &path, &app.runtime)
            .header("content-type", "application/json")
            .body(format!(r#"{{"fencing_token": {bad}}}"#))
            .send()
            .await
            .unwrap();
        assert!(
            matches!(res.status().as_u16(), 400 | 422),
            "{bad}: {}",
            res.status()
        );
    }
}

async fn an_inbox_cursor_of_the_documented_shape_is_accepted(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let cursor = "1733077200000.int_0192f0c1a2b37c4d8e9f0a1b2c3d4e5f";
    let page = app
        .get_ok(&format!("/v1/interactions?cursor={cursor}"), &app.frontend)
        .await;
    assert_eq!(page["interactions"], json!([]));
    let res = app.get("/v1/interactions?cursor=0", &app.frontend).await;
    expect_problem(res, 422, "request.invalid", Some("cursor")).await;
}

async fn text_limits_count_characters(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    // `maxLength: 1024` counts characters: 1024 two-byte ones are within it.
    let title = "é".repeat(1024);
    let session = app
        .post_ok("/v1/sessions", &app.frontend, &json!({"title": title}), 201)
        .await;
    assert_eq!(session["title"], Value::String(title));
    let res = app
        .post(
            "/v1/sessions",
            &app.frontend,
            &json!({"title": "é".repeat(1025)}),
        )
        .await;
    expect_problem(res, 422, "request.invalid", Some("title")).await;
}

async fn an_attention_reason_is_checked_as_documented(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let path = "/v1/admin/runs/run_0192f0c1a2b37c4d8e9f0a1b2c3d4e5f/execution-resource/attention";
    // `maxLength: 500` holds for the reason as sent, padding included.
    for reason in ["   ".to_owned(), format!("{} ", "x".repeat(500))] {
        let body = json!({"action": "retry_now", "reason": reason});
        let res = app.post(path, &app.admin, &body).await;
        expect_problem(res, 422, "request.invalid", Some("reason")).await;
    }
    let body = json!({"action": "retry_now", "reason": format!(" {}", "x".repeat(499))});
    let res = app.post(path, &app.admin, &body).await;
    expect_problem(res, 404, "execution_resource.not_found", None).await;
}

#[test]
fn every_link_names_an_operation_and_its_parameters() {
    let doc: Value =
        serde_json::from_str(&sagents::http::openapi_document().to_json().unwrap()).unwrap();
    let mut operations = std::collections::HashMap::new();
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            operations.insert(op["operationId"].as_str().unwrap().to_owned(), op.clone());
        }
    }
    let mut links = 0;
    for op in operations.values() {
        for res in op["responses"].as_object().unwrap().values() {
            for (name, link) in res["links"].as_object().into_iter().flatten() {
                links += 1;
                let target = &operations[link["operationId"].as_str().expect(name)];
                let params: Vec<&str> = target["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["name"].as_str().unwrap())
                    .collect();
                for param in link["parameters"].as_object().unwrap().keys() {
                    assert!(params.contains(&param.as_str()), "{name}: {param}");
                }
            }
        }
    }
    assert!(links >= 15, "{links} links");
}
