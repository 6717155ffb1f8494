//! N lifecycle workers per replica. Each claims due runs as long as there is room for them
//! (`workers × batch` in flight in all), lets the coordinator work on each in its own task
//! under its own kept lease (their writes meet in the store's group commit), and when idle
//! waits for a work notification, the next due time or a fallback poll, whichever comes
//! first.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinHandle, JoinSet};

use super::keeper::{keep_lease, LeaseEnd};
use crate::config::DEFAULT_WORKER_BATCH;
use crate::domain::claim::Lease;
use crate::domain::resource::LifecycleWork;
use crate::lifecycle::coordinator::Coordinator;
use crate::store::Store;

/// How many runs one `run_once` call claims at a time.
pub const RUN_ONCE_BATCH: u32 = 16;
const CLAIM_ERROR_BACKOFF: Duration = Duration::from_secs(1);
/// Something due now but not claimable is leased by someone else, who wakes us when done.
const MIN_IDLE_WAIT: Duration = Duration::from_millis(100);
/// How often a provider that did not answer its last call is asked whether it answers again.
pub const PROVIDER_PROBE_INTERVAL: Duration = Duration::from_millis(500);

#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Names this replica; worker `n` holds leases as `<replica_id>:w<n>` (holder names allow no `/`).
    pub replica_id: String,
    pub workers: usize,
    /// Runs a worker claims and works on at once.
    pub batch: u32,
    pub lease_ttl: Duration,
    /// The longest an idle worker sleeps without a notification.
    pub fallback_poll: Duration,
    /// How long in-flight work may run on after shutdown before it is dropped and its lease
    /// handed back.
    pub shutdown_grace: Duration,
}

impl PoolConfig {
    pub fn new(replica_id: impl Into<String>, workers: usize, lease_ttl: Duration) -> Self {
        Self {
            replica_id: replica_id.into(),
            workers,
            batch: DEFAULT_WORKER_BATCH,
            lease_ttl,
            fallback_poll: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

struct Shared {
    coordinator: Arc<Coordinator>,
    store: Store,
    config: PoolConfig,
    /// Held by the one idle worker that claims and waits for work.
    turn: tokio::sync::Mutex<()>,
    /// One permit a run in flight, `workers × batch` in all: a worker claims again as soon as
    /// there is room, not when its whole batch is done.
    slots: Arc<Semaphore>,
}

pub struct WorkerPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl WorkerPool {
    /// Spawns `config.workers` workers that run until `shutdown` turns true.
    pub fn start(
        coordinator: Arc<Coordinator>,
        store: Store,
        config: PoolConfig,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        let shared = Arc::new(Shared {
            coordinator,
            store,
            slots: Arc::new(Semaphore::new(in_flight(&config))),
            config,
            turn: tokio::sync::Mutex::new(()),
        });
        let mut workers: Vec<JoinHandle<()>> = (1..=shared.config.workers)
            .map(|n| tokio::spawn(worker(shared.clone(), n, shutdown.clone())))
            .collect();
        if shared.config.workers > 0 {
            workers.push(tokio::spawn(probe_providers(shared.clone(), shutdown)));
        }
        Self { shared, workers }
    }

    /// Claims and processes whatever is due now, in batches, until nothing is; returns how
    /// many runs were processed. For tests and tools that drive the lifecycle explicitly.
    pub async fn run_once(&self) -> usize {
        let holder = format!("{}:once", self.shared.config.replica_id);
        let ttl = self.shared.ttl();
        let claimed = match self
            .shared
            .coordinator
            .claim(&holder, RUN_ONCE_BATCH, ttl)
            .await
        {
            Ok(items) => items,
            Err(e) => {
                tracing::warn!(error = %e, "claiming lifecycle work failed");
                return 0;
            }
        };
        let n = claimed.len();
        let (_keep, never) = watch::channel(false);
        futures::future::join_all(
            claimed
                .into_iter()
                .map(|work| self.shared.run_item(work, never.clone())),
        )
        .await;
        n
    }

    /// Waits for every worker to stop (after shutdown, once in-flight work is settled).
    pub async fn join(self) {
        for w in self.workers {
            if let Err(e) = w.await {
                tracing::error!(error = %e, "a lifecycle worker ended abnormally");
            }
        }
    }
}

impl Shared {
    fn ttl(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.config.lease_ttl).unwrap_or(chrono::Duration::seconds(30))
    }

    /// Processes one leased run while its lease is kept; drops the work if the lease cannot be
    /// kept, or if shutdown outlasts the grace period (then the lease is handed back). False
    /// when the work failed.
    async fn run_item(&self, work: LifecycleWork, shutdown: watch::Receiver<bool>) -> bool {
        let run_id = work.run.id.clone();
        let lease = work.lease.clone();
        let grace = self.config.shutdown_grace;
        let stopping = async move {
            stopped(shutdown).await;
            tokio::time::sleep(grace).await;
        };
        tokio::select! {
            r = self.coordinator.process(work) => match r {
                Ok(done) => tracing::debug!(run_id = %run_id, outcome = ?done, "lifecycle work done"),
                Err(e) => {
                    tracing::warn!(run_id = %run_id, error = %e, "lifecycle work failed");
                    return false;
                }
            },
            end = keep_lease(&self.store, &lease, self.config.lease_ttl) => {
                tracing::warn!(run_id = %run_id, why = ?end, "lease not kept: lifecycle work dropped");
                if end == LeaseEnd::Expiring {
                    self.hand_back(&run_id, &lease).await;
                }
            }
            _ = stopping => {
                tracing::warn!(run_id = %run_id, "shutting down: lifecycle work dropped, lease handed back");
                self.hand_back(&run_id, &lease).await;
            }
        }
        true
    }

    async fn hand_back(&self, run_id: &crate::domain::RunId, lease: &Lease) {
        if let Err(e) = self.store.release_lease(run_id, lease).await {
            tracing::warn!(run_id = %run_id, error = %e, "could not hand the lease back");
        }
    }

    /// How long an idle worker may sleep: until the next due record, at most the fallback.
    async fn idle_wait(&self) -> Duration {
        let fallback = self.config.fallback_poll;
        match self.store.next_lifecycle_due().await {
            Ok(Some(at)) => (at - self.store.now())
                .to_std()
                .unwrap_or(Duration::ZERO)
                .min(fallback),
            Ok(None) => fallback,
            Err(e) => {
                tracing::warn!(error = %e, "reading the next due time failed");
                fallback
            }
        }
    }
}

/// Resolves once shutdown is requested (or its sender is gone).
async fn stopped(mut shutdown: watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

/// Asks the providers that stopped answering whether they answer again, so their resuming
/// runs go on at once instead of at the end of their backoff.
async fn probe_providers(shared: Arc<Shared>, shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(PROVIDER_PROBE_INTERVAL) => {}
            _ = stopped(shutdown.clone()) => break,
        }
        shared.coordinator.probe_providers().await;
    }
}

/// How many runs a replica's workers may work on at once.
fn in_flight(config: &PoolConfig) -> usize {
    let batch = usize::try_from(config.batch).unwrap_or(1).max(1);
    config.workers.max(1).saturating_mul(batch)
}

/// One worker at a time holds the claim turn: it claims as many runs as there is room for,
/// and when nothing is due it waits for a notification, the next due time or the fallback
/// poll. The others wait for the turn, so a notification costs one claim (plus one per run
/// found), not one per worker. Each claimed run is worked on in its own task, holding a slot
/// until it is done.
async fn worker(shared: Arc<Shared>, n: usize, shutdown: watch::Receiver<bool>) {
    let holder = format!("{}:w{n}", shared.config.replica_id);
    let mut wake = shared.store.hub().subscribe_lifecycle_work();
    let mut running: JoinSet<bool> = JoinSet::new();
    loop {
        let mut failed = false;
        while let Some(done) = running.try_join_next() {
            failed |= !done.unwrap_or(false);
        }
        if failed {
            // Those runs are still due: do not spin on a failure that may persist.
            tokio::select! {
                _ = tokio::time::sleep(CLAIM_ERROR_BACKOFF) => {}
                _ = stopped(shutdown.clone()) => break,
            }
        }
        let turn = tokio::select! {
            turn = shared.turn.lock() => turn,
            _ = stopped(shutdown.clone()) => break,
        };
        let first = tokio::select! {
            permit = shared.slots.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            _ = stopped(shutdown.clone()) => break,
        };
        let room = u32::try_from(1 + shared.slots.available_permits())
            .unwrap_or(u32::MAX)
            .min(shared.config.batch.max(1));
        let Some(items) = shared.find_work(&holder, room, &mut wake, &shutdown).await else {
            break;
        };
        let mut first = Some(first);
        for work in items {
            // Only the turn's holder takes slots, so the room it counted is still there.
            let slot = first
                .take()
                .or_else(|| shared.slots.clone().try_acquire_owned().ok());
            running.spawn(run_holding(shared.clone(), work, slot, shutdown.clone()));
        }
        drop(turn);
    }
    while running.join_next().await.is_some() {}
    tracing::debug!(holder = %holder, "lifecycle worker stopped");
}

async fn run_holding(
    shared: Arc<Shared>,
    work: LifecycleWork,
    _slot: Option<OwnedSemaphorePermit>,
    shutdown: watch::Receiver<bool>,
) -> bool {
    shared.run_item(work, shutdown).await
}

impl Shared {
    /// Claims until something is leased to `holder`; `None` once shutdown is requested.
    async fn find_work(
        &self,
        holder: &str,
        max: u32,
        wake: &mut watch::Receiver<u64>,
        shutdown: &watch::Receiver<bool>,
    ) -> Option<Vec<LifecycleWork>> {
        let ttl = self.ttl();
        let mut wake_open = true;
        loop {
            if *shutdown.borrow() {
                return None;
            }
            wake.borrow_and_update();
            let wait = match self.coordinator.claim(holder, max, ttl).await {
                Ok(items) if !items.is_empty() => return Some(items),
                Ok(_) => self.idle_wait().await,
                Err(e) => {
                    tracing::warn!(holder = %holder, error = %e, "claiming lifecycle work failed");
                    CLAIM_ERROR_BACKOFF
                }
            };
            tokio::select! {
                changed = wake.changed(), if wake_open => wake_open = changed.is_ok(),
                _ = tokio::time::sleep(wait.max(MIN_IDLE_WAIT)) => {}
                _ = stopped(shutdown.clone()) => return None,
            }
        }
    }
}
