//! approve → resume travels on notifications alone: with the lifecycle pool's fallback poll
//! and the runtime claim's own retry an hour long, a reply still gets the run restored and
//! offered to the waiting claim, and the resume's stages are timed once.

use std::sync::atomic::Ordering;
use std::time::Duration as StdDuration;

use sagents::domain::claim::ClaimKind;
use sagents::domain::interaction::SuspensionReason;
use sagents::domain::resource::ResourceState;
use sagents::providers::grant::GrantSigner;
use sagents::scheduler::{PoolConfig, WorkerPool};
use sagents::service::claims::{claim, ClaimWait};
use sagents::service::shutdown;
use sagents::store::Backend;
use tokio::sync::watch;

use super::{approve, lx, ttl, TENANT, TTL_SECONDS};
use crate::common::app::until;
use crate::on_both_backends;

on_both_backends!(a_reply_reaches_the_waiting_runtime_claim_without_a_poll);

const NEVER: StdDuration = StdDuration::from_secs(3600);
const LIMIT: StdDuration = StdDuration::from_secs(60);

async fn a_reply_reaches_the_waiting_runtime_claim_without_a_poll(backend: Backend) {
    let lx = lx(backend).await;
    let (stop, stopped) = watch::channel(false);
    let mut config = PoolConfig::new("replica-w", 1, StdDuration::from_secs(TTL_SECONDS));
    config.fallback_poll = NEVER;
    let pool = WorkerPool::start(
        lx.main.coordinator.clone(),
        lx.store().clone(),
        config,
        stopped,
    );
    let lxr = &lx;
    let state = |run| async move { lxr.record(run).await.state };
    let s = lx.session().await;
    let run = lx.isolated_run(&s).await;
    until(|| async { state(&run.id).await == ResourceState::Active }).await;
    let first = lx.claim_one().await;
    lx.suspend(&first, SuspensionReason::ApprovalRequired, 1)
        .await;
    until(|| async { state(&run.id).await == ResourceState::Released }).await;

    let store = lx.store().clone();
    let (_trigger, shut) = shutdown::channel();
    let waiting = tokio::spawn(async move {
        let signer = GrantSigner::hmac(b"resume-wakeups-grant-secret");
        let q = ClaimWait {
            tenant: Some(TENANT),
            worker_id: "runtime-1",
            max: 1,
            ttl: ttl(),
            wait: NEVER,
            poll: NEVER,
            grants: &signer,
        };
        claim(&store, &shut, store.metrics(), q).await
    });
    let metrics = lx.store().metrics().clone();
    until(|| async { metrics.long_polls_waiting.load(Ordering::Relaxed) == 1 }).await;
    let pending = lx.store().snapshot(Some(TENANT), &s.id).await.unwrap();
    lx.store()
        .reply_interaction(
            Some(TENANT),
            &s.id,
            &pending.pending_interactions[0].id,
            &approve(),
            "alice",
        )
        .await
        .unwrap();
    let claims = tokio::time::timeout(LIMIT, waiting)
        .await
        .expect("the claim was answered by notifications, not a poll")
        .unwrap()
        .unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].kind, ClaimKind::Resume);
    assert_eq!(claims[0].run.id, run.id);
    let sandbox = claims[0].sandbox.as_ref().expect("the restored sandbox");
    assert!(!sandbox.grant.is_empty());
    assert_eq!(lx.record(&run.id).await.generation, 2);
    assert_eq!(metrics.resume.count(), 1, "the resume's stages were timed");
    assert!(metrics
        .render_prometheus()
        .contains("sagents_resume_stage_seconds_count{stage=\"offer\"} 1"));
    stop.send_replace(true);
    tokio::time::timeout(LIMIT, pool.join()).await.unwrap();
}
