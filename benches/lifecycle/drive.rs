//! Drives runs through the real store and worker pool: created with a sandbox spec,
//! provisioned by the pool, claimed by a runtime, suspended; then timed from suspend to
//! release.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use sagents::config::{DEFAULT_WORKERS, DEFAULT_WORKER_BATCH};
use sagents::domain::commands::{
    CreateRun, CreateSession, NewCheckpoint, NewInteraction, ReplyInteraction, SuspendRun,
};
use sagents::domain::interaction::{InteractionType, SuspensionReason};
use sagents::domain::resource::ResourceState;
use sagents::domain::sandbox::{ResolvedSandboxSpec, WorkspaceMode};
use sagents::domain::RunId;
use sagents::lifecycle::coordinator::Coordinator;
use sagents::scheduler::{PoolConfig, WorkerPool};
use sagents::store::Store;
use serde_json::json;
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::db::Db;
use crate::noop::Noop;
use crate::report::knob;
use crate::stats::Latency;

pub const TENANT: &str = "bench";
/// Workers and claim batch of the pool: the service's defaults unless `LBENCH_WORKERS` or
/// `LBENCH_BATCH` say otherwise.
pub fn pool_shape() -> (usize, u32) {
    let workers = knob("LBENCH_WORKERS", DEFAULT_WORKERS as usize);
    let batch = knob("LBENCH_BATCH", DEFAULT_WORKER_BATCH);
    // A pool with no worker, or claims of no run, would release nothing and only time out.
    assert!(workers > 0, "LBENCH_WORKERS must be at least 1");
    assert!(batch > 0, "LBENCH_BATCH must be at least 1");
    (workers, batch)
}
/// How many setup calls (create, suspend) run at once.
const SETUP_CONCURRENCY: usize = 8;
/// Safety net for anything the bench waits on; never part of a measurement.
pub const PATIENCE: Duration = Duration::from_secs(600);

pub fn resolved_spec_hash() -> String {
    format!("sha256:{}", "3".repeat(64))
}

pub fn spec(provider_id: &str) -> ResolvedSandboxSpec {
    ResolvedSandboxSpec::example(provider_id, WorkspaceMode::Isolated)
}

/// The real worker pool, running until stopped.
pub struct Running {
    stop: watch::Sender<bool>,
    pool: WorkerPool,
}

impl Running {
    pub fn start(coordinator: &Arc<Coordinator>, store: &Store) -> Self {
        let (stop, shutdown) = watch::channel(false);
        let (workers, batch) = pool_shape();
        let mut config = PoolConfig::new("bench", workers, Duration::from_secs(30));
        config.batch = batch;
        let pool = WorkerPool::start(coordinator.clone(), store.clone(), config, shutdown);
        Running { stop, pool }
    }

    pub async fn stop(self) {
        let _ = self.stop.send(true);
        self.pool.join().await;
    }
}

/// A run claimed by the runtime, ready to suspend.
pub struct Claimed {
    pub run_id: RunId,
    pub token: i64,
}

/// One session per run, as frontends create them.
async fn create_runs(store: &Store, provider_id: &str, n: usize) {
    let made = stream::iter(0..n)
        .map(|i| async move {
            let session = store
                .create_session(
                    TENANT,
                    &CreateSession {
                        title: Some(format!("bench {i}")),
                        metadata: json!({}),
                        parent_session_id: None,
                    },
                )
                .await
                .expect("create a session");
            store
                .create_run(
                    TENANT,
                    &session.id,
                    &CreateRun {
                        parent_run_id: None,
                        sandbox_spec: Some(spec(provider_id)),
                        resolved_spec_hash: resolved_spec_hash(),
                        input: json!({ "prompt": "bench" }),
                    },
                )
                .await
                .expect("create a run");
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .count()
        .await;
    assert_eq!(made, n);
}

/// Every run the runtime can claim now, up to `n` (all must be claimable).
async fn claim_all(store: &Store, n: usize) -> Vec<Claimed> {
    let ttl = chrono::Duration::hours(3);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let want = (n - out.len()).min(100) as u32;
        let claims = store
            .claim_runs(Some(TENANT), "runtime-1", want, ttl)
            .await
            .expect("claim runs");
        assert!(
            !claims.is_empty(),
            "only {} of {n} runs were claimable",
            out.len()
        );
        out.extend(claims.into_iter().map(|c| Claimed {
            run_id: c.run.id,
            token: c.lease.fencing_token,
        }));
    }
    out
}

/// Creates `n` runs on `provider_id`, lets the pool provision them, and claims them all;
/// returns the claims and how long provisioning took.
pub async fn prepare(
    db: &Db,
    coordinator: &Arc<Coordinator>,
    provider_id: &str,
    n: usize,
) -> (Vec<Claimed>, Duration) {
    let active = db.count_state("active").await;
    create_runs(&db.store, provider_id, n).await;
    let start = Instant::now();
    let pool = Running::start(coordinator, &db.store);
    let done = db
        .until_count(
            "active",
            active + n as i64,
            Duration::from_millis(5),
            PATIENCE,
        )
        .await;
    pool.stop().await;
    (claim_all(&db.store, n).await, done - start)
}

pub async fn suspend(store: &Store, c: &Claimed, sequence: i64) {
    store
        .suspend_run(
            Some(TENANT),
            &c.run_id,
            &SuspendRun {
                fencing_token: c.token,
                reason: SuspensionReason::ApprovalRequired,
                checkpoint: NewCheckpoint {
                    codec_version: "v1".into(),
                    sequence,
                    state: json!({ "step": sequence }),
                    resolved_spec_hash: resolved_spec_hash(),
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
        .expect("suspend a run");
}

/// What the store's group commit did during a throughput repetition.
#[derive(Debug, Clone, Copy, Default)]
pub struct Groups {
    /// Transactions of grouped writes (record saves and lease hand-backs).
    pub commits: u64,
    /// Writes they carried.
    pub writes: u64,
    /// Runs leased by lifecycle claims.
    pub claimed: u64,
    /// Claim transactions that leased them.
    pub claims: u64,
    /// CPU time of the whole process (user + system), in microseconds.
    pub cpu_us: u64,
    /// Context switches of the whole process (voluntary and not).
    pub switches: u64,
}

/// The process's CPU time in microseconds and its context switches so far.
fn usage() -> (u64, u64) {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (
        us(u.ru_utime) + us(u.ru_stime),
        (u.ru_nvcsw + u.ru_nivcsw) as u64,
    )
}

impl Groups {
    fn now(store: &Store) -> Self {
        let m = store.metrics();
        let (cpu_us, switches) = usage();
        Groups {
            commits: m.group_commits.load(Ordering::Relaxed),
            writes: m.grouped_writes.load(Ordering::Relaxed),
            claimed: m.lease_claims.load(Ordering::Relaxed),
            claims: m.lifecycle_claims.load(Ordering::Relaxed),
            cpu_us,
            switches,
        }
    }

    fn since(self, before: Groups) -> Self {
        Groups {
            commits: self.commits - before.commits,
            writes: self.writes - before.writes,
            claimed: self.claimed - before.claimed,
            claims: self.claims - before.claims,
            cpu_us: self.cpu_us - before.cpu_us,
            switches: self.switches - before.switches,
        }
    }
}

/// Suspends every run in `batch` while no worker runs, so all their records are due; then
/// starts the pool and times it until all of them are `released`. Returns releases/s and
/// what the group commit did meanwhile.
pub async fn throughput(
    db: &Db,
    coordinator: &Arc<Coordinator>,
    batch: &[Claimed],
    noop: Option<&Noop>,
) -> (f64, Groups) {
    let released = db.count_state("released").await;
    let arrivals = noop.map(|n| n.arrivals());
    stream::iter(batch)
        .map(|c| suspend(&db.store, c, 1))
        .buffer_unordered(SETUP_CONCURRENCY)
        .count()
        .await;
    let groups = Groups::now(&db.store);
    let start = Instant::now();
    let pool = Running::start(coordinator, &db.store);
    // With the no-op provider, wait on its notifications and poll only for the last commits.
    let every = match (noop, arrivals) {
        (Some(noop), Some(before)) => {
            let all = noop.wait_arrivals(before + batch.len(), PATIENCE).await;
            assert!(all, "release requests did not all arrive");
            Duration::from_millis(1)
        }
        _ => Duration::from_millis(2),
    };
    let done = db
        .until_count("released", released + batch.len() as i64, every, PATIENCE)
        .await;
    let groups = Groups::now(&db.store).since(groups);
    pool.stop().await;
    (batch.len() as f64 / (done - start).as_secs_f64(), groups)
}

/// A signed interval in milliseconds: `later − earlier`.
fn ms_between(earlier: Instant, later: Instant) -> f64 {
    match later.checked_duration_since(earlier) {
        Some(d) => d.as_secs_f64() * 1e3,
        None => -(earlier - later).as_secs_f64() * 1e3,
    }
}

/// Paces one suspend every `1 / rate` seconds (never in bursts when behind).
fn pacer(rate: f64) -> tokio::time::Interval {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tick
}

/// With the pool running and idle, suspends `runs` one at a time at `rate` per second;
/// per run, the time from `suspend_run` returning to the provider receiving the release.
pub async fn noop_latency(
    db: &Db,
    coordinator: &Arc<Coordinator>,
    noop: &Noop,
    runs: &[Claimed],
    rate: f64,
) -> Latency {
    let released = db.count_state("released").await;
    let arrivals = noop.arrivals();
    let pool = Running::start(coordinator, &db.store);
    let mut tick = pacer(rate);
    let mut commits = Vec::with_capacity(runs.len());
    let start = Instant::now();
    for c in runs {
        tick.tick().await;
        suspend(&db.store, c, 1).await;
        commits.push((c.run_id.as_str(), Instant::now()));
    }
    let spent = start.elapsed();
    let all = noop.wait_arrivals(arrivals + runs.len(), PATIENCE).await;
    assert!(all, "release requests did not all arrive");
    db.until_count(
        "released",
        released + runs.len() as i64,
        Duration::from_millis(5),
        PATIENCE,
    )
    .await;
    pool.stop().await;
    let samples = commits
        .iter()
        .map(|(run, at)| {
            let arrived = noop.arrival(run).expect("an arrival for every run");
            ms_between(*at, arrived)
        })
        .collect();
    Latency::of(samples, runs.len() as f64 / spent.as_secs_f64())
}

/// With the pool running and idle, suspends `runs` one at a time at most `rate` per second,
/// each after the previous one is released; per run, the time from `suspend_run` returning to
/// its record being seen `released` (polled every millisecond).
pub async fn released_latency(
    db: &Db,
    coordinator: &Arc<Coordinator>,
    runs: &[Claimed],
    rate: f64,
) -> Latency {
    let pool = Running::start(coordinator, &db.store);
    let mut tick = pacer(rate);
    let mut samples = Vec::with_capacity(runs.len());
    let start = Instant::now();
    for c in runs {
        tick.tick().await;
        suspend(&db.store, c, 1).await;
        let at = Instant::now();
        loop {
            let record = db.store.get_resource(&c.run_id).await.expect("a record");
            if record.state == ResourceState::Released {
                samples.push(ms_between(at, Instant::now()));
                break;
            }
            assert!(at.elapsed() < PATIENCE, "{} never released", c.run_id);
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let spent = start.elapsed();
    pool.stop().await;
    Latency::of(samples, runs.len() as f64 / spent.as_secs_f64())
}

/// With the pool running and every snapshot failing recoverably (the sandbox runs again),
/// suspends each run, waits for its first failed release, then approves it; per run, the
/// time from the reply returning to the runtime's claim offering the resume (polled every
/// millisecond).
pub async fn approve_to_resume(
    db: &Db,
    coordinator: &Arc<Coordinator>,
    runs: &[Claimed],
) -> Latency {
    let pool = Running::start(coordinator, &db.store);
    let ttl = chrono::Duration::hours(3);
    let mut samples = Vec::with_capacity(runs.len());
    let start = Instant::now();
    for c in runs {
        suspend(&db.store, c, 1).await;
        let failing = Instant::now();
        while db
            .store
            .get_resource(&c.run_id)
            .await
            .expect("a record")
            .state
            != ResourceState::ReleaseFailed
        {
            assert!(
                failing.elapsed() < PATIENCE,
                "{} never failed its release",
                c.run_id
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let run = db
            .store
            .get_run(Some(TENANT), &c.run_id)
            .await
            .expect("the run");
        let snapshot = db
            .store
            .snapshot(Some(TENANT), &run.session_id)
            .await
            .expect("a snapshot");
        let interaction = &snapshot.pending_interactions[0].id;
        let reply = ReplyInteraction {
            decision: "approve".into(),
            payload: json!({}),
            expected_revision: None,
            payload_sha256: None,
            comment: None,
        };
        db.store
            .reply_interaction(Some(TENANT), &run.session_id, interaction, &reply, "bench")
            .await
            .expect("reply");
        let at = Instant::now();
        loop {
            let claims = db
                .store
                .claim_runs(Some(TENANT), "runtime-1", 1, ttl)
                .await
                .expect("claim runs");
            if claims.iter().any(|cl| cl.run.id == c.run_id) {
                samples.push(ms_between(at, Instant::now()));
                break;
            }
            assert!(at.elapsed() < PATIENCE, "{} was never offered", c.run_id);
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let spent = start.elapsed();
    pool.stop().await;
    Latency::of(samples, runs.len() as f64 / spent.as_secs_f64())
}
