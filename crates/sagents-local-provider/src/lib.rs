//! `sagents-local-provider`: the reference sandbox provider (plugin API v3) that really runs
//! sandboxes on this host.
//!
//! A sandbox is a directory (under `ROOT/sandboxes`, or an active workspace's host folder
//! inside the workspace root) plus a long-lived leader: by default the init of the sandbox's
//! own namespaces (user, PID, mount, network, ...; see [`isolation`]), which commands run
//! through `exec` join under the spec's rlimits and `no_new_privs`, so a command sees only its
//! sandbox and terminating the sandbox ends everything it started. With `--isolation none`
//! the leader is a plain process group on the host. `snapshot_and_terminate` pauses the group, writes
//! the files as a checkpoint (a manifest over blobs shared by the host's checkpoints, see
//! [`chunks`]) and kills the group; `POST /v3/restores` assembles a checkpoint (or unpacks an
//! archive of the previous format) into a fresh sandbox. Sandboxes, receipts, checkpoints and idempotency records
//! are JSON files under `ROOT/state`, so the provider keeps its word across restarts; without
//! that folder it starts empty. `GET /v3/sandboxes` and `GET /v3/checkpoints` list what it
//! holds; `DELETE /v3/checkpoints/{id}` removes a checkpoint and the blobs no other one names.
//!
//! Fault injection for tests (`--fault-injection SPEC`) is described in [`faults`].

pub mod archive;
mod bounds;
pub mod cgroup;
pub mod chunks;
pub mod cli;
mod clock;
mod create;
mod doors;
pub mod edge;
mod engine;
mod error;
pub mod exec;
mod exec_call;
pub mod faults;
mod forget;
mod inventory;
pub mod isolation;
mod locks;
pub mod openapi;
mod operations;
pub mod paths;
pub mod process;
mod release;
mod restore;
mod routes;
pub mod seccomp;
mod snapshot;
mod state;
mod undo;
pub mod warm;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use cgroup::Defaults;
use cgroup::{Cgroups, Controller};
pub use clock::Clock;
pub use doors::DEFAULT_MAX_EXECS_PER_SANDBOX;
pub use edge::{DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_CONNECTIONS};
use engine::EngineConfig;
pub use engine::{Engine, GRANT_TTL, PROVIDER_ID};
pub use error::ApiError;
use faults::{FaultPlan, FaultSpecError};
pub use isolation::{IsolationMode, UidRange};
use isolation::{Sandboxer, Unavailable};
pub use operations::RETRY_AFTER;
use sagents_plugin_api::grant::{GrantVerifier, KeyError};
use state::Layout;
pub use warm::{WarmStats, DEFAULT_WARM_CACHE_MB};

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub root: PathBuf,
    /// Default: `ROOT/workspaces`.
    pub workspace_root: Option<PathBuf>,
    /// Bearer token every caller but exec's must present. Without one the provider refuses
    /// to start unless `insecure_no_auth` is set.
    pub token: Option<String>,
    /// Serve without a token: every route but exec unauthenticated, and with a shared grant
    /// secret attach hands out grants to anyone. Loud at start.
    pub insecure_no_auth: bool,
    /// The id the service registers this provider under: named in its answers and required
    /// as the audience of every grant.
    pub provider_id: String,
    /// Whether a sandbox may ask for `network: host` (the host's network, loopback included).
    pub allow_host_network: bool,
    /// A connection that sends no complete request head for this long is closed.
    pub header_read_timeout: Duration,
    /// Connections served at once; past that, new ones wait in the listen backlog.
    pub max_connections: usize,
    /// Commands one sandbox may run at once; past that, exec answers `429 exec.too_many`.
    pub max_execs_per_sandbox: usize,
    /// Grant signing secret shared with the service (HMAC grants); generated and kept under
    /// `ROOT/state` when neither it nor `grant_public_key` is set.
    pub grant_secret: Option<String>,
    /// The service's grant public key (`ed25519-pub:...`): grants are checked with it and
    /// this provider mints none.
    pub grant_public_key: Option<String>,
    /// The time grants are checked against.
    pub clock: Clock,
    pub fault_injection: Option<String>,
    pub isolation: IsolationMode,
    /// Host uids (each also the gid) root inside a sandbox maps to when the provider runs as
    /// root: one per sandbox.
    pub sandbox_uids: UidRange,
    /// The process count, memory, CPU share and `/tmp` size of a sandbox whose spec says
    /// nothing.
    pub defaults: Defaults,
    /// How long a release or restore call waits for its operation before answering `202`
    /// (the operation runs on); well under the service's call timeout.
    pub operation_wait: Duration,
    /// Disk (MiB) the warm restore cache may hold: the files of sandboxes released with
    /// `snapshot_and_terminate`, kept so a restore of their checkpoint needs no unpack. 0: off.
    pub warm_cache_mb: u64,
    /// Archives unpacked at once; more restores wait their turn (a warm restore never does).
    pub restore_concurrency: usize,
}

/// The default of [`Config::restore_concurrency`]: one unpack per core.
pub fn default_restore_concurrency() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
}

/// The default of [`Config::operation_wait`].
pub const DEFAULT_OPERATION_WAIT: Duration = Duration::from_secs(20);

impl Config {
    /// Loopback on an ephemeral port, everything else default.
    pub fn for_root(root: impl Into<PathBuf>) -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            root: root.into(),
            workspace_root: None,
            token: None,
            insecure_no_auth: false,
            provider_id: PROVIDER_ID.into(),
            allow_host_network: false,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_execs_per_sandbox: DEFAULT_MAX_EXECS_PER_SANDBOX,
            grant_secret: None,
            grant_public_key: None,
            clock: Clock::system(),
            fault_injection: None,
            isolation: IsolationMode::Namespaces,
            sandbox_uids: isolation::DEFAULT_SANDBOX_UIDS,
            defaults: Defaults::default(),
            operation_wait: DEFAULT_OPERATION_WAIT,
            warm_cache_mb: DEFAULT_WARM_CACHE_MB,
            restore_concurrency: default_restore_concurrency(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LocalProviderError {
    #[error(transparent)]
    FaultSpec(#[from] FaultSpecError),
    #[error(transparent)]
    Isolation(#[from] Unavailable),
    #[error("the grant public key: {0}")]
    GrantKey(#[from] KeyError),
    #[error("give the provider either a grant secret or a grant public key, not both")]
    GrantKeyAndSecret,
    #[error("the provider has no token, so every route but exec would be open to anyone who can reach it: give it a token (--token-file), or --insecure-no-auth to serve unauthenticated anyway")]
    NoToken,
    #[error("the provider id `{0}` must be 1 to 128 letters, digits, `.`, `_`, `:` or `-`")]
    ProviderId(String),
    #[error("the provider's {0} is a placeholder (`change-me…`) or shorter than {MIN_SECRET_BYTES} bytes: set a real secret (e.g. `openssl rand -base64 32`)")]
    WeakSecret(&'static str),
    #[error("preparing {path}: {source}")]
    Root {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("listening on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// A running provider.
pub struct LocalProvider {
    pub addr: SocketAddr,
    engine: Arc<Engine>,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl LocalProvider {
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Stops serving; sandboxes keep running, as across a real restart. Running releases and
    /// restores are abandoned as a killed provider's would be (the next start settles them);
    /// calls a `hold` fault stopped at the door are handled first.
    pub async fn stop(mut self) {
        self.engine.abandon_operations();
        self.engine.faults().open();
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let _ = (&mut self.task).await;
    }

    /// Stops serving and kills every sandbox's processes.
    pub async fn stop_and_kill_sandboxes(self) {
        let engine = self.engine.clone();
        self.stop().await;
        engine.kill_all().await;
    }

    /// Serves until the process is told to stop (SIGINT or SIGTERM).
    pub async fn wait_for_signal(self) {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term => {}
        }
        self.stop().await;
    }
}

/// How grants are checked: with the service's public key, else with the shared secret.
fn grant_verifier(cfg: &Config, layout: &Layout) -> Result<GrantVerifier, LocalProviderError> {
    let secret = cfg.grant_secret.as_deref().filter(|s| !s.is_empty());
    match cfg
        .grant_public_key
        .as_deref()
        .filter(|s| !s.trim().is_empty())
    {
        Some(_) if secret.is_some() => Err(LocalProviderError::GrantKeyAndSecret),
        Some(key) => Ok(GrantVerifier::from_public_key_text(key)?),
        None => {
            let secret = grant_secret(cfg, layout).map_err(|source| LocalProviderError::Root {
                path: cfg.root.clone(),
                source,
            })?;
            Ok(GrantVerifier::hmac(&secret))
        }
    }
}

fn grant_secret(cfg: &Config, layout: &Layout) -> std::io::Result<Vec<u8>> {
    if let Some(s) = cfg.grant_secret.as_deref().filter(|s| !s.is_empty()) {
        return Ok(s.as_bytes().to_vec());
    }
    let path = layout.grant_secret();
    if let Ok(existing) = std::fs::read(&path) {
        if !existing.is_empty() {
            return Ok(existing);
        }
    }
    let secret = hex::encode(rand::random::<[u8; 32]>()).into_bytes();
    let tmp = path.with_extension("tmp");
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&secret)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &path)?;
    Ok(secret)
}

/// Says at start what bounds sandboxes on this host and what does not.
fn log_bounds(cgroups: &Cgroups, config: &Config, sandboxer: Option<&Sandboxer>) {
    let d = &config.defaults;
    let have: Vec<&str> = Controller::ALL
        .into_iter()
        .filter(|&c| cgroups.has(c))
        .map(Controller::name)
        .collect();
    if !have.is_empty() {
        tracing::info!(
            cgroup_version = cgroups.version(),
            controllers = %have.join(","),
            default_max_processes = d.max_processes,
            default_memory_mb = d.memory_mb,
            default_cpu_percent = d.cpu_percent,
            "each sandbox runs in its own cgroup"
        );
    }
    for c in cgroups.missing() {
        let what = match c {
            Controller::Pids => "sandboxes have no process cap (only the per-command RLIMIT_NPROC a spec sets), and specs setting max_processes are refused",
            Controller::Memory => "sandboxes have no memory limit as a whole, and specs setting memory_mb are refused",
            Controller::Cpu => "sandboxes have no CPU quota, and specs setting cpu_percent are refused",
            Controller::Freezer => "a snapshot stops the sandbox's processes by signal instead of freezing its cgroup",
        };
        tracing::warn!(
            controller = c.name(),
            "no writable `{}` cgroup controller: {what}",
            c.name()
        );
    }
    match sandboxer.and_then(Sandboxer::uids) {
        Some(range) => tracing::info!(sandbox_uids = %range, default_tmp_mb = d.tmp_mb, "each sandbox runs as its own host uid"),
        None => tracing::warn!("the provider does not run as root: every sandbox runs as the provider's own uid, so per-user counts (RLIMIT_NPROC) are shared between sandboxes"),
    }
    if sandboxer.is_none() {
        tracing::warn!("without isolation /tmp is the host's, unsized");
    }
    tracing::info!("a spec's disk_mb is enforced per file written (RLIMIT_FSIZE) and checked before each exec; the workspace as a whole has no filesystem quota");
}

/// The shortest token or grant secret the provider takes.
pub const MIN_SECRET_BYTES: usize = 32;

/// A secret someone could guess: an example's placeholder, or too short.
fn weak(secret: &str) -> bool {
    let lower = secret.to_ascii_lowercase();
    secret.len() < MIN_SECRET_BYTES
        || ["change-me", "changeme", "change_me"]
            .iter()
            .any(|p| lower.starts_with(p))
}

/// Loads the state under `config.root`, binds `config.listen` (port 0 picks one) and serves
/// in the background.
pub async fn serve(config: Config) -> Result<LocalProvider, LocalProviderError> {
    let token_digest: Option<[u8; 32]> = config
        .token
        .as_deref()
        .filter(|t| !t.is_empty())
        .map(|t| Sha256::digest(t.as_bytes()).into());
    if token_digest.is_none() && !config.insecure_no_auth {
        return Err(LocalProviderError::NoToken);
    }
    let secrets = [
        ("token", &config.token),
        ("grant secret", &config.grant_secret),
    ];
    for (what, secret) in secrets {
        if secret.as_deref().is_some_and(|s| !s.is_empty() && weak(s)) {
            return Err(LocalProviderError::WeakSecret(what));
        }
    }
    if engine::check_name("provider_id", &config.provider_id).is_err() {
        return Err(LocalProviderError::ProviderId(config.provider_id.clone()));
    }
    let faults = FaultPlan::parse(config.fault_injection.as_deref().unwrap_or(""))?;
    let root_err = |path: &PathBuf| {
        let path = path.clone();
        move |source| LocalProviderError::Root { path, source }
    };
    let layout = Layout::new(&config.root).map_err(root_err(&config.root))?;
    let workspace_root = config
        .workspace_root
        .clone()
        .unwrap_or_else(|| config.root.join("workspaces"));
    if config.workspace_root.is_none() {
        std::fs::create_dir_all(&workspace_root).map_err(root_err(&workspace_root))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&workspace_root, std::fs::Permissions::from_mode(0o711))
            .map_err(root_err(&workspace_root))?;
    } else {
        std::fs::create_dir_all(&workspace_root).map_err(root_err(&workspace_root))?;
    }
    let grants = grant_verifier(&config, &layout)?;
    let tmp_bytes = Some(config.defaults.tmp_mb.saturating_mul(1024 * 1024));
    let sandboxer = match config.isolation {
        IsolationMode::Namespaces => {
            Some(Sandboxer::detect(config.sandbox_uids, tmp_bytes, &layout.sandbox_dirs()).await?)
        }
        IsolationMode::None => {
            tracing::warn!("sandbox isolation is off (--isolation none): commands run on the host as the provider's user and can read whatever it can");
            None
        }
    };
    let cgroups = Cgroups::detect(&config.root);
    log_bounds(&cgroups, &config, sandboxer.as_ref());
    let engine = Engine::load(
        EngineConfig {
            workspace_root,
            grants,
            clock: config.clock.clone(),
            sandboxer,
            provider_id: config.provider_id.clone(),
            allow_host_network: config.allow_host_network,
            max_execs_per_sandbox: config.max_execs_per_sandbox,
            unauthenticated: token_digest.is_none(),
            cgroups,
            defaults: config.defaults,
            operation_wait: config.operation_wait,
            warm_cache_bytes: config.warm_cache_mb.saturating_mul(1024 * 1024),
            restore_concurrency: config.restore_concurrency.max(1),
        },
        layout,
        faults,
    )
    .map_err(root_err(&config.root))?;
    let engine = Arc::new(engine);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| LocalProviderError::Listen {
            addr: config.listen,
            source,
        })?;
    let addr = listener
        .local_addr()
        .map_err(|source| LocalProviderError::Listen {
            addr: config.listen,
            source,
        })?;
    if token_digest.is_none() {
        let grants = match engine.cfg.grants.signer() {
            Some(_) => ", and attach hands them grants",
            None => "",
        };
        tracing::warn!(%addr, "--insecure-no-auth: no token is required; anyone who can reach this address may provision, inspect, release and restore sandboxes{grants}");
    }
    if config.allow_host_network {
        tracing::warn!("--allow-host-network: a sandbox that asks for `network: host` shares the host's network, loopback services included");
    }
    let app = routes::router(routes::AppState {
        engine: engine.clone(),
        token_digest,
    })
    .layer(tower_http::trace::TraceLayer::new_for_http());
    let limits = edge::EdgeLimits {
        header_read_timeout: config.header_read_timeout,
        max_connections: config.max_connections,
    };
    let (tx, rx) = oneshot::channel();
    let task = tokio::spawn(edge::serve(listener, app, limits, async {
        let _ = rx.await;
    }));
    Ok(LocalProvider {
        addr,
        engine,
        shutdown: Some(tx),
        task,
    })
}
