//! The coordinator's claim writes each leased run's first intent in the claim's own
//! transaction: what it stores is what the work carries, it stays the holder's until the
//! lease expires, and a holder that dies after it leaves a release the next one finishes
//! under the same key.

use sagents::clock::to_millis;
use sagents::domain::resource::ResourceState;
use sagents::domain::sandbox::ReleaseDisposition;
use sagents::store::Backend;

use super::*;
use crate::on_both_backends;

on_both_backends!(
    a_claim_writes_the_release_intent_and_a_holder_lost_after_it_leaves_the_same_key,
    a_claim_writes_the_bind_intent_of_a_new_run
);

async fn a_claim_writes_the_release_intent_and_a_holder_lost_after_it_leaves_the_same_key(
    backend: Backend,
) {
    let lx = lx(backend).await;
    let s = lx.session().await;
    let run = lx.awaiting_approval(&s).await;
    assert_eq!(lx.record(&run.id).await.state, ResourceState::Active);

    let mut work = lx
        .main
        .coordinator
        .claim("lost:w1", 16, ttl())
        .await
        .unwrap();
    assert_eq!(work.len(), 1);
    let work = work.remove(0);
    let stored = lx.record(&run.id).await;
    assert_eq!(work.record, stored, "the work carries the record as stored");
    assert_eq!(stored.state, ResourceState::ReleaseRequested);
    assert_eq!(
        stored.disposition,
        Some(ReleaseDisposition::SnapshotAndTerminate)
    );
    let key = stored
        .release_idempotency_key
        .clone()
        .expect("a release key");
    assert!(stored.release_requested_at.is_some());
    assert_eq!(
        stored.due_at.map(to_millis),
        Some(to_millis(work.lease.expires_at)),
        "deferred to the lease like every claimed record"
    );
    let history = lx
        .store()
        .list_resource_events(&run.id, 0, 100)
        .await
        .unwrap();
    let last = history.last().expect("a history entry");
    assert_eq!(last.data["from"], "active");
    assert_eq!(last.data["state"], "release_requested");

    // Leased: nobody else may take it, and nothing was released yet.
    assert!(lx
        .main
        .coordinator
        .claim("other:w1", 16, ttl())
        .await
        .unwrap()
        .is_empty());
    assert_eq!(lx.drain().await, 0);

    // The holder is gone without a word; once its lease expires the release is finished
    // under the key its claim wrote.
    drop(work);
    lx.advance(TTL_SECONDS as i64 + 1);
    assert_eq!(lx.drain().await, 1);
    let released = lx.record(&run.id).await;
    assert_eq!(released.state, ResourceState::Released);
    assert!(released.compute_released);
    assert_eq!(
        released.release_idempotency_key.as_deref(),
        Some(key.as_str())
    );
}

async fn a_claim_writes_the_bind_intent_of_a_new_run(backend: Backend) {
    let lx = lx(backend).await;
    let s = lx.session().await;
    let run = lx.isolated_run(&s).await;
    assert_eq!(lx.record(&run.id).await.bind_idempotency_key, None);

    let work = lx
        .main
        .coordinator
        .claim("bind:w1", 16, ttl())
        .await
        .unwrap();
    assert_eq!(work.len(), 1);
    let stored = lx.record(&run.id).await;
    assert_eq!(work[0].record, stored);
    assert_eq!(stored.state, ResourceState::Provisioning);
    assert!(stored.bind_idempotency_key.is_some());

    // The holder provisions from the intent it was handed, and writes it no second time.
    let version = stored.version;
    lx.main
        .coordinator
        .process(work.into_iter().next().unwrap())
        .await
        .unwrap();
    let active = lx.record(&run.id).await;
    assert_eq!(active.state, ResourceState::Active);
    assert_eq!(active.generation, 1);
    assert_eq!(active.version, version + 1, "one write after the claim");
}
