//! The worker pool on its own: woken by notifications, keeping leases through slow provider
//! calls, handing work back at shutdown. Real time here, bounded by conditions.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration as StdDuration;

use sagents::clock::SystemClock;
use sagents::domain::resource::ResourceState;
use sagents::domain::sandbox::WorkspaceMode;
use sagents::lifecycle::coordinator::Coordinator;
use sagents::metrics::Metrics;
use sagents::notify::ChangeHub;
use sagents::scheduler::{keep_lease, LeaseEnd, PoolConfig, WorkerPool};
use sagents::store::{Backend, Store};
use serde_json::json;
use tokio::sync::watch;

use super::fixture::ax_with;
use super::{register, spec, PROVIDER_TOKEN, TENANT};
use crate::common::app::{until, Options};
use crate::common::db;
use crate::on_both_backends;
use crate::provider::Harness;

on_both_backends!(the_app_provisions_a_new_run_at_once_and_a_waiting_claim_gets_it);

const LIMIT: StdDuration = StdDuration::from_secs(20);

async fn the_app_provisions_a_new_run_at_once_and_a_waiting_claim_gets_it(backend: Backend) {
    // The app's own pool (the default workers, the real clock) does the work.
    let ax = ax_with(backend, "", Options::default()).await;
    let session = ax.app.create_session().await;
    let req = ax
        .app
        .request(reqwest::Method::POST, "/v1/runtime/claims", &ax.app.runtime)
        .json(&json!({"worker_id": "runtime-1", "wait_seconds": 15}))
        .send();
    let waiting = tokio::spawn(req);
    ax.app.until_waiting(1).await;
    let run = ax.isolated_run(&session).await;
    let res = tokio::time::timeout(LIMIT, waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let body: serde_json::Value = res.json().await.unwrap();
    let claims = body["claims"].as_array().unwrap();
    assert_eq!(claims.len(), 1, "{body}");
    assert_eq!(claims[0]["run"]["id"], run.as_str());
    assert_eq!(claims[0]["sandbox"]["generation"], 1);
    let claimed = ax.claimed(&claims[0]);
    assert_eq!(ax.sh(&claimed, "echo ready").await, "ready\n");
    ax.app.stop().await;
}

/// A store on `url` with the real clock, like a replica process.
async fn replica_store(url: &str) -> Store {
    Store::connect(
        url,
        Arc::new(SystemClock),
        ChangeHub::new(),
        Arc::new(Metrics::default()),
    )
    .await
    .unwrap()
}

fn pool(store: &Store, name: &str, ttl_seconds: u64, stop: &watch::Sender<bool>) -> WorkerPool {
    let coordinator = Arc::new(Coordinator::new(store.clone(), name));
    let mut config = PoolConfig::new(name, 1, StdDuration::from_secs(ttl_seconds));
    config.fallback_poll = StdDuration::from_millis(200);
    config.shutdown_grace = StdDuration::from_millis(100);
    WorkerPool::start(coordinator, store.clone(), config, stop.subscribe())
}

async fn provider_with_faults(faults: &str) -> Harness {
    let faults = faults.to_string();
    Harness::with(move |c| {
        c.token = Some(PROVIDER_TOKEN.into());
        c.fault_injection = Some(faults);
    })
    .await
}

async fn sandboxed_run(store: &Store) -> sagents::domain::RunId {
    let session = store
        .create_session(TENANT, &serde_json::from_value(json!({})).unwrap())
        .await
        .unwrap();
    store
        .create_run(
            TENANT,
            &session.id,
            &serde_json::from_value(json!({
                "sandbox_spec": spec(WorkspaceMode::Isolated, None),
                "resolved_spec_hash": super::hash('c'),
                "input": {},
            }))
            .unwrap(),
        )
        .await
        .unwrap()
        .id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_provision_keeps_its_lease_against_another_replica() {
    let provider = provider_with_faults("provision=delay_ms=8000:times=1").await;
    let (url, _db) = db::fresh_url(Backend::Postgres).await;
    let a = replica_store(&url).await;
    a.migrate().await.unwrap();
    let b = replica_store(&url).await;
    register(&a, &provider).await;
    let (stop, _) = watch::channel(false);
    // A 6 s lease is renewed every 2 s while the provider takes 8 s: a renewal that a loaded
    // machine wakes up to 4 s late still lands.
    let pools = [
        pool(&a, "replica-a", 6, &stop),
        pool(&b, "replica-b", 6, &stop),
    ];
    let run = sandboxed_run(&a).await;
    until(|| async {
        a.get_resource(&run)
            .await
            .is_ok_and(|r| r.state == ResourceState::Active)
    })
    .await;
    let calls: u64 = [&a, &b]
        .iter()
        .map(|s| s.metrics().lifecycle.provider_calls("provision", "ok"))
        .sum();
    assert_eq!(calls, 1, "nobody else provisioned meanwhile");
    for s in [&a, &b] {
        assert_eq!(s.metrics().lease_takeovers.load(Ordering::Relaxed), 0);
        assert_eq!(s.metrics().fenced_rejections.load(Ordering::Relaxed), 0);
    }
    stop.send_replace(true);
    for p in pools {
        tokio::time::timeout(LIMIT, p.join()).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_hands_in_flight_work_back_for_another_replica() {
    let provider = provider_with_faults("provision=hold:times=1").await;
    let (url, _db) = db::fresh_url(Backend::Postgres).await;
    let a = replica_store(&url).await;
    a.migrate().await.unwrap();
    register(&a, &provider).await;
    let (stop, _) = watch::channel(false);
    let first = pool(&a, "replica-a", 30, &stop);
    let run = sandboxed_run(&a).await;
    until(|| async {
        a.get_resource(&run)
            .await
            .is_ok_and(|r| r.bind_idempotency_key.is_some())
    })
    .await;
    let started = std::time::Instant::now();
    stop.send_replace(true);
    tokio::time::timeout(LIMIT, first.join()).await.unwrap();
    assert!(
        started.elapsed() < StdDuration::from_secs(4),
        "the grace period, not the provider, bounds shutdown"
    );

    // The lease was handed back: another replica takes the run at once, no expiry needed.
    let b = replica_store(&url).await;
    let (stop_b, _) = watch::channel(false);
    let second = pool(&b, "replica-b", 30, &stop_b);
    until(|| async {
        b.get_resource(&run)
            .await
            .is_ok_and(|r| r.state == ResourceState::Active)
    })
    .await;
    assert_eq!(b.metrics().lease_takeovers.load(Ordering::Relaxed), 0);
    provider.open_held_calls();
    stop_b.send_replace(true);
    tokio::time::timeout(LIMIT, second.join()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keeper_gives_up_when_its_lease_is_taken_or_about_to_expire() {
    let lx = super::lx(Backend::Postgres).await;
    let b = lx.replica("replica-b").await;
    let doomed = lx.replica("replica-c").await;
    let s = lx.session().await;
    lx.isolated_run(&s).await;
    lx.isolated_run(&s).await;
    // Renewals every 100 ms of real time.
    let period_ttl = StdDuration::from_millis(300);

    let lease = lx
        .store()
        .claim_lifecycle_work("replica-a:w1", 1, super::ttl())
        .await
        .unwrap()
        .remove(0)
        .lease;
    let keeper = {
        let store = lx.store().clone();
        tokio::spawn(async move { keep_lease(&store, &lease, period_ttl).await })
    };
    lx.advance(super::TTL_SECONDS as i64 + 1);
    let taken = b
        .store
        .claim_lifecycle_work("replica-b:w1", 2, super::ttl())
        .await
        .unwrap();
    assert_eq!(taken.len(), 2, "the expired lease and the other run");
    let end = tokio::time::timeout(LIMIT, keeper).await.unwrap().unwrap();
    assert_eq!(end, LeaseEnd::Lost);

    // A replica that cannot reach its database stops before its lease runs out.
    for w in &taken {
        b.store.release_lease(&w.run.id, &w.lease).await.unwrap();
    }
    let lease = doomed
        .store
        .claim_lifecycle_work("replica-c:w1", 1, super::ttl())
        .await
        .unwrap()
        .remove(0)
        .lease;
    doomed.store.close().await;
    let keeper = {
        let store = doomed.store.clone();
        tokio::spawn(async move { keep_lease(&store, &lease, period_ttl).await })
    };
    lx.advance(super::TTL_SECONDS as i64 - 1);
    lx.clock.advance(chrono::Duration::milliseconds(950));
    let end = tokio::time::timeout(LIMIT, keeper).await.unwrap().unwrap();
    assert_eq!(end, LeaseEnd::Expiring);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_due_while_another_is_slow_is_worked_on_at_once_sqlite() {
    not_held_behind_a_slow_run(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_due_while_another_is_slow_is_worked_on_at_once_postgres() {
    not_held_behind_a_slow_run(Backend::Postgres).await;
}

/// One worker: a run that becomes due while the worker's first run waits on the provider is
/// claimed and worked on at once, not after the first run is done.
async fn not_held_behind_a_slow_run(backend: Backend) {
    let provider = provider_with_faults("provision=hold:times=1").await;
    let (url, _db) = db::fresh_url(backend).await;
    let store = replica_store(&url).await;
    store.migrate().await.unwrap();
    register(&store, &provider).await;
    let (stop, _) = watch::channel(false);
    let pool = pool(&store, "replica-a", 30, &stop);
    let slow = sandboxed_run(&store).await;
    let engine = provider.provider.as_ref().unwrap().engine().clone();
    until(|| async { engine.faults().held_calls() == 1 }).await;
    let quick = sandboxed_run(&store).await;
    until(|| async {
        store
            .get_resource(&quick)
            .await
            .is_ok_and(|r| r.state == ResourceState::Active)
    })
    .await;
    let held = store.get_resource(&slow).await.unwrap();
    assert_eq!(held.state, ResourceState::Provisioning, "still held");
    provider.open_held_calls();
    until(|| async {
        store
            .get_resource(&slow)
            .await
            .is_ok_and(|r| r.state == ResourceState::Active)
    })
    .await;
    stop.send_replace(true);
    tokio::time::timeout(LIMIT, pool.join()).await.unwrap();
}
