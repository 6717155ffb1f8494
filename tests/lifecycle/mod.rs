//! The lifecycle suites: the coordinator and the worker pool against the real local provider
//! on loopback and a real database, on SQLite and on PostgreSQL.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use sagents::clock::{Clock, ManualClock};
use sagents::domain::claim::Claim;
use sagents::domain::commands::{
    CreateRun, CreateSession, NewCheckpoint, NewInteraction, ReplyInteraction, SuspendRun,
};
use sagents::domain::interaction::{InteractionType, SuspensionReason};
use sagents::domain::resource::ExecutionResourceRecord;
use sagents::domain::run::Run;
use sagents::domain::sandbox::{ResolvedSandboxSpec, WorkspaceMode};
use sagents::domain::session::Session;
use sagents::domain::RunId;
use sagents::lifecycle::clients::ProviderClients;
use sagents::lifecycle::coordinator::Coordinator;
use sagents::metrics::Metrics;
use sagents::notify::ChangeHub;
use sagents::providers::client::ClientConfig;
use sagents::scheduler::{PoolConfig, WorkerPool};
use sagents::store::{Backend, Store};
use serde_json::json;
use tokio::sync::watch;

use crate::common::db::{self, TestDb};
use crate::provider::Harness;

mod attention;
mod blocking;
mod broken;
mod claim_intents;
mod coordinator;
mod cycle;
mod evidence;
mod faults;
pub(crate) mod fixture;
mod grants;
mod handles;
mod history;
mod lost;
mod outage;
mod pool;
mod provider_back;
mod reconcile;
mod refusals;
mod replicas;
mod resume_faults;
mod resume_wakeups;
mod timeouts;
mod unconfirmed;

pub const TENANT: &str = "acme";
pub const PROVIDER_TOKEN: &str = "provider-token-0123456789abcdef0123";
pub const TTL_SECONDS: u64 = 30;

pub fn ttl() -> Duration {
    Duration::seconds(TTL_SECONDS as i64)
}

pub fn hash(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

/// The spec the provider tests use (same hashes), as a run stores it.
pub fn spec(mode: WorkspaceMode, host: Option<&str>) -> ResolvedSandboxSpec {
    ResolvedSandboxSpec {
        spec_hash: format!("sha256:{}", "a".repeat(64)),
        policy_hash: format!("sha256:{}", "b".repeat(64)),
        host_workspace: host.map(str::to_owned),
        ..ResolvedSandboxSpec::example("local", mode)
    }
}

/// One replica: a store, its coordinator and a pool without background workers, driven
/// with `drain`.
pub struct Replica {
    pub store: Store,
    pub coordinator: Arc<Coordinator>,
    pub pool: WorkerPool,
    _stop: watch::Sender<bool>,
}

impl Replica {
    pub fn new(store: Store, name: &str) -> Self {
        let coordinator = Arc::new(Coordinator::new(store.clone(), name));
        Self::with_coordinator(store, name, coordinator)
    }

    /// A replica whose provider clients are built with `config` (e.g. its timeouts).
    pub fn with_clients(store: Store, name: &str, config: ClientConfig) -> Self {
        let clients = Arc::new(ProviderClients::with_config(store.clone(), config));
        let coordinator = Arc::new(Coordinator::with_clients(store.clone(), name, clients));
        Self::with_coordinator(store, name, coordinator)
    }

    fn with_coordinator(store: Store, name: &str, coordinator: Arc<Coordinator>) -> Self {
        let (stop, shutdown) = watch::channel(false);
        let config = PoolConfig::new(name, 0, std::time::Duration::from_secs(TTL_SECONDS));
        let pool = WorkerPool::start(coordinator.clone(), store.clone(), config, shutdown);
        Replica {
            store,
            coordinator,
            pool,
            _stop: stop,
        }
    }

    /// Processes due lifecycle work until none is left now; returns how many runs it took.
    pub async fn drain(&self) -> usize {
        let mut total = 0;
        for _ in 0..50 {
            match self.pool.run_once().await {
                0 => return total,
                n => total += n,
            }
        }
        panic!("lifecycle work never settled");
    }
}

/// A database with the local provider registered, a manual clock and one replica.
pub struct Lx {
    pub clock: ManualClock,
    pub provider: Harness,
    pub main: Replica,
    _db: TestDb,
}

pub async fn lx(backend: Backend) -> Lx {
    lx_with_faults(backend, "").await
}

pub async fn lx_with_faults(backend: Backend, faults: &str) -> Lx {
    lx_on(backend, faults, false).await
}

/// A clock that moves on by a millisecond every time it is read, as a busy machine's does
/// between two reads: nothing may depend on two reads giving the same time.
struct Ticking(ManualClock);

impl Clock for Ticking {
    fn now(&self) -> DateTime<Utc> {
        let now = self.0.now();
        self.0.advance(Duration::milliseconds(1));
        now
    }
}

/// [`lx_with_faults`] on a clock that moves on by a millisecond at every read.
pub async fn lx_ticking(backend: Backend, faults: &str) -> Lx {
    lx_on(backend, faults, true).await
}

async fn lx_on(backend: Backend, faults: &str, ticking: bool) -> Lx {
    let faults = faults.to_string();
    let provider = Harness::with(move |c| {
        c.token = Some(PROVIDER_TOKEN.into());
        if !faults.is_empty() {
            c.fault_injection = Some(faults);
        }
    })
    .await;
    let clock = ManualClock::new(Utc::now());
    let source: Arc<dyn Clock> = match ticking {
        true => Arc::new(Ticking(clock.clone())),
        false => Arc::new(clock.clone()),
    };
    let (store, db) = db::store(backend, source).await;
    register(&store, &provider).await;
    Lx {
        clock,
        main: Replica::new(store, "replica-a"),
        provider,
        _db: db,
    }
}

pub async fn register(store: &Store, provider: &Harness) {
    register_at(store, provider, &provider.base_url()).await;
}

/// Registers `provider` as reached at `base_url` (e.g. through a proxy).
pub async fn register_at(store: &Store, provider: &Harness, base_url: &str) {
    let caps = provider.provider.as_ref().unwrap().engine().capabilities();
    store
        .upsert_provider(
            "local",
            base_url,
            PROVIDER_TOKEN,
            &serde_json::to_value(caps).unwrap(),
            "u",
        )
        .await
        .unwrap();
}

impl Lx {
    pub fn store(&self) -> &Store {
        &self.main.store
    }

    /// Another replica on the same database and clock, with its own pools, hub and metrics.
    pub async fn replica(&self, name: &str) -> Replica {
        let store = Store::connect(
            self.store().url(),
            Arc::new(self.clock.clone()),
            ChangeHub::new(),
            Arc::new(Metrics::default()),
        )
        .await
        .unwrap();
        Replica::new(store, name)
    }

    pub async fn drain(&self) -> usize {
        self.main.drain().await
    }

    pub fn advance(&self, seconds: i64) {
        self.clock.advance(Duration::seconds(seconds));
    }

    pub async fn session(&self) -> Session {
        self.store()
            .create_session(
                TENANT,
                &CreateSession {
                    title: Some("lifecycle".into()),
                    metadata: json!({}),
                    parent_session_id: None,
                },
            )
            .await
            .unwrap()
    }

    pub async fn run(
        &self,
        session: &Session,
        spec: ResolvedSandboxSpec,
        parent: Option<&RunId>,
    ) -> Run {
        self.store()
            .create_run(
                TENANT,
                &session.id,
                &CreateRun {
                    parent_run_id: parent.cloned(),
                    sandbox_spec: Some(spec),
                    resolved_spec_hash: hash('c'),
                    input: json!({ "prompt": "build it" }),
                },
            )
            .await
            .unwrap()
    }

    pub async fn isolated_run(&self, session: &Session) -> Run {
        self.run(session, spec(WorkspaceMode::Isolated, None), None)
            .await
    }

    /// An isolated run, provisioned, claimed and suspended for an approval (not yet released).
    pub async fn awaiting_approval(&self, session: &Session) -> Run {
        let run = self.isolated_run(session).await;
        assert_eq!(self.drain().await, 1);
        let claim = self.claim_one().await;
        self.suspend(&claim, SuspensionReason::ApprovalRequired, 1)
            .await;
        run
    }

    pub async fn record(&self, run: &RunId) -> ExecutionResourceRecord {
        self.store().get_resource(run).await.unwrap()
    }

    /// Claims exactly one run for the runtime.
    pub async fn claim_one(&self) -> Claim {
        let mut claims = self
            .store()
            .claim_runs(Some(TENANT), "runtime-1", 1, ttl())
            .await
            .unwrap();
        assert_eq!(claims.len(), 1, "one claim expected");
        claims.remove(0)
    }

    pub async fn claim_none(&self) {
        let claims = self
            .store()
            .claim_runs(Some(TENANT), "runtime-1", 10, ttl())
            .await
            .unwrap();
        assert!(claims.is_empty(), "nothing claimable expected: {claims:?}");
    }

    pub async fn suspend(&self, claim: &Claim, reason: SuspensionReason, sequence: i64) {
        self.store()
            .suspend_run(
                Some(TENANT),
                &claim.run.id,
                &SuspendRun {
                    fencing_token: claim.lease.fencing_token,
                    reason,
                    checkpoint: NewCheckpoint {
                        codec_version: "v1".into(),
                        sequence,
                        state: json!({ "step": sequence }),
                        resolved_spec_hash: hash('c'),
                    },
                    interaction: Some(NewInteraction {
                        interaction_type: InteractionType::Approval,
                        allowed_decisions: vec!["approve".into(), "deny".into()],
                        payload: json!({ "command": "make deploy" }),
                        expires_at: None,
                        expires_in_seconds: None,
                        warn_before_seconds: None,
                        on_expiry: None,
                    }),
                },
            )
            .await
            .unwrap();
    }
}

pub fn approve() -> ReplyInteraction {
    ReplyInteraction {
        decision: "approve".into(),
        payload: json!({}),
        expected_revision: None,
        payload_sha256: None,
        comment: None,
    }
}

pub use crate::provider::running;

/// A killed process can take a moment to be gone; waits for it (bounded).
pub async fn assert_gone(pid: i32, why: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while crate::provider::proc_state(pid).is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "pid {pid} still runs: {why}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}
