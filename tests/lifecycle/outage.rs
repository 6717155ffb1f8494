//! The provider down (connection refused) while humans answer: every resuming run retries on
//! the resume cadence (0.25 s doubling to 5 s), never in a loop, and resumes within one cap
//! once the provider is back.

use std::net::SocketAddr;

use chrono::Duration;
use sagents::domain::claim::Claim;
use sagents::domain::interaction::SuspensionReason;
use sagents::domain::resource::ResourceState;
use sagents::domain::RunId;
use sagents::store::Backend;
use sagents_local_provider as local_provider;

use super::{approve, lx_with_faults, Lx, TENANT};
use crate::provider::Harness;

crate::on_both_backends!(resuming_runs_back_off_while_their_provider_is_down);

/// Resuming runs in the measured outage.
const RUNS: usize = 100;
const STEP_MS: i64 = 100;

impl Harness {
    /// Stops the provider (its sandboxes keep running): calls to its address are refused.
    pub async fn stop_serving(&mut self) -> SocketAddr {
        let provider = self.provider.take().expect("the provider runs");
        let addr: SocketAddr = provider.base_url()["http://".len()..].parse().unwrap();
        provider.stop().await;
        addr
    }

    /// Serves again at `addr`, on the same root, without fault injection.
    pub async fn serve_again_at(&mut self, addr: SocketAddr) {
        self.config.listen = addr;
        self.config.fault_injection = None;
        for _ in 0..100 {
            match local_provider::serve(self.config.clone()).await {
                Ok(provider) => {
                    self.provider = Some(provider);
                    return;
                }
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        }
        panic!("the provider could not listen at {addr} again");
    }
}

/// Calls to the provider this process counted as refused (connection refused).
fn refused_calls(lx: &Lx) -> u64 {
    let counters = &lx.store().metrics().lifecycle;
    ["release", "inspect", "attach", "restore", "provision"]
        .iter()
        .map(|endpoint| counters.provider_calls(endpoint, "unreachable"))
        .sum()
}

/// `n` runs whose release failed definitely (every snapshot fails and brings its sandbox
/// back), approved while their provider is down: the runs, and the provider's address.
pub async fn approved_while_down(lx: &mut Lx, n: usize) -> (Vec<RunId>, SocketAddr) {
    let mut sessions = Vec::new();
    for _ in 0..n {
        let session = lx.session().await;
        lx.isolated_run(&session).await;
        sessions.push(session);
    }
    lx.drain().await;
    let claims: Vec<Claim> = lx
        .store()
        .claim_runs(Some(TENANT), "runtime-1", n as u32, super::ttl())
        .await
        .unwrap();
    assert_eq!(claims.len(), n);
    for claim in &claims {
        lx.suspend(claim, SuspensionReason::ApprovalRequired, 1)
            .await;
    }
    lx.drain().await;
    let runs: Vec<RunId> = claims.iter().map(|c| c.run.id.clone()).collect();
    for run in &runs {
        assert_eq!(lx.record(run).await.state, ResourceState::ReleaseFailed);
    }
    let addr = lx.provider.stop_serving().await;
    for session in &sessions {
        let snap = lx
            .store()
            .snapshot(Some(TENANT), &session.id)
            .await
            .unwrap();
        let pending = &snap.pending_interactions[0];
        lx.store()
            .reply_interaction(Some(TENANT), &session.id, &pending.id, &approve(), "alice")
            .await
            .unwrap();
    }
    (runs, addr)
}

async fn resuming_runs_back_off_while_their_provider_is_down(backend: Backend) {
    let mut lx = lx_with_faults(backend, "snapshot=fail").await;
    let (runs, addr) = approved_while_down(&mut lx, RUNS).await;
    let mut versions = Vec::new();
    for run in &runs {
        versions.push(lx.record(run).await.version);
    }

    let calls_before = refused_calls(&lx);
    for _ in 0..(60_000 / STEP_MS) {
        lx.drain().await;
        lx.clock.advance(Duration::milliseconds(STEP_MS));
    }
    lx.drain().await;
    let calls = refused_calls(&lx) - calls_before;
    let per_run = calls as f64 / RUNS as f64;
    let mut writes = Vec::new();
    for (run, before) in runs.iter().zip(&versions) {
        writes.push(lx.record(run).await.version - before);
    }
    eprintln!(
        "outage of 60 s: {per_run:.1} provider calls per run, record writes per run {}..={}",
        writes.iter().min().unwrap(),
        writes.iter().max().unwrap()
    );
    // Tries at 0, 0.25, 0.5, 1, 2, 4, 8 s, then every 5 s (jittered down by up to 10 %):
    // about 17 in 60 s, one provider call each.
    assert!(
        (12.0..=22.0).contains(&per_run),
        "{calls} refused calls for {RUNS} runs in 60 s"
    );
    for (run, before) in runs.iter().zip(&versions) {
        let record = lx.record(run).await;
        assert_eq!(record.state, ResourceState::ReleaseFailed, "{record:?}");
        let writes = record.version - before;
        assert!(
            (12..=22).contains(&writes),
            "{run}: {writes} record writes in 60 s (one per attempt)"
        );
        let wait = record.next_retry_at.unwrap() - lx.store().now();
        assert!(wait <= Duration::seconds(5), "{run} waits {wait}");
    }

    lx.provider.serve_again_at(addr).await;
    for _ in 0..(5_000 / STEP_MS) {
        lx.clock.advance(Duration::milliseconds(STEP_MS));
        lx.drain().await;
    }
    for run in &runs {
        let record = lx.record(run).await;
        assert_eq!(
            record.state,
            ResourceState::Active,
            "{run} resumed within the 5 s cap: {record:?}"
        );
    }
    assert_eq!(
        lx.store()
            .metrics()
            .lifecycle
            .releases("snapshot_and_terminate", "abandoned"),
        RUNS as u64,
        "every sandbox kept, none lost to the outage"
    );
}
