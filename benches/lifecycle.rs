//! The lifecycle benchmark: suspend → released through the real store, coordinator and
//! worker pool, on SQLite (temp file) and PostgreSQL (a throwaway cluster), against a no-op
//! provider and the real local provider, next to each database's single-row update floor
//! measured in the same run; plus claim rates against table size.
//!
//! `cargo bench --bench lifecycle`. Knobs (environment, defaults in brackets):
//! `LBENCH_BACKENDS` [sqlite,postgres], `LBENCH_N` [2000] runs per throughput repetition,
//! `LBENCH_REPS` [3], `LBENCH_RATE` [200] and `LBENCH_SECONDS` [5] for the latency run,
//! `LBENCH_LOCAL_N` [200], `LBENCH_LOCAL_LATENCY` [60] and `LBENCH_LOCAL_RATE` [20] for the
//! local provider, `LBENCH_RESUME_N` [40] runs approved while every snapshot fails, `LBENCH_M` [2000] runtime and `LBENCH_LIFECYCLE_M` [1000] lifecycle
//! claims, `LBENCH_BULK` [100000] loaded runs, `LBENCH_LEASED` [5000] runs holding leases
//! during idle claims, `LBENCH_FLOOR_SECONDS` [10] for pgbench and
//! `LBENCH_SQLITE_FLOOR_SECONDS` [3] per SQLite floor repetition, `LBENCH_PHASES`
//! [floor,noop,local,resume,claims], `LBENCH_WORKERS` [4] and `LBENCH_BATCH` [64] for the
//! pool (the service's defaults).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "tests and benchmarks stop at the first surprise and print what they measure"
)]

#[allow(dead_code)]
#[path = "../tests/common/pg.rs"]
mod pg;

#[path = "lifecycle/claims.rs"]
mod claims;
#[path = "lifecycle/db.rs"]
mod db;
#[path = "lifecycle/drive.rs"]
mod drive;
#[path = "lifecycle/floor.rs"]
mod floor;
#[path = "lifecycle/noop.rs"]
mod noop;
#[path = "lifecycle/report.rs"]
mod report;
#[path = "lifecycle/stats.rs"]
mod stats;

use std::sync::Arc;
use std::time::Instant;

use sagents::lifecycle::coordinator::Coordinator;
use sagents::service::providers::{self as registry, RegisterProvider};
use sagents::store::{Backend, Store};
use sagents_local_provider::{self as local_provider, Engine};

use crate::db::Db;
use crate::report::{Figures, Knobs};

// The allocator of the deployed binary (`src/main.rs`), so the figures are the service's.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const PROVIDER_TOKEN: &str = "bench-provider-token-0123456789abcdef";

async fn register(store: &Store, provider_id: &str, base_url: &str) {
    registry::register_provider(
        store,
        &RegisterProvider {
            provider_id: provider_id.into(),
            base_url: base_url.into(),
            token: PROVIDER_TOKEN.into(),
        },
        "bench",
    )
    .await
    .expect("register the provider");
}

/// Kills every sandbox's processes if the bench stops early.
struct KillSandboxes(Arc<Engine>);

impl Drop for KillSandboxes {
    fn drop(&mut self) {
        self.0.kill_all_now();
    }
}

async fn noop_phase(db: &Db, k: &Knobs, f: &mut Figures) {
    let server = noop::serve().await.expect("serve the no-op provider");
    register(&db.store, noop::PROVIDER_ID, &server.base_url).await;
    let coordinator = Arc::new(Coordinator::new(db.store.clone(), "bench"));
    let latency_n = k.latency_runs();
    let total = k.reps * k.n + latency_n;
    let (claimed, took) = drive::prepare(db, &coordinator, noop::PROVIDER_ID, total).await;
    f.provision_rate = total as f64 / took.as_secs_f64();
    let (batches, latency_runs) = claimed.split_at(k.reps * k.n);
    for batch in batches.chunks(k.n) {
        let (rate, groups) = drive::throughput(db, &coordinator, batch, Some(&server.noop)).await;
        eprintln!("  no-op throughput: {rate:.0} releases/s ({groups:?})");
        f.noop.push(rate);
        f.noop_groups.push(groups);
    }
    f.noop_latency =
        drive::noop_latency(db, &coordinator, &server.noop, latency_runs, k.rate).await;
    eprintln!("  no-op latency: {} ms", f.noop_latency.cell());
    f.noop_release_calls = server.noop.release_calls();
    f.noop_expected_calls = total;
    let metrics = db.store.lifecycle_metrics().await.expect("metrics");
    f.noop_retries = metrics.release_retry_count;
}

/// The local provider on a temporary root, registered; `faults` is its fault injection spec.
async fn local_provider_for(
    db: &Db,
    faults: Option<&str>,
) -> (
    tempfile::TempDir,
    local_provider::LocalProvider,
    KillSandboxes,
) {
    let root = tempfile::Builder::new()
        .prefix("sagents-lbench-local-")
        .tempdir()
        .expect("a temp dir");
    let mut config = local_provider::Config::for_root(root.path());
    config.token = Some(PROVIDER_TOKEN.into());
    config.fault_injection = faults.map(str::to_owned);
    let provider = local_provider::serve(config)
        .await
        .expect("serve the local provider");
    let kill = KillSandboxes(provider.engine().clone());
    register(&db.store, local_provider::PROVIDER_ID, &provider.base_url()).await;
    (root, provider, kill)
}

async fn local_phase(db: &Db, k: &Knobs, f: &mut Figures) {
    let (_root, provider, _kill) = local_provider_for(db, None).await;
    let coordinator = Arc::new(Coordinator::new(db.store.clone(), "bench"));
    let total = k.reps * k.local_n + k.local_latency;
    let (claimed, _) = drive::prepare(db, &coordinator, local_provider::PROVIDER_ID, total).await;
    let (batches, latency_runs) = claimed.split_at(k.reps * k.local_n);
    for batch in batches.chunks(k.local_n) {
        let (rate, _) = drive::throughput(db, &coordinator, batch, None).await;
        eprintln!("  local throughput: {rate:.1} releases/s");
        f.local.push(rate);
    }
    f.local_latency = drive::released_latency(db, &coordinator, latency_runs, k.local_rate).await;
    eprintln!("  local latency: {} ms", f.local_latency.cell());
    let metrics = db.store.lifecycle_metrics().await.expect("metrics");
    f.local_retries = metrics.release_retry_count;
    provider.stop_and_kill_sandboxes().await;
}

/// Every snapshot fails and the sandbox runs again: a reply must not wait on the backoff.
async fn resume_phase(db: &Db, k: &Knobs, f: &mut Figures) {
    let (_root, provider, _kill) = local_provider_for(db, Some("snapshot=fail")).await;
    let coordinator = Arc::new(Coordinator::new(db.store.clone(), "bench"));
    let (claimed, _) =
        drive::prepare(db, &coordinator, local_provider::PROVIDER_ID, k.resume_n).await;
    f.resume_latency = drive::approve_to_resume(db, &coordinator, &claimed).await;
    eprintln!("  reply → resume: {} ms", f.resume_latency.cell());
    provider.stop_and_kill_sandboxes().await;
}

async fn bench(backend: Backend, k: &Knobs) -> Figures {
    let mut f = Figures::new(backend);
    let start = Instant::now();
    eprintln!("== {}", db::name(backend));

    if k.runs("floor") {
        let d = db::fresh(backend).await;
        let (reps, seconds) = k.floor_runs(backend);
        f.floor = floor::measure(&d, reps, seconds).await;
        eprintln!("  floor: {} tx/s", stats::list(&f.floor));
        d.close().await;
    }
    if k.runs("noop") {
        let d = db::fresh(backend).await;
        noop_phase(&d, k, &mut f).await;
        d.close().await;
    }
    if k.runs("local") {
        let d = db::fresh(backend).await;
        local_phase(&d, k, &mut f).await;
        d.close().await;
    }
    if k.runs("resume") {
        let d = db::fresh(backend).await;
        resume_phase(&d, k, &mut f).await;
        d.close().await;
    }
    if k.runs("claims") {
        let d = db::fresh(backend).await;
        f.claims = claims::measure(&d, (k.m, k.lifecycle_m), k.bulk, k.reps, k.leased).await;
        eprintln!("  claims: {:?}", f.claims);
        d.close().await;
    }
    eprintln!("  ({:.0} s)", start.elapsed().as_secs_f64());
    f
}

fn main() {
    // The service's own logging as deployed (default filter, JSON lines on stderr).
    let logs = sagents::telemetry::init(sagents::config::LogFormat::Json).expect("the log thread");
    let knobs = Knobs::from_env();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let start = Instant::now();
    let figures = rt.block_on(async {
        let mut out = Vec::new();
        for &backend in &knobs.backends {
            out.push(bench(backend, &knobs).await);
        }
        out
    });
    let dropped = logs.dropped_lines().get();
    report::print(&knobs, &figures, start.elapsed(), dropped);
    logs.flush();
}
