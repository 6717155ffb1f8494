//! Wiring: the shared state, the background tasks and the server's life from bind to
//! graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::clock::Clock;
use crate::config::Config;
use crate::config::{SealError, SettingsError, WeakSecret};
use crate::domain::validate;
use crate::http::api::state::{AppState, Shared};
use crate::lifecycle::attention::AttentionPolicy;
use crate::lifecycle::clients::ProviderClients;
use crate::lifecycle::coordinator::Coordinator;
use crate::lifecycle::reconciler::Reconciler;
use crate::metrics::Metrics;
use crate::notify::{run_pg_listener, ChangeHub};
use crate::scheduler::{PoolConfig, WorkerPool};
use crate::service::grants::GrantKeyError;
use crate::service::shutdown::{self, ShutdownTrigger};
use crate::service::stream_limits::StreamRegistry;
use crate::service::token_cache::TokenCache;
use crate::store::{Backend, Store, StoreError};
use crate::telemetry::request_line::RequestLog;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the secret key setting: {0}")]
    SecretKey(#[from] SealError),
    #[error(transparent)]
    GrantKey(#[from] GrantKeyError),
    #[error(transparent)]
    WeakSecret(#[from] WeakSecret),
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

pub const INTERACTION_SWEEP_INTERVAL: Duration = Duration::from_secs(1);
pub const IDEMPOTENCY_PURGE_INTERVAL: Duration = Duration::from_secs(3600);
pub const IDEMPOTENCY_MAX_AGE_HOURS: i64 = 24;
/// How long in-flight lifecycle work may run on after shutdown before its lease is handed
/// back (the work is level-triggered: another replica or the next start picks it up).
pub const LIFECYCLE_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// The reconciler's lease lasts three intervals (at least this), so a live holder keeps it
/// and another replica takes over soon after the holder dies.
pub const RECONCILER_LEASE_MIN: Duration = Duration::from_secs(6);

pub struct Application {
    listener: TcpListener,
    local_addr: SocketAddr,
    state: AppState,
    trigger: ShutdownTrigger,
    request_log: Option<RequestLog>,
}

impl Application {
    /// Connects and migrates the database, settles the grant signing key and binds the listener
    /// (port 0 picks a free port). Serving starts with [`Application::run_until_stopped`].
    pub async fn build(config: Config, clock: Arc<dyn Clock>) -> Result<Self, AppError> {
        config.check_secrets()?;
        config.check_settings()?;
        let hub = ChangeHub::new();
        hub.cache.set_body_budget(config.snapshot_cache_bytes());
        let metrics = Arc::new(Metrics::default());
        let sealer = config.sealer()?;
        match sealer.current_key_id() {
            Some(id) => tracing::info!(key_id = id, "provider tokens are sealed at rest"),
            None => tracing::warn!(
                "no SAGENTS_SECRET_KEY: provider tokens are stored unsealed in the database"
            ),
        }
        let store = Store::connect(
            &config.database_url,
            clock.clone(),
            hub.clone(),
            metrics.clone(),
        )
        .await?;
        store.use_sealer(sealer);
        store.migrate().await?;
        let grants = crate::service::grants::signer(&config, &store).await?;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| AppError::Bind {
                addr: config.listen,
                source,
            })?;
        let local_addr = listener.local_addr().map_err(|source| AppError::Bind {
            addr: config.listen,
            source,
        })?;
        let (trigger, shutdown) = shutdown::channel();
        let max_streams = usize::try_from(config.sse_max_streams_per_token).unwrap_or(usize::MAX);
        let state = AppState::new(Shared {
            providers: Arc::new(ProviderClients::from_config(store.clone(), &config)),
            store,
            config: Arc::new(config),
            hub,
            metrics,
            clock,
            shutdown,
            tokens: Arc::new(TokenCache::default()),
            streams: StreamRegistry::new(max_streams),
            grants: Arc::new(grants),
        });
        Ok(Self {
            listener,
            local_addr,
            state,
            trigger,
            request_log: None,
        })
    }

    /// Request lines go straight into this JSON log instead of through `tracing`.
    pub fn with_request_log(mut self, request_log: Option<RequestLog>) -> Self {
        self.request_log = request_log;
        self
    }

    pub fn port(&self) -> u16 {
        self.local_addr.port()
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Stops the server as SIGTERM would.
    pub fn shutdown_trigger(&self) -> ShutdownTrigger {
        self.trigger.clone()
    }

    /// Serves until SIGTERM, SIGINT or the trigger: then stops accepting, ends open
    /// long-polls, lets in-flight requests finish, stops the background tasks and closes
    /// the database pools.
    pub async fn run_until_stopped(self) -> Result<(), AppError> {
        let Application {
            listener,
            local_addr,
            state,
            trigger,
            request_log,
        } = self;
        let tasks = spawn_background_tasks(&state);
        let pool = start_lifecycle_pool(&state);
        let app = crate::http::app(state.clone(), request_log);
        let signal = {
            let trigger = trigger.clone();
            let shutdown = state.shutdown.clone();
            async move {
                tokio::select! {
                    _ = os_signal() => tracing::info!("shutdown signal received"),
                    _ = shutdown.wait() => {}
                }
                trigger.trigger();
            }
        };
        tracing::info!(%local_addr, "listening");
        let limits = crate::http::server::serve::Limits {
            idle_timeout: Duration::from_secs(state.config.http_idle_timeout_seconds),
            max_connections: state.config.max_connections as usize,
        };
        crate::http::server::serve::serve(listener, app, limits, state.metrics.clone(), signal)
            .await;
        trigger.trigger();
        pool.join().await;
        for task in tasks {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "background task ended abnormally");
            }
        }
        state.store.close().await;
        tracing::info!("stopped");
        Ok(())
    }
}

async fn os_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}

/// Names this process among the replicas sharing the database (lease holders, logs).
fn replica_id() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| validate::name("hostname", h).is_ok() && h.len() <= 64)
        .unwrap_or_else(|| "replica".into());
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}", &id[..8])
}

/// `config.workers` lifecycle workers, stopped by the shared shutdown.
fn start_lifecycle_pool(state: &AppState) -> WorkerPool {
    let replica = replica_id();
    let coordinator = Coordinator::with_clients(
        state.store.clone(),
        format!("sagents:{replica}"),
        state.providers.clone(),
    )
    .with_attention(AttentionPolicy {
        attempt_budget: state.config.release_attempt_budget,
        retry_every: Duration::from_secs(state.config.attention_retry_seconds),
    });
    let mut config = PoolConfig::new(
        replica,
        usize::try_from(state.config.workers).unwrap_or(1),
        Duration::from_secs(state.config.lifecycle_lease_ttl_seconds),
    );
    config.shutdown_grace = LIFECYCLE_SHUTDOWN_GRACE;
    config.batch = state.config.worker_batch;
    WorkerPool::start(
        Arc::new(coordinator),
        state.store.clone(),
        config,
        state.shutdown.receiver(),
    )
}

fn spawn_background_tasks(state: &AppState) -> Vec<JoinHandle<()>> {
    let mut tasks = vec![
        every(INTERACTION_SWEEP_INTERVAL, state, |store| async move {
            match store.warn_expiring().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(warned = n, "announced interaction deadlines"),
                Err(e) => tracing::warn!(error = %e, "interaction warning sweep failed"),
            }
            match store.expire_interactions().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(expired = n, "expired pending interactions"),
                Err(e) => tracing::warn!(error = %e, "interaction expiry sweep failed"),
            }
        }),
        every(IDEMPOTENCY_PURGE_INTERVAL, state, |store| async move {
            let max_age = chrono::Duration::hours(IDEMPOTENCY_MAX_AGE_HOURS);
            match store.purge_idempotency(max_age).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(purged = n, "purged old idempotency entries"),
                Err(e) => tracing::warn!(error = %e, "idempotency purge failed"),
            }
        }),
    ];
    if state.config.reconcile_interval_seconds > 0 {
        tasks.push(start_reconciler(state));
    }
    if state.store.backend() == Backend::Postgres {
        tasks.push(tokio::spawn(run_pg_listener(
            state.config.database_url.expose(),
            state.hub.clone(),
            state.shutdown.receiver(),
        )));
    }
    tasks
}

/// Every `reconcile_interval_seconds`, a pass by whichever replica holds the reconciler's
/// lease.
fn start_reconciler(state: &AppState) -> JoinHandle<()> {
    let interval = Duration::from_secs(state.config.reconcile_interval_seconds);
    let mut reconciler =
        Reconciler::new(state.store.clone(), state.providers.clone(), replica_id());
    let seconds = |s: u64| chrono::Duration::seconds(i64::try_from(s).unwrap_or(i64::MAX));
    reconciler.checkpoint_grace = seconds(state.config.checkpoint_grace_seconds);
    reconciler.min_age = seconds(state.config.reconcile_min_age_seconds);
    let reconciler = Arc::new(reconciler);
    let ttl = chrono::Duration::from_std((interval * 3).max(RECONCILER_LEASE_MIN))
        .unwrap_or(chrono::Duration::hours(1));
    every(interval, state, move |_| {
        let reconciler = reconciler.clone();
        async move {
            match reconciler.tick(ttl).await {
                Ok(Some(r))
                    if r.orphans_terminated + r.records_reopened + r.checkpoints_deleted > 0 =>
                {
                    tracing::info!(
                        orphans_terminated = r.orphans_terminated,
                        records_reopened = r.records_reopened,
                        checkpoints_deleted = r.checkpoints_deleted,
                        "reconciled provider inventories"
                    );
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "reconciler pass failed"),
            }
        }
    })
}

/// Runs `job` now and then every `period` until shutdown.
fn every<F, Fut>(period: Duration, state: &AppState, job: F) -> JoinHandle<()>
where
    F: Fn(Store) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let store = state.store.clone();
    let shutdown = state.shutdown.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.wait() => return,
            }
            tokio::select! {
                _ = job(store.clone()) => {}
                _ = shutdown.wait() => return,
            }
        }
    })
}
