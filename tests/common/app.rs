//! A real server on a free port, against a fresh SQLite or PostgreSQL database, with one
//! token per role and reqwest helpers.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use reqwest::{Method, RequestBuilder, Response};
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use sagents::app::{AppError, Application};
use sagents::clock::{Clock, ManualClock, SystemClock};
use sagents::config::Config;
use sagents::domain::token::Role;
use sagents::http::api::state::AppState;
use sagents::service::shutdown::ShutdownTrigger;
use sagents::store::{Backend, Store};

use super::db;

pub const TENANT: &str = "default";
/// Every test app seals provider tokens at rest under this key (replicas share it).
pub const SECRET_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

#[derive(Default)]
pub struct Options {
    /// Share the database of another app (a second replica).
    pub database_url: Option<String>,
    pub manual_clock: bool,
    pub long_poll_max_seconds: Option<u64>,
    pub body_limit_bytes: Option<u64>,
    /// Lifecycle workers (default: the service's default); 0 to drive lifecycle work by hand.
    pub workers: Option<u32>,
    /// The background reconciler's interval; off unless set (tests drive it by hand).
    pub reconcile_interval_seconds: Option<u64>,
    pub sse_heartbeat_seconds: Option<u64>,
    pub http_idle_timeout_seconds: Option<u64>,
    pub max_connections: Option<u32>,
    pub request_timeout_seconds: Option<u64>,
    pub cors_origins: Vec<String>,
}

pub struct TestApp {
    pub base: String,
    pub database_url: String,
    pub client: reqwest::Client,
    pub state: AppState,
    pub clock: Option<ManualClock>,
    pub admin: String,
    pub frontend: String,
    pub runtime: String,
    trigger: ShutdownTrigger,
    server: Option<JoinHandle<Result<(), AppError>>>,
    _db: Option<db::TestDb>,
}

impl TestApp {
    pub async fn spawn(backend: Backend) -> TestApp {
        Self::spawn_with(backend, Options::default()).await
    }

    pub async fn spawn_with(backend: Backend, opts: Options) -> TestApp {
        let (database_url, db) = match opts.database_url {
            Some(url) => (url, None),
            None => {
                let (url, db) = db::fresh_url(backend).await;
                (url, Some(db))
            }
        };
        let mut config = Config::with_database(database_url.clone());
        config.listen = "127.0.0.1:0".parse().unwrap();
        config.secret_key = Some(SECRET_KEY.parse().unwrap());
        if let Some(max) = opts.long_poll_max_seconds {
            config.long_poll_max_seconds = max;
        }
        if let Some(limit) = opts.body_limit_bytes {
            config.body_limit_bytes = limit;
        }
        if let Some(heartbeat) = opts.sse_heartbeat_seconds {
            config.sse_heartbeat_seconds = heartbeat;
        }
        if let Some(idle) = opts.http_idle_timeout_seconds {
            config.http_idle_timeout_seconds = idle;
        }
        if let Some(max) = opts.max_connections {
            config.max_connections = max;
        }
        if let Some(timeout) = opts.request_timeout_seconds {
            config.request_timeout_seconds = timeout;
        }
        config.cors_origins = opts.cors_origins;
        if let Some(workers) = opts.workers {
            config.workers = workers;
        }
        config.reconcile_interval_seconds = opts.reconcile_interval_seconds.unwrap_or(0);
        let manual = opts
            .manual_clock
            .then(|| ManualClock::new(Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap()));
        let clock: Arc<dyn Clock> = match &manual {
            Some(c) => Arc::new(c.clone()),
            None => Arc::new(SystemClock),
        };
        let app = Application::build(config, clock).await.expect("app builds");
        let base = format!("http://{}", app.local_addr());
        let state = app.state().clone();
        let trigger = app.shutdown_trigger();
        let store = state.store.clone();
        let server = tokio::spawn(app.run_until_stopped());
        let admin = token(&store, Role::Admin, None).await;
        let frontend = token(&store, Role::Frontend, Some(TENANT)).await;
        let runtime = token(&store, Role::Runtime, Some(TENANT)).await;
        TestApp {
            base,
            database_url,
            client: reqwest::Client::new(),
            state,
            clock: manual,
            admin,
            frontend,
            runtime,
            trigger,
            server: Some(server),
            _db: db,
        }
    }

    /// Another replica on this app's database (PostgreSQL).
    pub async fn second_replica(&self) -> TestApp {
        let opts = Options {
            database_url: Some(self.database_url.clone()),
            ..Options::default()
        };
        TestApp::spawn_with(Backend::Postgres, opts).await
    }

    pub fn store(&self) -> &Store {
        &self.state.store
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn request(&self, method: Method, path: &str, token: &str) -> RequestBuilder {
        self.client
            .request(method, self.url(path))
            .bearer_auth(token)
    }

    pub async fn get(&self, path: &str, token: &str) -> Response {
        self.request(Method::GET, path, token).send().await.unwrap()
    }

    pub async fn post(&self, path: &str, token: &str, body: &Value) -> Response {
        self.request(Method::POST, path, token)
            .json(body)
            .send()
            .await
            .unwrap()
    }

    /// POSTs and asserts the status, returning the JSON body.
    pub async fn post_ok(&self, path: &str, token: &str, body: &Value, status: u16) -> Value {
        let res = self.post(path, token, body).await;
        expect_json(res, status).await
    }

    pub async fn get_ok(&self, path: &str, token: &str) -> Value {
        expect_json(self.get(path, token).await, 200).await
    }

    pub async fn token(&self, role: Role, tenant: Option<&str>) -> String {
        token(self.store(), role, tenant).await
    }

    pub fn advance(&self, by: chrono::Duration) {
        self.clock.as_ref().expect("a manual clock").advance(by);
    }

    pub fn long_polls_waiting(&self) -> i64 {
        self.state
            .metrics
            .long_polls_waiting
            .load(Ordering::Relaxed)
    }

    /// Waits until `n` long-polls are held on this replica.
    pub async fn until_waiting(&self, n: i64) {
        until(|| async { self.long_polls_waiting() >= n }).await;
    }

    /// Triggers a graceful shutdown and waits for the server to finish.
    pub async fn stop(mut self) {
        self.trigger.trigger();
        if let Some(server) = self.server.take() {
            tokio::time::timeout(Duration::from_secs(10), server)
                .await
                .expect("server stops in time")
                .expect("server task")
                .expect("server ends cleanly");
        }
    }

    pub fn trigger_shutdown(&self) {
        self.trigger.trigger();
    }

    pub fn take_server(&mut self) -> JoinHandle<Result<(), AppError>> {
        self.server.take().expect("server still owned")
    }

    // --- the domain, over HTTP ---

    pub async fn create_session(&self) -> String {
        let s = self
            .post_ok("/v1/sessions", &self.frontend, &json!({"title": "t"}), 201)
            .await;
        s["id"].as_str().unwrap().to_owned()
    }

    pub async fn create_run(&self, session_id: &str) -> String {
        let r = self
            .post_ok(
                &format!("/v1/sessions/{session_id}/runs"),
                &self.runtime,
                &json!({"resolved_spec_hash": hash('a'), "input": {"q": 1}}),
                201,
            )
            .await;
        assert_eq!(r["state"], "queued");
        r["id"].as_str().unwrap().to_owned()
    }

    /// Claims exactly one run and returns the claim.
    pub async fn claim_one(&self, worker: &str) -> Value {
        let body = self
            .post_ok(
                "/v1/runtime/claims",
                &self.runtime,
                &json!({"worker_id": worker}),
                200,
            )
            .await;
        let claims = body["claims"].as_array().unwrap();
        assert_eq!(claims.len(), 1, "one claim expected: {body}");
        claims[0].clone()
    }

    /// A new session with one queued run, claimed by `worker`: the session, the run and the claim.
    pub async fn claimed_run(&self, worker: &str) -> (String, String, Value) {
        let session_id = self.create_session().await;
        let run_id = self.create_run(&session_id).await;
        let claim = self.claim_one(worker).await;
        (session_id, run_id, claim)
    }

    /// Suspends the run under `fencing_token` with checkpoint 1 (and a pending approval if
    /// `with_interaction`).
    pub async fn suspend(&self, run_id: &str, fencing_token: i64, with_interaction: bool) {
        let run = self
            .post_ok(
                &format!("/v1/runs/{run_id}/suspend"),
                &self.runtime,
                &suspend_body(fencing_token, 1, with_interaction),
                200,
            )
            .await;
        assert_eq!(run["state"], "suspended");
    }

    /// A session with one claimed run, suspended with a checkpoint and a pending approval.
    pub async fn suspended_with_interaction(&self) -> Suspended {
        let (session_id, run_id, claim) = self.claimed_run("w1").await;
        let token = claim["lease"]["fencing_token"].as_i64().unwrap();
        self.suspend(&run_id, token, true).await;
        let snap = self
            .get_ok(
                &format!("/v1/sessions/{session_id}/snapshot"),
                &self.frontend,
            )
            .await;
        let interaction_id = snap["pending_interactions"][0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        Suspended {
            session_id,
            run_id,
            interaction_id,
        }
    }

    pub async fn snapshot(&self, session_id: &str) -> (String, Value) {
        let res = self
            .get(
                &format!("/v1/sessions/{session_id}/snapshot"),
                &self.frontend,
            )
            .await;
        assert_eq!(res.status(), 200);
        let etag = res.headers()["etag"].to_str().unwrap().to_owned();
        (etag, res.json().await.unwrap())
    }
}

pub struct Suspended {
    pub session_id: String,
    pub run_id: String,
    pub interaction_id: String,
}

impl Suspended {
    /// Where a frontend replies to the pending interaction.
    pub fn reply_path(&self) -> String {
        format!(
            "/v1/sessions/{}/interactions/{}/reply",
            self.session_id, self.interaction_id
        )
    }
}

pub async fn token(store: &Store, role: Role, tenant: Option<&str>) -> String {
    store.create_token(role, tenant, None).await.unwrap().1
}

pub fn hash(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

pub fn suspend_body(fencing_token: i64, sequence: i64, with_interaction: bool) -> Value {
    let mut body = json!({
        "fencing_token": fencing_token,
        "reason": if with_interaction { "approval_required" } else { "manual_pause" },
        "checkpoint": {
            "codec_version": "v1",
            "sequence": sequence,
            "state": {"step": sequence},
            "resolved_spec_hash": hash('a'),
        },
    });
    if with_interaction {
        body["interaction"] = json!({
            "interaction_type": "approval",
            "allowed_decisions": ["approve", "deny"],
            "payload": {"command": "rm -rf build"},
        });
    }
    body
}

/// Asserts the status and returns the JSON body.
pub async fn expect_json(res: Response, status: u16) -> Value {
    let got = res.status();
    let text = res.text().await.unwrap();
    assert_eq!(got.as_u16(), status, "unexpected status; body: {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// Asserts a problem response: status, content type, code and (when given) the field.
pub async fn expect_problem(res: Response, status: u16, code: &str, field: Option<&str>) -> Value {
    assert_eq!(
        res.headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned()),
        Some("application/problem+json".to_owned()),
        "problem content type for {code}"
    );
    assert!(res.headers().contains_key("x-request-id"));
    let body = expect_json(res, status).await;
    assert_eq!(body["code"], code, "problem: {body}");
    assert_eq!(body["status"], status);
    assert!(body["detail"].as_str().is_some_and(|d| !d.is_empty()));
    if let Some(field) = field {
        let fields: Vec<&str> = body["errors"]
            .as_array()
            .map(|a| a.iter().filter_map(|e| e["field"].as_str()).collect())
            .unwrap_or_default();
        assert!(fields.contains(&field), "field {field} expected in {body}");
    }
    body
}

/// Re-checks a condition until it holds (bounded: fails the test after 10 s).
pub async fn until<F, Fut>(mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !cond().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not reached in time"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
