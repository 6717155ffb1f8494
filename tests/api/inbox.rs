//! The inbox: a tenant's pending interactions across its sessions, paged, conditional and
//! long-polled, on one replica and across two.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::app::{expect_json, expect_problem, suspend_body, Options, TestApp};
use crate::on_both_backends;
use sagents::domain::token::Role;
use sagents::store::Backend;

on_both_backends!(
    the_inbox_lists_the_tenants_pending_interactions_newest_first,
    an_unchanged_inbox_is_304_and_a_long_poll_wakes_on_each_change,
    bad_inbox_queries_are_precise_problems
);

/// Tokens of one tenant.
struct Tenant {
    frontend: String,
    runtime: String,
}

impl Tenant {
    async fn new(app: &TestApp, name: &str) -> Tenant {
        Tenant {
            frontend: app.token(Role::Frontend, Some(name)).await,
            runtime: app.token(Role::Runtime, Some(name)).await,
        }
    }

    fn of_default(app: &TestApp) -> Tenant {
        Tenant {
            frontend: app.frontend.clone(),
            runtime: app.runtime.clone(),
        }
    }

    /// A new session whose one run is suspended with a pending approval: `(session, run)`.
    async fn waiting_for_approval(&self, app: &TestApp) -> (String, String) {
        let session = app
            .post_ok("/v1/sessions", &self.frontend, &json!({}), 201)
            .await;
        let session_id = session["id"].as_str().unwrap().to_owned();
        let run = app
            .post_ok(
                &format!("/v1/sessions/{session_id}/runs"),
                &self.runtime,
                &json!({"resolved_spec_hash": crate::common::app::hash('a')}),
                201,
            )
            .await;
        let run_id = run["id"].as_str().unwrap().to_owned();
        let claims = app
            .post_ok(
                "/v1/runtime/claims",
                &self.runtime,
                &json!({"worker_id": "w"}),
                200,
            )
            .await;
        let token = claims["claims"][0]["lease"]["fencing_token"]
            .as_i64()
            .unwrap();
        app.post_ok(
            &format!("/v1/runs/{run_id}/suspend"),
            &self.runtime,
            &suspend_body(token, 1, true),
            200,
        )
        .await;
        (session_id, run_id)
    }
}

async fn inbox(app: &TestApp, token: &str, query: &str) -> Value {
    app.get_ok(&format!("/v1/interactions{query}"), token).await
}

fn ids(page: &Value) -> Vec<String> {
    page["interactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["interaction"]["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn the_inbox_lists_the_tenants_pending_interactions_newest_first(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let acme = Tenant::of_default(&app);
    let other = Tenant::new(&app, "other-tenant").await;
    let mut waiting = Vec::new();
    for _ in 0..3 {
        waiting.push(acme.waiting_for_approval(&app).await);
    }
    let (theirs, _) = other.waiting_for_approval(&app).await;

    let page = inbox(&app, &acme.frontend, "").await;
    let items = page["interactions"].as_array().unwrap();
    assert_eq!(items.len(), 3, "{page}");
    assert_eq!(page["next_cursor"], Value::Null);
    let newest_first: Vec<&str> = waiting.iter().rev().map(|(s, _)| s.as_str()).collect();
    let sessions: Vec<&str> = items
        .iter()
        .map(|i| i["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(sessions, newest_first);
    // The same shape as the snapshot's pending interaction.
    let (session_id, run_id) = &waiting[2];
    let (_, snap) = app.snapshot(session_id).await;
    assert_eq!(items[0]["interaction"], snap["pending_interactions"][0]);
    assert_eq!(items[0]["interaction"]["run_id"], run_id.as_str());
    assert_eq!(items[0]["interaction"]["interaction_type"], "approval");
    assert_eq!(
        items[0]["interaction"]["allowed_decisions"],
        json!(["approve", "deny"])
    );
    assert_eq!(
        items[0]["interaction"]["payload"],
        json!({"command": "rm -rf build"})
    );
    assert!(items[0]["interaction"]["requested_at"].is_string());

    // Pages of two: the cursor carries on where the first page ended, and the last has none.
    let first = inbox(&app, &acme.frontend, "?status=pending&limit=2").await;
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    let second = inbox(&app, &acme.frontend, &format!("?limit=2&cursor={cursor}")).await;
    assert_eq!(second["next_cursor"], Value::Null);
    let mut paged = ids(&first);
    paged.extend(ids(&second));
    assert_eq!(paged, ids(&page));

    // An answered interaction leaves the inbox; a cancelled run takes its interaction along.
    let answered = &ids(&page)[1];
    let (s1, _) = &waiting[1];
    app.post_ok(
        &format!("/v1/sessions/{s1}/interactions/{answered}/reply"),
        &acme.frontend,
        &json!({"decision": "approve"}),
        200,
    )
    .await;
    let (s0, r0) = &waiting[0];
    app.post_ok(
        &format!("/v1/sessions/{s0}/runs/{r0}/cancel"),
        &acme.frontend,
        &json!({}),
        200,
    )
    .await;
    let after = inbox(&app, &acme.frontend, "").await;
    assert_eq!(ids(&after), vec![ids(&page)[0].clone()]);

    let mine = inbox(&app, &other.frontend, "").await;
    assert_eq!(mine["interactions"].as_array().unwrap().len(), 1);
    assert_eq!(mine["interactions"][0]["session_id"], theirs.as_str());
}

/// Starts `GET /v1/interactions?wait_seconds=30` with `If-None-Match: etag`.
fn long_poll(
    app: &TestApp,
    token: &str,
    etag: &str,
    wait: u32,
) -> tokio::task::JoinHandle<(Instant, u16, String, Value)> {
    let req = app
        .request(
            Method::GET,
            &format!("/v1/interactions?wait_seconds={wait}"),
            token,
        )
        .header("if-none-match", etag);
    tokio::spawn(async move {
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let etag = res.headers()["etag"].to_str().unwrap().to_owned();
        let body = res.json::<Value>().await.unwrap_or(Value::Null);
        (Instant::now(), status, etag, body)
    })
}

async fn current_etag(app: &TestApp, token: &str) -> String {
    let res = app.get("/v1/interactions", token).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["cache-control"], "no-cache");
    res.headers()["etag"].to_str().unwrap().to_owned()
}

async fn an_unchanged_inbox_is_304_and_a_long_poll_wakes_on_each_change(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let acme = Tenant::of_default(&app);
    let empty = current_etag(&app, &acme.frontend).await;
    let res = app
        .request(Method::GET, "/v1/interactions", &acme.frontend)
        .header("if-none-match", &empty)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 304);
    assert_eq!(res.headers()["etag"].to_str().unwrap(), empty);

    // A new interaction wakes a held long-poll with the new page.
    let poll = long_poll(&app, &acme.frontend, &empty, 30);
    app.until_waiting(1).await;
    let (session_id, _) = acme.waiting_for_approval(&app).await;
    let (_, status, etag, page) = tokio::time::timeout(Duration::from_secs(5), poll)
        .await
        .expect("the long-poll answers")
        .unwrap();
    assert_eq!(status, 200);
    assert_ne!(etag, empty);
    assert_eq!(page["interactions"][0]["session_id"], session_id.as_str());
    assert_eq!(etag, current_etag(&app, &acme.frontend).await);

    // Other tenants' changes and changes that are not the inbox's leave it unchanged.
    let other = Tenant::new(&app, "other-tenant").await;
    let poll = long_poll(&app, &acme.frontend, &etag, 1);
    app.until_waiting(1).await;
    other.waiting_for_approval(&app).await;
    app.create_session().await;
    let (_, status, same, _) = poll.await.unwrap();
    assert_eq!((status, same.as_str()), (304, etag.as_str()));

    // An answer wakes it too: the interaction is gone.
    let poll = long_poll(&app, &acme.frontend, &etag, 30);
    app.until_waiting(1).await;
    let id = page["interactions"][0]["interaction"]["id"]
        .as_str()
        .unwrap();
    app.post_ok(
        &format!("/v1/sessions/{session_id}/interactions/{id}/reply"),
        &acme.frontend,
        &json!({"decision": "deny"}),
        200,
    )
    .await;
    let (_, status, etag, page) = tokio::time::timeout(Duration::from_secs(5), poll)
        .await
        .expect("the long-poll answers")
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(etag, empty, "the empty inbox again");
    assert_eq!(page["interactions"], json!([]));
}

async fn bad_inbox_queries_are_precise_problems(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        Options {
            long_poll_max_seconds: Some(5),
            ..Options::default()
        },
    )
    .await;
    let f = &app.frontend;
    for (query, field) in [
        ("?status=resolved", "status"),
        ("?status=", "status"),
        ("?limit=0", "limit"),
        ("?limit=1001", "limit"),
        ("?limit=-1", "limit"),
        ("?limit=abc", "limit"),
        ("?cursor=not-a-cursor", "cursor"),
        ("?cursor=MTI6aW50X3p6", "cursor"),
        ("?wait_seconds=6", "wait_seconds"),
        ("?wait_seconds=x", "wait_seconds"),
    ] {
        let res = app.get(&format!("/v1/interactions{query}"), f).await;
        expect_problem(res, 422, "request.invalid", Some(field)).await;
    }
    let ok = inbox(&app, f, "?status=pending&limit=1000").await;
    assert_eq!(ok["interactions"], json!([]));
    let res = app.get("/v1/interactions", &app.runtime).await;
    expect_problem(res, 403, "auth.forbidden", None).await;
    let res = app
        .client
        .get(app.url("/v1/interactions"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let admin = app.get("/v1/interactions", &app.admin).await;
    expect_json(admin, 403).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_interaction_on_one_replica_wakes_an_inbox_long_poll_on_the_other() {
    let a = TestApp::spawn(Backend::Postgres).await;
    let b = a.second_replica().await;
    let etag = current_etag(&a, &a.frontend).await;
    let poll = long_poll(&a, &a.frontend, &etag, 30);
    a.until_waiting(1).await;
    let (session_id, _) = Tenant::of_default(&b).waiting_for_approval(&b).await;
    let suspended_at = Instant::now();
    let (woke_at, status, _, page) = tokio::time::timeout(Duration::from_secs(5), poll)
        .await
        .expect("the long-poll on replica A answers")
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(page["interactions"][0]["session_id"], session_id.as_str());
    let lag = woke_at.saturating_duration_since(suspended_at);
    assert!(lag < Duration::from_secs(1), "replica A woke {lag:?} later");
    b.stop().await;
    a.stop().await;
}

#[test]
fn the_openapi_document_states_the_inbox_and_stream_constraints() {
    let doc: Value =
        serde_json::from_str(&sagents::http::openapi_document().to_json().unwrap()).unwrap();
    let inbox = &doc["paths"]["/v1/interactions"]["get"];
    let param = |op: &Value, name: &str| {
        op["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("parameter {name}"))
            .clone()
    };
    let limit = param(inbox, "limit")["schema"].clone();
    assert_eq!(
        (limit["minimum"].as_i64(), limit["maximum"].as_i64()),
        (Some(1), Some(1000))
    );
    assert_eq!(param(inbox, "status")["schema"]["enum"], json!(["pending"]));
    assert_eq!(
        param(inbox, "cursor")["schema"]["pattern"],
        "^[0-9]{1,15}\\.int_[0-9a-f]{32}$"
    );
    assert_eq!(param(inbox, "If-None-Match")["in"], "header");
    for status in ["200", "304", "422"] {
        assert!(inbox["responses"][status].is_object(), "{status}");
    }
    let item = &doc["components"]["schemas"]["InboxItem"]["properties"];
    assert_eq!(item["session_id"]["$ref"], "#/components/schemas/SessionId");
    assert_eq!(
        doc["components"]["schemas"]["SessionId"]["pattern"],
        "^ses_[0-9a-f]{32}$"
    );
    assert_eq!(
        item["interaction"]["$ref"],
        "#/components/schemas/PendingInteraction"
    );

    let stream = &doc["paths"]["/v1/sessions/{session_id}/events/stream"]["get"];
    assert!(stream["responses"]["200"]["content"]["text/event-stream"].is_object());
    assert_eq!(
        param(stream, "after")["schema"]["minimum"].as_i64(),
        Some(0)
    );
    assert_eq!(param(stream, "Last-Event-ID")["in"], "header");
    assert_eq!(
        param(stream, "session_id")["schema"]["$ref"],
        "#/components/schemas/SessionId"
    );
    assert!(stream["responses"]["404"].is_object());
}
