//! The v3 conformance checker: runs the contract against any provider over HTTP.
//!
//! Checks: `capabilities_v3`, `disposition_<name>` for each advertised disposition,
//! `release_idempotent`, `receipts_consistent`, `restore_brings_files_back`,
//! `old_grants_refused_after_terminate`, `detach_never_releases_compute`, the grant checks in
//! `conformance/grants.rs` and the inventory checks in `conformance/inventory.rs`. Checks that need a feature the provider does not
//! advertise pass with a `skipped:` detail and are printed `SKIP`.

mod grants;
mod inventory;

use super::client::{CallOptions, ProviderCallError, ProviderClient};
use super::codes;
use super::grant::GrantSigner;
use super::wire::{
    AttachRequest, Capabilities, ProvisionRequest, ReleaseRequest, ReleaseSpec, RequestContext,
    RestoreRequest, SandboxHandle, SandboxReleaseReceipt, SandboxState, API_VERSION_V3,
    CAPABILITY_SANDBOX,
};
use super::wire_spec::{
    LifecyclePolicy, ReleaseDisposition as D, ResolvedSandboxSpec, Resources, WorkspaceMode,
    SPEC_VERSION_V3,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

impl CheckResult {
    /// Passed without running: the provider does not advertise what the check needs.
    pub fn skipped(&self) -> bool {
        self.passed && self.detail.starts_with("skipped:")
    }
}

const TENANT: &str = "conformance";

type Outcome = Result<String, String>;

fn result(name: &str, outcome: Outcome) -> CheckResult {
    let (passed, detail) = match outcome {
        Ok(d) => (true, d),
        Err(d) => (false, d),
    };
    CheckResult {
        name: name.into(),
        passed,
        detail,
    }
}

/// Prints `PASS name` / `SKIP name: why` / `FAIL name: detail` per check; true when none
/// failed.
#[allow(clippy::print_stdout, reason = "the report is the CLI's output")]
pub fn print_report(results: &[CheckResult]) -> bool {
    for r in results {
        if r.skipped() {
            let why = r.detail.trim_start_matches("skipped:").trim_start();
            println!("SKIP {}: {why}", r.name);
        } else if r.passed {
            println!("PASS {}", r.name);
        } else {
            println!("FAIL {}: {}", r.name, r.detail);
        }
    }
    results.iter().all(|r| r.passed)
}

struct Checker {
    client: ProviderClient,
    base_url: String,
    has_token: bool,
    /// Mints exec grants when the provider cannot (it holds only the service's public key).
    grants: Option<GrantSigner>,
    caps: Capabilities,
    run: String,
    seq: std::sync::atomic::AtomicU32,
    receipts: std::sync::Mutex<Vec<(String, SandboxReleaseReceipt)>>,
}

fn digest(fill: char) -> String {
    format!("sha256:{}", fill.to_string().repeat(64))
}

fn e(context: &str, err: ProviderCallError) -> String {
    format!("{context}: {err}")
}

impl Checker {
    fn key(&self, what: &str) -> String {
        let n = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("conformance-{}-{what}-{n}", self.run)
    }

    fn spec(&self) -> ResolvedSandboxSpec {
        ResolvedSandboxSpec {
            spec_version: SPEC_VERSION_V3.into(),
            provider_id: self.caps.provider_id.clone(),
            spec_hash: digest('c'),
            policy_hash: digest('d'),
            workspace_mode: WorkspaceMode::Isolated,
            host_workspace: None,
            lifecycle: LifecyclePolicy::default(),
            resources: Resources::default(),
            metadata: serde_json::json!({"purpose": "conformance"}),
        }
    }

    fn owner(&self) -> String {
        format!("run_conformance_{}", self.run)
    }

    async fn provision(&self) -> Result<SandboxHandle, String> {
        let req = ProvisionRequest {
            spec: self.spec(),
            owner_run_id: self.owner(),
            tenant_id: TENANT.into(),
            idempotency_key: self.key("provision"),
            context: context(),
        };
        let h = self
            .client
            .provision(&req, &CallOptions::default())
            .await
            .map_err(|x| e("provision", x))?;
        if h.state != SandboxState::Ready {
            return Err(format!(
                "provision answered state `{}`, not `ready`",
                h.state
            ));
        }
        Ok(h)
    }

    fn release_req(&self, h: &SandboxHandle, d: D, key: &str) -> ReleaseRequest {
        ReleaseRequest {
            request: ReleaseSpec {
                r#ref: h.r#ref.clone(),
                disposition: d,
                reason: "conformance".into(),
                expected_revision: None,
                idempotency_key: key.into(),
            },
            context: context(),
        }
    }

    /// Sends a release and records the receipt for `receipts_consistent`.
    async fn release(
        &self,
        h: &SandboxHandle,
        d: D,
        key: &str,
    ) -> Result<SandboxReleaseReceipt, String> {
        let req = self.release_req(h, d, key);
        let r = self
            .client
            .release_unchecked(&req, &CallOptions::default())
            .await
            .map_err(|x| e(&format!("release {d}"), x))?;
        self.receipts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((format!("{d} of {}", h.r#ref.sandbox_id), r.clone()));
        Ok(r)
    }

    async fn cleanup(&self, h: &SandboxHandle) {
        let _ = self.release(h, D::Terminate, &self.key("cleanup")).await;
    }

    async fn state_of(&self, h: &SandboxHandle) -> Result<SandboxState, String> {
        self.client
            .inspect(&h.r#ref.sandbox_id, &CallOptions::default())
            .await
            .map(|i| i.state)
            .map_err(|x| e("inspect", x))
    }

    async fn disposition(&self, d: D) -> Outcome {
        let h = self.provision().await?;
        let outcome = self.disposition_on(&h, d).await;
        if d == D::Detach || outcome.is_err() {
            self.cleanup(&h).await;
        }
        outcome
    }

    async fn disposition_on(&self, h: &SandboxHandle, d: D) -> Outcome {
        let r = self.release(h, d, &self.key("disposition")).await?;
        r.check_answers(&self.release_req(h, d, "-").request)
            .map_err(|x| format!("inconsistent receipt: {x}"))?;
        let state = self.state_of(h).await?;
        match d {
            D::Detach if r.compute_released || state == SandboxState::Terminated => Err(format!(
                "detach released compute (receipt compute_released={}, state {state})",
                r.compute_released
            )),
            D::Terminate | D::SnapshotAndTerminate if !r.compute_released => {
                Err(format!("{d} did not release compute"))
            }
            D::Terminate | D::SnapshotAndTerminate if state != SandboxState::Terminated => Err(
                format!("after {d} the sandbox is `{state}`, not `terminated`"),
            ),
            _ => Ok(format!("receipt state {}", r.state)),
        }
    }

    async fn idempotent(&self) -> Outcome {
        let h = self.provision().await?;
        let key = self.key("idem");
        let first = self.release(&h, D::Terminate, &key).await?;
        let second = self.release(&h, D::Terminate, &key).await?;
        if first.duplicate {
            return Err("the first release already says duplicate: true".into());
        }
        if !second.duplicate {
            return Err(
                "a repeated (sandbox_id, idempotency_key) did not answer duplicate: true".into(),
            );
        }
        let same = first.state == second.state
            && first.compute_released == second.compute_released
            && first.checkpoint == second.checkpoint
            && first.released_at == second.released_at;
        if !same {
            return Err("the repeated release answered a different outcome".into());
        }
        Ok("duplicate: true with the same outcome".into())
    }

    fn offers_snapshot(&self) -> bool {
        self.caps.supports_snapshot
            && self
                .caps
                .supported_release_dispositions
                .contains(&D::SnapshotAndTerminate)
    }

    async fn restore(&self) -> Outcome {
        if !self.offers_snapshot() || !self.caps.supports_restore {
            return Ok("skipped: the provider offers no snapshot and restore".into());
        }
        let h = self.provision().await?;
        let marker = format!("conformance-{}", self.run);
        let grant = self.exec_grant(&h);
        if let Some(g) = &grant {
            if let Err(x) = self
                .exec(&h, g, &format!("printf %s {marker} > conformance.txt"))
                .await
            {
                self.cleanup(&h).await;
                return Err(e("exec (write)", x));
            }
        }
        let r = match self
            .release(&h, D::SnapshotAndTerminate, &self.key("snap"))
            .await
        {
            Ok(r) => r,
            Err(x) => {
                self.cleanup(&h).await;
                return Err(x);
            }
        };
        let checkpoint = r
            .checkpoint
            .ok_or("snapshot_and_terminate returned no checkpoint")?;
        let req = RestoreRequest {
            checkpoint,
            spec: self.spec(),
            owner_run_id: self.owner(),
            idempotency_key: self.key("restore"),
            context: context(),
        };
        let restored = self
            .client
            .restore(&req, &CallOptions::default())
            .await
            .map_err(|x| e("restore", x))?;
        let outcome = self
            .check_restored(&restored, grant.is_some(), &marker)
            .await;
        self.cleanup(&restored).await;
        outcome
    }

    async fn check_restored(&self, restored: &SandboxHandle, exec: bool, marker: &str) -> Outcome {
        if restored.state != SandboxState::Ready {
            return Err(format!("restore answered state `{}`", restored.state));
        }
        if !exec {
            return Ok("restored to ready (files not checked: no exec)".into());
        }
        let g = self
            .exec_grant(restored)
            .ok_or("the restored sandbox came without a grant")?;
        let got = self
            .exec(restored, &g, "cat conformance.txt")
            .await
            .map_err(|x| e("exec (read)", x))?;
        if got != marker {
            return Err(format!(
                "the restored file holds `{}`, not `{marker}`",
                got.chars().take(80).collect::<String>()
            ));
        }
        Ok("the file written before the snapshot came back".into())
    }

    async fn detach(&self) -> Outcome {
        if !self
            .caps
            .supported_release_dispositions
            .contains(&D::Detach)
        {
            return Ok("skipped: the provider does not offer detach".into());
        }
        let h = self.provision().await?;
        let outcome = self.detach_on(&h).await;
        self.cleanup(&h).await;
        outcome
    }

    async fn detach_on(&self, h: &SandboxHandle) -> Outcome {
        let r = self.release(h, D::Detach, &self.key("detach")).await?;
        if r.compute_released {
            return Err("a detach receipt says compute_released: true".into());
        }
        let state = self.state_of(h).await?;
        if !matches!(state, SandboxState::Ready | SandboxState::Suspended) {
            return Err(format!("after detach the sandbox is `{state}`"));
        }
        if self.caps.supports_reconnect {
            self.client
                .attach(
                    &h.r#ref.sandbox_id,
                    &AttachRequest { context: context() },
                    &CallOptions::default(),
                )
                .await
                .map_err(|x| e("attach after detach", x))?;
        }
        Ok("compute kept and reachable".into())
    }

    /// The only evidence that a sandbox is gone is `sandbox.not_found` in a v3 error body.
    async fn unknown_sandbox(&self) -> Outcome {
        let id = format!("sbx_conformance_{}_unknown", self.run);
        match self.client.inspect(&id, &CallOptions::default()).await {
            Err(ProviderCallError::Refused { status, error })
                if status == 404 && codes::is_sandbox_not_found(&error) =>
            {
                Ok(format!("{status} {}", error.code))
            }
            Err(other) => Err(format!(
                "an unknown sandbox must be answered 404 `{}` in a v3 error body, or the \
                 service never takes the provider's word that a sandbox is gone: {other}",
                codes::SANDBOX_NOT_FOUND
            )),
            Ok(info) => Err(format!(
                "an unknown sandbox was inspected: {:?}",
                info.state
            )),
        }
    }

    fn consistent(&self) -> Outcome {
        let receipts = self.receipts.lock().unwrap_or_else(|p| p.into_inner());
        let bad: Vec<String> = receipts
            .iter()
            .filter_map(|(what, r)| r.check_consistency().err().map(|x| format!("{what}: {x}")))
            .collect();
        if receipts.is_empty() {
            return Err("no receipt was obtained".into());
        }
        if bad.is_empty() {
            Ok(format!("{} receipts consistent", receipts.len()))
        } else {
            Err(bad.join("; "))
        }
    }
}

fn context() -> RequestContext {
    RequestContext {
        actor: "sagents-conformance".into(),
        ..Default::default()
    }
}

/// Runs every check against the provider at `base_url`, with the grants it mints itself.
pub async fn run_checks(base_url: &str, token: Option<&str>) -> Vec<CheckResult> {
    run_checks_with(base_url, token, None).await
}

/// Runs every check; exec grants are minted with `grants` when given (a provider that only
/// verifies the service's grants mints none), else taken from the provider's answers.
pub async fn run_checks_with(
    base_url: &str,
    token: Option<&str>,
    grants: Option<GrantSigner>,
) -> Vec<CheckResult> {
    let client = match ProviderClient::new(base_url, token) {
        Ok(c) => c,
        Err(x) => return vec![result("capabilities_v3", Err(x.to_string()))],
    };
    let raw = match client.capabilities_raw(&CallOptions::default()).await {
        Ok(v) => v,
        Err(x) => return vec![result("capabilities_v3", Err(e("GET /v3/capabilities", x)))],
    };
    let caps: Capabilities = match serde_json::from_value(raw.clone()) {
        Ok(c) => c,
        Err(x) => {
            let version = raw
                .get("api_version")
                .map_or("missing".into(), |v| v.to_string());
            let detail = format!("not a v3 capabilities document (api_version {version}): {x}");
            return vec![result("capabilities_v3", Err(detail))];
        }
    };
    let pinned = if caps.api_version != API_VERSION_V3 {
        Err(format!("api_version is `{}`, not `3`", caps.api_version))
    } else if caps.capability != CAPABILITY_SANDBOX {
        Err(format!(
            "capability is `{}`, not `{CAPABILITY_SANDBOX}`",
            caps.capability
        ))
    } else if caps.supported_release_dispositions.is_empty() {
        Err("no release disposition is advertised".into())
    } else {
        Ok(format!(
            "dispositions: {:?}",
            caps.supported_release_dispositions
        ))
    };
    let pinned_ok = pinned.is_ok();
    let mut out = vec![result("capabilities_v3", pinned)];
    if !pinned_ok {
        return out;
    }
    let checker = Checker {
        client,
        base_url: base_url.to_owned(),
        has_token: token.is_some_and(|t| !t.is_empty()),
        grants,
        run: uuid::Uuid::now_v7().simple().to_string(),
        caps,
        seq: Default::default(),
        receipts: Default::default(),
    };
    for d in checker.caps.supported_release_dispositions.clone() {
        out.push(result(
            &format!("disposition_{d}"),
            checker.disposition(d).await,
        ));
    }
    out.push(result("release_idempotent", checker.idempotent().await));
    out.push(result("restore_brings_files_back", checker.restore().await));
    out.push(result(
        "old_grants_refused_after_terminate",
        checker.old_grants().await,
    ));
    out.push(result(
        "exec_refuses_the_service_token",
        checker.exec_needs_grant().await,
    ));
    out.push(result(
        "grants_refused_off_exec",
        checker.grant_off_exec().await,
    ));
    out.push(result(
        "detach_never_releases_compute",
        checker.detach().await,
    ));
    out.push(result(
        "unknown_sandbox_not_found",
        checker.unknown_sandbox().await,
    ));
    out.extend(checker.inventory_checks().await);
    out.push(result("receipts_consistent", checker.consistent()));
    out
}
