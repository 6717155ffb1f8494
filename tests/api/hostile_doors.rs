//! The service's doors, tried as a tenant holding one token (or a reader of the database)
//! would: host networking only where an operator allowed it, the grant signing key sealed at
//! rest, no published or short secret accepted at start, no grant kept in a stored idempotent
//! answer, and event streams that end with their token and are capped per token ([`streams`]).

mod streams;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::{Method, Response};
use serde_json::{json, Value};

use super::operator_cli::sagents_with;
use crate::common::app::{expect_json, expect_problem, Options, TestApp, SECRET_KEY, TENANT};
use crate::common::db::{self, column_text};
use crate::lifecycle::{Replica, PROVIDER_TOKEN};
use crate::on_both_backends;
use crate::provider::Harness;
use sagents::app::{AppError, Application};
use sagents::clock::SystemClock;
use sagents::config::{Config, WeakSecret};
use sagents::domain::sandbox::{ResolvedSandboxSpec, WorkspaceMode};
use sagents::metrics::Metrics;
use sagents::notify::ChangeHub;
use sagents::providers::grant::GrantSigner;
use sagents::service::grants::{self, SIGNING_KEY_SETTING};
use sagents::store::{Backend, Store};

on_both_backends!(
    host_networking_is_refused_unless_an_operator_allowed_the_tenant,
    the_grant_signing_key_is_sealed_at_rest_and_a_reseal_seals_a_plain_one,
    stored_idempotent_claims_and_heartbeats_hold_no_grant
);

fn spec_json(network: Option<&str>) -> Value {
    let mut spec = serde_json::to_value(ResolvedSandboxSpec::example(
        "local",
        WorkspaceMode::Isolated,
    ))
    .unwrap();
    if let Some(n) = network {
        spec["resources"] = json!({"network": n});
    }
    spec
}

fn run_body(network: Option<&str>) -> Value {
    json!({
        "resolved_spec_hash": format!("sha256:{}", "c".repeat(64)),
        "input": {},
        "sandbox_spec": spec_json(network),
    })
}

/// The real local provider, checking the app's grants, registered as `local`.
/// The service without scheduler workers, and a reference provider registered with it.
async fn app_with_provider(backend: Backend) -> (TestApp, Harness) {
    let app = TestApp::spawn_with(
        backend,
        Options {
            workers: Some(0),
            ..Options::default()
        },
    )
    .await;
    let provider = with_provider(&app).await;
    (app, provider)
}

async fn with_provider(app: &TestApp) -> Harness {
    let public_key = app.state.grants.verifier().public_key_text();
    let provider = Harness::with(move |c| {
        c.token = Some(PROVIDER_TOKEN.into());
        c.grant_secret = None;
        c.grant_public_key = public_key;
    })
    .await;
    let body =
        json!({"provider_id": "local", "base_url": provider.base_url(), "token": PROVIDER_TOKEN});
    app.post_ok("/v1/admin/providers", &app.admin, &body, 201)
        .await;
    provider
}

async fn put_policy(app: &TestApp, tenant: &str, body: &Value) -> Response {
    app.request(
        Method::PUT,
        &format!("/v1/admin/tenants/{tenant}/policy"),
        &app.admin,
    )
    .json(body)
    .send()
    .await
    .unwrap()
}

async fn host_networking_is_refused_unless_an_operator_allowed_the_tenant(backend: Backend) {
    let (app, _provider) = app_with_provider(backend).await;
    let session = app.create_session().await;
    let runs = format!("/v1/sessions/{session}/runs");

    let refused = expect_problem(
        app.post(&runs, &app.runtime, &run_body(Some("host"))).await,
        422,
        "sandbox.network_not_allowed",
        Some("sandbox_spec.resources.network"),
    )
    .await;
    assert!(
        refused["detail"].as_str().unwrap().contains(TENANT),
        "{refused}"
    );
    let (_, snapshot) = app.snapshot(&session).await;
    assert_eq!(snapshot["runs"], json!([]), "a refused run is not created");
    // Without host networking nothing changes.
    app.post_ok(&runs, &app.runtime, &run_body(Some("none")), 201)
        .await;

    // Only an admin sets a policy, and only a whole, well-formed one.
    let path = format!("/v1/admin/tenants/{TENANT}/policy");
    let res = app
        .request(Method::PUT, &path, &app.runtime)
        .json(&json!({"allow_host_network": true}))
        .send()
        .await
        .unwrap();
    expect_problem(res, 403, "auth.forbidden", None).await;
    let res = put_policy(
        &app,
        TENANT,
        &json!({"allow_host_network": true, "all": true}),
    )
    .await;
    assert_eq!(res.status(), 422);
    let res = put_policy(&app, "bad tenant!", &json!({"allow_host_network": true})).await;
    expect_problem(res, 422, "request.invalid", Some("tenant")).await;
    let before = app.get_ok(&path, &app.admin).await;
    assert_eq!(before["allow_host_network"], false);
    assert_eq!(before["updated_at"], Value::Null);

    let set = expect_json(
        put_policy(&app, TENANT, &json!({"allow_host_network": true})).await,
        200,
    )
    .await;
    assert_eq!(set["tenant"], TENANT);
    assert_eq!(set["allow_host_network"], true);
    assert_eq!(
        app.get_ok(&path, &app.admin).await["allow_host_network"],
        true
    );
    let run = app
        .post_ok(&runs, &app.runtime, &run_body(Some("host")), 201)
        .await;
    assert_eq!(run["state"], "queued");
    let other = app
        .get_ok("/v1/admin/tenants/other/policy", &app.admin)
        .await;
    assert_eq!(
        other["allow_host_network"], false,
        "another tenant is not allowed"
    );

    expect_json(put_policy(&app, TENANT, &json!({})).await, 200).await;
    expect_problem(
        app.post(&runs, &app.runtime, &run_body(Some("host"))).await,
        422,
        "sandbox.network_not_allowed",
        None,
    )
    .await;
}

async fn the_grant_signing_key_is_sealed_at_rest_and_a_reseal_seals_a_plain_one(backend: Backend) {
    // Generated at first start with a secret key configured: sealed.
    let (url, _db) = db::fresh_url(backend).await;
    let on = |url: &str| Options {
        database_url: Some(url.to_owned()),
        ..Options::default()
    };
    let app = TestApp::spawn_with(backend, on(&url)).await;
    let key = app.state.grants.private_key_text().expect("an Ed25519 key");
    app.stop().await;
    let at_rest = column_text(&url, "settings", "value").await;
    assert_eq!(at_rest.len(), 1, "{at_rest:?}");
    assert!(at_rest[0].starts_with("sealed:v1:"), "{}", at_rest[0]);
    let body = key.trim_start_matches("ed25519-priv:");
    assert!(!at_rest[0].contains(body), "the key's text is not at rest");
    // The next start opens it: the same key.
    let again = TestApp::spawn_with(backend, on(&url)).await;
    assert_eq!(again.state.grants.private_key_text(), Some(key));
    again.stop().await;

    // Stored in plain before a secret key was set: still read, and sealed by a reseal.
    let (url, _plain_db) = db::fresh_url(backend).await;
    let plain = grants::generate().private_key_text().unwrap();
    let store = Store::connect(
        &url,
        Arc::new(SystemClock),
        ChangeHub::new(),
        Arc::new(Metrics::default()),
    )
    .await
    .unwrap();
    store.migrate().await.unwrap();
    store
        .setting_or_init(SIGNING_KEY_SETTING, &plain)
        .await
        .unwrap();
    store.close().await;
    let app = TestApp::spawn_with(backend, on(&url)).await;
    let signer = GrantSigner::from_private_key_text(&plain).unwrap();
    assert_eq!(
        app.state.grants.verifier().public_key_text(),
        signer.verifier().public_key_text(),
        "grants are signed with the stored key"
    );
    app.stop().await;

    let with_key = [("SAGENTS_SECRET_KEY", SECRET_KEY)];
    let (done, out, err) = sagents_with(&url, &with_key, &["secrets", "reseal"]);
    assert!(done, "{err}");
    assert!(
        out.contains("1 stored grant signing keys rewritten"),
        "{out}"
    );
    let at_rest = column_text(&url, "settings", "value").await;
    assert!(at_rest[0].starts_with("sealed:v1:"), "{}", at_rest[0]);
    assert!(!at_rest[0].contains(plain.trim_start_matches("ed25519-priv:")));
    let (done, out, _) = sagents_with(&url, &with_key, &["secrets", "reseal"]);
    assert!(
        done && out.contains("0 stored grant signing keys rewritten"),
        "{out}"
    );

    let app = TestApp::spawn_with(backend, on(&url)).await;
    assert_eq!(
        app.state.grants.private_key_text(),
        Some(plain),
        "the resealed key opens to the same key"
    );
    app.stop().await;
}

/// The old example's key, as `docker/.env.example` shipped it.
const OLD_EXAMPLE_KEY: &str = "yFYFKlRlMEA/N3Cm/pACvNBG+tGWAHJATtSuGbs6mnI=";

/// The value `docker/.env.example` gives `var`.
fn example_value(var: &str) -> String {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docker/.env.example"))
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{var}=")))
        .unwrap_or_else(|| panic!("{var} in docker/.env.example"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_refuses_to_start_on_example_placeholder_or_short_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/sagents.db", dir.path().display());
    let example_key = example_value("SAGENTS_SECRET_KEY");
    assert_ne!(example_key, OLD_EXAMPLE_KEY);
    let cases = [
        ("SAGENTS_SECRET_KEY", OLD_EXAMPLE_KEY.to_owned()),
        ("SAGENTS_SECRET_KEY", example_key),
        (
            "SAGENTS_GRANT_SECRET",
            example_value("SAGENTS_GRANT_SECRET"),
        ),
        (
            "SAGENTS_GRANT_SECRET",
            "a-random-but-short-secret".to_owned(),
        ),
    ];
    for (var, value) in cases {
        let mut config = Config::with_database(url.clone());
        config.listen = "127.0.0.1:0".parse().unwrap();
        match var {
            "SAGENTS_SECRET_KEY" => config.secret_key = Some(value.parse().unwrap()),
            _ => config.grant_secret = Some(value.parse().unwrap()),
        }
        let refused = Application::build(config, Arc::new(SystemClock))
            .await
            .err();
        assert!(
            matches!(&refused, Some(AppError::WeakSecret(w)) if w.to_string().starts_with(var)),
            "{var}={value}: {refused:?}"
        );
    }

    // `sagents serve` exits at once, naming the variable (bounded: killed if it serves).
    let mut child = Command::new(env!("CARGO_BIN_EXE_sagents"))
        .arg("serve")
        .env("SAGENTS_DATABASE_URL", &url)
        .env("SAGENTS_LISTEN", "127.0.0.1:0")
        .env("SAGENTS_SECRET_KEY", OLD_EXAMPLE_KEY)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(
        status.is_some_and(|s| !s.success()),
        "serve started: {stderr}"
    );
    assert!(
        stderr.contains("SAGENTS_SECRET_KEY") && stderr.contains("example"),
        "{stderr}"
    );
}

#[test]
fn no_example_value_passes_the_start_checks() {
    let mut config = Config::with_database("sqlite://x");
    config.secret_key = Some(example_value("SAGENTS_SECRET_KEY").parse().unwrap());
    assert!(matches!(
        config.check_secrets(),
        Err(WeakSecret::Placeholder { .. })
    ));
    assert!(config.sealer().is_err(), "nor is it a working key");
    config.secret_key = None;
    config.grant_secret = Some(example_value("SAGENTS_GRANT_SECRET").parse().unwrap());
    assert!(config.check_secrets().is_err());
    config.grant_secret = None;
    let password = example_value("POSTGRES_PASSWORD");
    config.database_url = format!("postgres://sagents:{password}@postgres:5432/sagents").into();
    assert!(matches!(
        config.check_secrets(),
        Err(WeakSecret::Placeholder {
            var: "SAGENTS_DATABASE_URL"
        })
    ));
}

async fn claim_with_key(app: &TestApp, key: &str) -> Response {
    app.request(Method::POST, "/v1/runtime/claims", &app.runtime)
        .header("Idempotency-Key", key)
        .json(&json!({"worker_id": "w1"}))
        .send()
        .await
        .unwrap()
}

async fn heartbeat_with_key(app: &TestApp, lease: &str, token: i64, key: &str) -> Response {
    app.request(
        Method::POST,
        &format!("/v1/runtime/leases/{lease}/heartbeat"),
        &app.runtime,
    )
    .header("Idempotency-Key", key)
    .json(&json!({"fencing_token": token}))
    .send()
    .await
    .unwrap()
}

async fn stored_bodies(app: &TestApp) -> Vec<String> {
    column_text(&app.database_url, "idempotency_keys", "response_body").await
}

async fn stored_idempotent_claims_and_heartbeats_hold_no_grant(backend: Backend) {
    let (app, _provider) = app_with_provider(backend).await;
    let session = app.create_session().await;
    app.post_ok(
        &format!("/v1/sessions/{session}/runs"),
        &app.runtime,
        &run_body(None),
        201,
    )
    .await;
    Replica::new(app.store().clone(), "driver").drain().await;

    let first = expect_json(claim_with_key(&app, "claim-1").await, 200).await;
    let claim = &first["claims"][0];
    let grant = claim["sandbox"]["grant"].as_str().unwrap().to_owned();
    assert!(
        grant.len() > 20,
        "a sandbox-backed claim with a grant: {first}"
    );
    let stored = stored_bodies(&app).await;
    assert_eq!(stored.len(), 1);
    assert!(
        !stored[0].contains(&grant),
        "the stored claim keeps the grant"
    );
    assert!(stored[0].contains(claim["lease"]["lease_id"].as_str().unwrap()));

    let res = claim_with_key(&app, "claim-1").await;
    assert_eq!(res.headers()["idempotent-replayed"], "true");
    let replay = expect_json(res, 200).await;
    assert_eq!(
        replay["claims"][0]["lease"], claim["lease"],
        "the same claim"
    );
    assert_eq!(
        replay["claims"][0]["sandbox"]["ref"],
        claim["sandbox"]["ref"]
    );
    assert_eq!(
        replay["claims"][0]["sandbox"]["grant"], "",
        "no grant replayed"
    );

    let lease = claim["lease"]["lease_id"].as_str().unwrap();
    let token = claim["lease"]["fencing_token"].as_i64().unwrap();
    let beat = expect_json(heartbeat_with_key(&app, lease, token, "beat-1").await, 200).await;
    let renewed = beat["grant"].as_str().expect("a fresh grant").to_owned();
    let stored = stored_bodies(&app).await;
    assert_eq!(stored.len(), 2);
    assert!(stored
        .iter()
        .all(|b| !b.contains(&renewed) && !b.contains(&grant)));
    let res = heartbeat_with_key(&app, lease, token, "beat-1").await;
    assert_eq!(res.headers()["idempotent-replayed"], "true");
    let replay = expect_json(res, 200).await;
    assert_eq!(replay["expires_at"], beat["expires_at"]);
    assert_eq!(replay["grant"], Value::Null);
    // The replay's runtime gets a grant from its next heartbeat.
    let next = expect_json(heartbeat_with_key(&app, lease, token, "beat-2").await, 200).await;
    assert!(
        next["grant"].as_str().is_some_and(|g| g.len() > 20),
        "{next}"
    );
}
