//! The sandbox provider suites: the real local provider on loopback, real HTTP test servers
//! standing in for misbehaving third-party providers.

mod checkpoints;
mod client;
mod conformance;
mod conformance_inventory;
mod crash;
mod faults;
mod grants;
mod hostile;
mod hostile_bounds;
mod hostile_doors;
mod hostile_files;
mod incremental;
mod inventory;
mod isolation;
mod lifecycle;
mod limits;
mod operations;
mod registry;
mod release_steps;
mod restart;
mod warm;

use sagents::providers::client::{CallOptions, ProviderCallError, ProviderClient};
use sagents::providers::wire::{
    CheckpointRef, ExecRequest, ExecResponse, ProvisionRequest, ReleaseRequest, ReleaseSpec,
    RequestContext, RestoreRequest, SandboxHandle, SandboxReleaseReceipt, SandboxState,
};
use sagents::providers::wire_spec::{
    LifecyclePolicy, ReleaseDisposition, ResolvedSandboxSpec, Resources, WorkspaceMode,
    SPEC_VERSION_V3,
};
use sagents_local_provider::{self as local_provider, Config, LocalProvider};

pub const GRANT_SECRET: &str = "test-grant-secret-0123456789abcdef0123";

/// A local provider on an ephemeral port over a temporary root; its sandboxes are killed
/// when the harness is dropped.
pub struct Harness {
    pub root: tempfile::TempDir,
    pub config: Config,
    pub provider: Option<LocalProvider>,
    pub client: ProviderClient,
}

impl Harness {
    pub async fn start() -> Self {
        Self::with(|_| {}).await
    }

    pub async fn with_faults(spec: &str) -> Self {
        let spec = spec.to_string();
        Self::with(move |c| c.fault_injection = Some(spec)).await
    }

    pub async fn with(tweak: impl FnOnce(&mut Config)) -> Self {
        let root = tempfile::tempdir().unwrap();
        let mut config = Config::for_root(root.path());
        config.grant_secret = Some(GRANT_SECRET.into());
        // Most suites call without a token; those that need one set it.
        config.insecure_no_auth = true;
        tweak(&mut config);
        let provider = local_provider::serve(config.clone()).await.unwrap();
        let client = ProviderClient::new(&provider.base_url(), config.token.as_deref()).unwrap();
        Harness {
            root,
            config,
            provider: Some(provider),
            client,
        }
    }

    /// Stops the provider and starts a new one on the same root (sandboxes keep running).
    pub async fn restart(&mut self) {
        if let Some(p) = self.provider.take() {
            p.stop().await;
        }
        let provider = local_provider::serve(self.config.clone()).await.unwrap();
        self.client =
            ProviderClient::new(&provider.base_url(), self.config.token.as_deref()).unwrap();
        self.provider = Some(provider);
    }

    /// Lets the calls a `hold` fault stopped go on.
    pub fn open_held_calls(&self) {
        self.provider.as_ref().unwrap().engine().faults().open();
    }

    pub fn base_url(&self) -> String {
        self.provider.as_ref().unwrap().base_url()
    }

    pub async fn sandbox_state(&self, sandbox_id: &str) -> SandboxState {
        self.client
            .inspect(sandbox_id, &CallOptions::default())
            .await
            .unwrap()
            .state
    }

    pub async fn provision(&self, key: &str) -> SandboxHandle {
        self.provision_spec(key, spec(WorkspaceMode::Isolated, None))
            .await
            .unwrap()
    }

    pub async fn provision_spec(
        &self,
        key: &str,
        spec: ResolvedSandboxSpec,
    ) -> Result<SandboxHandle, ProviderCallError> {
        let req = ProvisionRequest {
            spec,
            owner_run_id: "run_test".into(),
            tenant_id: "acme".into(),
            idempotency_key: key.into(),
            context: RequestContext::default(),
        };
        self.client.provision(&req, &CallOptions::default()).await
    }

    pub async fn release(
        &self,
        h: &SandboxHandle,
        d: ReleaseDisposition,
        key: &str,
    ) -> Result<SandboxReleaseReceipt, ProviderCallError> {
        self.client
            .release(&release_req(h, d, key), &CallOptions::default())
            .await
    }

    pub async fn restore(
        &self,
        checkpoint: &CheckpointRef,
        key: &str,
    ) -> Result<SandboxHandle, ProviderCallError> {
        let req = RestoreRequest {
            checkpoint: checkpoint.clone(),
            spec: spec(WorkspaceMode::Isolated, None),
            owner_run_id: "run_test".into(),
            idempotency_key: key.into(),
            context: RequestContext::default(),
        };
        self.client.restore(&req, &CallOptions::default()).await
    }

    pub async fn sh(
        &self,
        h: &SandboxHandle,
        script: &str,
    ) -> Result<ExecResponse, ProviderCallError> {
        let grant = h
            .grant
            .as_ref()
            .expect("a ready sandbox comes with a grant");
        self.exec(h, &grant.token, exec_req(script)).await
    }

    pub async fn exec(
        &self,
        h: &SandboxHandle,
        grant: &str,
        req: ExecRequest,
    ) -> Result<ExecResponse, ProviderCallError> {
        self.client
            .exec(&h.r#ref.sandbox_id, grant, &req, &CallOptions::default())
            .await
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(p) = &self.provider {
            p.engine().kill_all_now();
        }
    }
}

pub fn exec_req(script: &str) -> ExecRequest {
    ExecRequest {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: None,
        env: None,
        stdin: None,
        timeout_seconds: 20,
    }
}

pub fn release_req(h: &SandboxHandle, d: ReleaseDisposition, key: &str) -> ReleaseRequest {
    ReleaseRequest {
        request: ReleaseSpec {
            r#ref: h.r#ref.clone(),
            disposition: d,
            reason: "approval_required".into(),
            expected_revision: None,
            idempotency_key: key.into(),
        },
        context: RequestContext {
            actor: "test".into(),
            fencing_token: Some(7),
            ..Default::default()
        },
    }
}

pub fn spec(mode: WorkspaceMode, host: Option<&str>) -> ResolvedSandboxSpec {
    ResolvedSandboxSpec {
        spec_version: SPEC_VERSION_V3.into(),
        provider_id: "local".into(),
        spec_hash: format!("sha256:{}", "a".repeat(64)),
        policy_hash: format!("sha256:{}", "b".repeat(64)),
        workspace_mode: mode,
        host_workspace: host.map(str::to_owned),
        lifecycle: LifecyclePolicy::default(),
        resources: Resources::default(),
        metadata: serde_json::json!({}),
    }
}

/// The host pid of what the sandbox knows as `nspid` (an isolated sandbox has its own pids).
pub fn host_pid(h: &SandboxHandle, nspid: i32) -> i32 {
    sagents_local_provider::process::host_pid(&h.r#ref.sandbox_id, nspid)
        .expect("the process runs in the sandbox")
}

/// Whether a process exists and is not a zombie, and its state letter.
pub fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let state = stat[stat.rfind(')')? + 1..].trim_start().chars().next()?;
    (state != 'Z' && state != 'X').then_some(state)
}

/// The process exists and is not stopped (a paused sandbox would show `T`). A live process
/// may show `R` or `S` depending on when it is looked at.
pub fn running(pid: i32) -> bool {
    proc_state(pid).is_some_and(|s| s != 'T' && s != 't')
}

/// The refusal's status and code, or a panic naming what came instead.
pub fn refused(r: Result<impl std::fmt::Debug, ProviderCallError>) -> (u16, String) {
    match r {
        Err(ProviderCallError::Refused { status, error }) => (status, error.code),
        other => panic!("expected a refusal, got {other:?}"),
    }
}
