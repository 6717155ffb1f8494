//! A provider that answers again after an outage: its resuming runs go on at once, whether a
//! run's own retry or a probe of this replica hears it first, instead of each waiting out
//! the rest of its backoff.

use chrono::Duration;
use sagents::domain::resource::ResourceState;
use sagents::domain::RunId;
use sagents::store::Backend;

use super::outage::approved_while_down;
use super::{lx_with_faults, Lx};

crate::on_both_backends!(
    a_run_that_reaches_its_provider_again_wakes_the_others,
    a_probe_that_reaches_the_provider_again_wakes_its_resuming_runs,
    a_new_run_gets_its_first_sandbox_as_soon_as_its_provider_answers_again
);

const RUNS: usize = 4;
const STEP_MS: i64 = 100;

/// `RUNS` runs whose release failed (every snapshot fails), approved while their provider is
/// down, then backed off to the resume cadence's cap; the provider serves again.
async fn resuming_through_an_outage(backend: Backend) -> (Lx, Vec<RunId>) {
    let mut lx = lx_with_faults(backend, "snapshot=fail").await;
    let (runs, addr) = approved_while_down(&mut lx, RUNS).await;
    for _ in 0..(20_000 / STEP_MS) {
        lx.drain().await;
        lx.clock.advance(Duration::milliseconds(STEP_MS));
    }
    lx.drain().await;
    lx.provider.serve_again_at(addr).await;
    (lx, runs)
}

/// The runs still waiting out a retry after `now`.
async fn waiting(lx: &Lx, runs: &[RunId]) -> Vec<RunId> {
    let now = lx.store().now();
    let mut out = Vec::new();
    for run in runs {
        let record = lx.record(run).await;
        if record.state != ResourceState::Active && record.next_retry_at.is_some_and(|t| t > now) {
            out.push(run.clone());
        }
    }
    out
}

async fn a_run_that_reaches_its_provider_again_wakes_the_others(backend: Backend) {
    let (lx, runs) = resuming_through_an_outage(backend).await;
    // Up to the first retry due: that run reaches the provider, the others still wait.
    let mut steps = 0;
    while waiting(&lx, &runs).await.len() == RUNS {
        lx.clock.advance(Duration::milliseconds(STEP_MS));
        steps += 1;
        assert!(steps <= 60, "no retry became due within the cap");
    }
    let before = waiting(&lx, &runs).await;
    assert!(!before.is_empty(), "the others wait out their backoff");
    lx.drain().await;
    lx.drain().await;
    for run in &runs {
        let record = lx.record(run).await;
        assert_eq!(
            record.state,
            ResourceState::Active,
            "{run} resumed without waiting out its backoff: {record:?}"
        );
    }
}

async fn a_probe_that_reaches_the_provider_again_wakes_its_resuming_runs(backend: Backend) {
    let (lx, runs) = resuming_through_an_outage(backend).await;
    assert_eq!(waiting(&lx, &runs).await.len(), RUNS);
    assert_eq!(lx.drain().await, 0, "every run waits out its backoff");
    assert_eq!(lx.main.coordinator.probe_providers().await, 1);
    assert_eq!(lx.main.coordinator.probe_providers().await, 0, "asked once");
    lx.drain().await;
    for run in &runs {
        let record = lx.record(run).await;
        assert_eq!(record.state, ResourceState::Active, "{run}: {record:?}");
    }
}

async fn a_new_run_gets_its_first_sandbox_as_soon_as_its_provider_answers_again(backend: Backend) {
    let mut lx = lx_with_faults(backend, "").await;
    let addr = lx.provider.stop_serving().await;
    let session = lx.session().await;
    let run = lx.isolated_run(&session).await.id;
    for _ in 0..(60_000 / STEP_MS) {
        lx.drain().await;
        lx.clock.advance(Duration::milliseconds(STEP_MS));
    }
    let record = lx.record(&run).await;
    assert_eq!(record.state, ResourceState::Provisioning);
    let wait = record.next_retry_at.unwrap() - lx.store().now();
    assert!(
        wait <= Duration::seconds(5),
        "a run waiting to start retries on the quick cadence: {wait}"
    );
    lx.provider.serve_again_at(addr).await;
    assert_eq!(lx.main.coordinator.probe_providers().await, 1);
    lx.drain().await;
    assert_eq!(lx.record(&run).await.state, ResourceState::Active);
}
