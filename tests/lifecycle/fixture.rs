//! The real app over HTTP with the real local provider registered, a manual clock, and the
//! lifecycle driven explicitly by a pool without background workers on the app's store.

use reqwest::Method;
use sagents::domain::run::Run;
use sagents::domain::sandbox::WorkspaceMode;
use sagents::providers::client::{CallOptions, ProviderCallError};
use sagents::providers::wire::ExecResponse;
use serde_json::{json, Value};

use super::{Replica, PROVIDER_TOKEN};
use crate::common::app::{expect_json, hash, Options, TestApp};
use crate::provider::{exec_req, Harness};
use sagents::clock::Clock as _;
use sagents::store::Backend;
use sagents_local_provider::Clock;

pub struct Ax {
    pub app: TestApp,
    pub provider: Harness,
    pub driver: Replica,
}

pub async fn ax(backend: Backend) -> Ax {
    ax_with_faults(backend, "").await
}

pub async fn ax_with_faults(backend: Backend, faults: &str) -> Ax {
    let opts = Options {
        manual_clock: true,
        workers: Some(0),
        ..Options::default()
    };
    ax_with(backend, faults, opts).await
}

pub async fn ax_with(backend: Backend, faults: &str, opts: Options) -> Ax {
    let app = TestApp::spawn_with(backend, opts).await;
    let faults = faults.to_string();
    // The provider holds only the service's public key, as deployed; it reads the app's clock.
    let public_key = app.state.grants.verifier().public_key_text();
    let clock = app.clock.clone();
    let provider = Harness::with(move |c| {
        c.token = Some(PROVIDER_TOKEN.into());
        c.grant_secret = None;
        c.grant_public_key = public_key;
        if let Some(clock) = clock {
            c.clock = Clock::from_fn(move || clock.now());
        }
        if !faults.is_empty() {
            c.fault_injection = Some(faults);
        }
    })
    .await;
    app.post_ok(
        "/v1/admin/providers",
        &app.admin,
        &json!({
            "provider_id": "local",
            "base_url": provider.base_url(),
            "token": PROVIDER_TOKEN,
        }),
        201,
    )
    .await;
    let driver = Replica::new(app.store().clone(), "driver");
    Ax {
        app,
        provider,
        driver,
    }
}

/// What a test needs of one claimed, sandbox-backed run.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub run_id: String,
    pub kind: String,
    pub token: i64,
    pub lease_id: String,
    pub sandbox_id: String,
    pub generation: i64,
    pub grant: String,
}

impl Claimed {
    fn of(claim: &Value) -> Claimed {
        let sandbox = &claim["sandbox"];
        Claimed {
            run_id: claim["run"]["id"].as_str().unwrap().to_owned(),
            kind: claim["kind"].as_str().unwrap().to_owned(),
            token: claim["lease"]["fencing_token"].as_i64().unwrap(),
            lease_id: claim["lease"]["lease_id"].as_str().unwrap().to_owned(),
            sandbox_id: sandbox["ref"]["sandbox_id"]
                .as_str()
                .unwrap_or_else(|| panic!("a sandbox-backed claim: {claim}"))
                .to_owned(),
            generation: sandbox["generation"].as_i64().unwrap(),
            grant: sandbox["grant"].as_str().unwrap().to_owned(),
        }
    }
}

pub fn spec_json(mode: WorkspaceMode, host: Option<&str>) -> Value {
    serde_json::to_value(super::spec(mode, host)).unwrap()
}

impl Ax {
    pub async fn drain(&self) -> usize {
        self.driver.drain().await
    }

    pub fn advance(&self, seconds: i64) {
        self.app.advance(chrono::Duration::seconds(seconds));
    }

    pub async fn run_with(&self, session_id: &str, spec: Value, parent: Option<&str>) -> String {
        let mut body = json!({
            "sandbox_spec": spec,
            "resolved_spec_hash": hash('c'),
            "input": {"prompt": "build it"},
        });
        if let Some(p) = parent {
            body["parent_run_id"] = json!(p);
        }
        let run = self
            .app
            .post_ok(
                &format!("/v1/sessions/{session_id}/runs"),
                &self.app.runtime,
                &body,
                201,
            )
            .await;
        run["id"].as_str().unwrap().to_owned()
    }

    /// A run with an isolated sandbox spec and no parent.
    pub async fn isolated_run(&self, session_id: &str) -> String {
        let spec = spec_json(WorkspaceMode::Isolated, None);
        self.run_with(session_id, spec, None).await
    }

    /// An isolated run, provisioned and claimed by the runtime.
    pub async fn running_isolated(&self, session_id: &str) -> (String, Claimed) {
        let run = self.isolated_run(session_id).await;
        self.drain().await;
        (run, self.claim().await)
    }

    pub async fn claim(&self) -> Claimed {
        Claimed::of(&self.app.claim_one("runtime-1").await)
    }

    pub fn claimed(&self, claim: &Value) -> Claimed {
        Claimed::of(claim)
    }

    pub async fn claim_none(&self) {
        let body = self
            .app
            .post_ok(
                "/v1/runtime/claims",
                &self.app.runtime,
                &json!({"worker_id": "runtime-1", "max": 10}),
                200,
            )
            .await;
        assert_eq!(body["claims"], json!([]), "nothing claimable expected");
    }

    pub async fn record(&self, run_id: &str) -> Value {
        self.app
            .get_ok(
                &format!("/v1/admin/runs/{run_id}/execution-resource"),
                &self.app.admin,
            )
            .await
    }

    pub async fn metrics(&self) -> Value {
        self.app
            .get_ok("/v1/admin/lifecycle/metrics", &self.app.admin)
            .await
    }

    /// The Prometheus text of `/metrics`.
    pub async fn prometheus(&self) -> String {
        let res = self.app.get("/metrics", &self.app.admin).await;
        res.text().await.unwrap()
    }

    pub async fn run(&self, run_id: &str) -> Run {
        self.app
            .store()
            .get_run(None, &run_id.parse().unwrap())
            .await
            .unwrap()
    }

    pub async fn exec(&self, c: &Claimed, script: &str) -> Result<ExecResponse, ProviderCallError> {
        self.provider
            .client
            .exec(
                &c.sandbox_id,
                &c.grant,
                &exec_req(script),
                &CallOptions::default(),
            )
            .await
    }

    /// Runs `script` in the claimed sandbox with the claim's grant; its stdout.
    pub async fn sh(&self, c: &Claimed, script: &str) -> String {
        let out = self.exec(c, script).await.unwrap();
        assert_eq!(out.exit_code, Some(0), "stderr: {}", out.stderr);
        out.stdout
    }

    /// Starts a process in the sandbox and returns its host pid.
    pub async fn background(&self, c: &Claimed) -> i32 {
        self.background_pids(c).await.0
    }

    /// Starts a process in the sandbox: its host pid, and its pid inside the sandbox.
    pub async fn background_pids(&self, c: &Claimed) -> (i32, i32) {
        let nspid = self
            .sh(c, "sleep 1000 >/dev/null 2>&1 & echo $!")
            .await
            .trim()
            .parse()
            .unwrap();
        let host = sagents_local_provider::process::host_pid(&c.sandbox_id, nspid).unwrap();
        (host, nspid)
    }

    pub async fn post_run(&self, run_id: &str, action: &str, body: Value) -> Value {
        self.app
            .post_ok(
                &format!("/v1/runs/{run_id}/{action}"),
                &self.app.runtime,
                &body,
                200,
            )
            .await
    }

    pub async fn suspend(&self, c: &Claimed, reason: &str) {
        let run = self
            .post_run(
                &c.run_id,
                "suspend",
                json!({
                    "fencing_token": c.token,
                    "reason": reason,
                    "checkpoint": {
                        "codec_version": "v1",
                        "sequence": c.generation,
                        "state": {"step": c.generation},
                        "resolved_spec_hash": hash('c'),
                    },
                    "interaction": {
                        "interaction_type": "approval",
                        "allowed_decisions": ["approve", "deny"],
                        "payload": {"command": "make deploy"},
                    },
                }),
            )
            .await;
        assert_eq!(run["state"], "suspended");
    }

    /// Has the coordinator act once and asserts the run's compute is active in `generation`;
    /// the run's record.
    pub async fn drain_to_active(&self, run_id: &str, generation: i64) -> Value {
        assert_eq!(self.drain().await, 1);
        let record = self.record(run_id).await;
        assert_eq!(record["state"], "active", "{record}");
        assert_eq!(record["generation"], generation);
        record
    }

    /// A running isolated run with a file written (`state.txt` = `v1`) and a background
    /// process, suspended for an approval: `(session, run, claim, pid)`.
    pub async fn suspended_with_work(&self) -> (String, String, Claimed, i32) {
        let session = self.app.create_session().await;
        let (run, claim) = self.running_isolated(&session).await;
        self.sh(&claim, "printf v1 > state.txt").await;
        let pid = self.background(&claim).await;
        self.suspend(&claim, "approval_required").await;
        (session, run, claim, pid)
    }

    /// How many releases of `disposition` ended in `outcome` in this process.
    pub fn releases(&self, disposition: &str, outcome: &str) -> u64 {
        self.app
            .store()
            .metrics()
            .lifecycle
            .releases(disposition, outcome)
    }

    /// Suspends the claimed run and has the coordinator act on it once: the snapshot as the
    /// user saw it on suspension, and the run's record after.
    pub async fn suspend_and_drain(
        &self,
        session_id: &str,
        c: &Claimed,
        reason: &str,
    ) -> ((String, Vec<u8>), Value) {
        self.suspend(c, reason).await;
        let user_view = self.snapshot_bytes(session_id).await;
        assert_eq!(
            self.drain().await,
            1,
            "one lifecycle step for the suspension"
        );
        (user_view, self.record(&c.run_id).await)
    }

    /// Replies `approve` to the session's only pending interaction.
    pub async fn approve(&self, session_id: &str) -> Value {
        let (_, snap) = self.app.snapshot(session_id).await;
        let interaction = snap["pending_interactions"][0]["id"].as_str().unwrap();
        self.app
            .post_ok(
                &format!("/v1/sessions/{session_id}/interactions/{interaction}/reply"),
                &self.app.frontend,
                &json!({"decision": "approve"}),
                200,
            )
            .await
    }

    pub async fn resumed(&self, c: &Claimed) {
        let run = self
            .post_run(
                &c.run_id,
                "resumed",
                json!({
                    "fencing_token": c.token,
                    "resolved_spec_hash": hash('c'),
                    "spec_hash": hash('a'),
                    "policy_hash": hash('b'),
                }),
            )
            .await;
        assert_eq!(run["state"], "running");
    }

    pub async fn complete(&self, c: &Claimed) {
        let run = self
            .post_run(
                &c.run_id,
                "complete",
                json!({"fencing_token": c.token, "output": {"ok": true}}),
            )
            .await;
        assert_eq!(run["state"], "completed");
    }

    /// The snapshot's exact bytes and its ETag.
    pub async fn snapshot_bytes(&self, session_id: &str) -> (String, Vec<u8>) {
        let res = self
            .app
            .get(
                &format!("/v1/sessions/{session_id}/snapshot"),
                &self.app.frontend,
            )
            .await;
        assert_eq!(res.status(), 200);
        let etag = res.headers()["etag"].to_str().unwrap().to_owned();
        (etag, res.bytes().await.unwrap().to_vec())
    }

    pub async fn patch_job(&self, run_id: &str, job_id: &str, state: &str) -> Value {
        let res = self
            .app
            .request(
                Method::PATCH,
                &format!("/v1/runs/{run_id}/jobs/{job_id}"),
                &self.app.runtime,
            )
            .json(&json!({"state": state}))
            .send()
            .await
            .unwrap();
        expect_json(res, 200).await
    }
}
