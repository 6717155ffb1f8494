//! A release call that runs out of time while its human waits: the provider may still be at
//! it under the key, so the release is asked again after the resume cadence's first wait,
//! not after the streak of failures before it, and the repeat joins the operation.

use std::time::Duration as StdDuration;

use chrono::Duration;
use sagents::domain::interaction::SuspensionReason;
use sagents::domain::resource::ResourceState;
use sagents::providers::client::{ClientConfig, Timeouts};
use sagents::store::Backend;

use super::{approve, lx_with_faults, register_at, Replica, TENANT};
use crate::common::proxy::{Mode, Proxy};

crate::on_both_backends!(a_release_that_runs_out_of_time_is_asked_again_at_once);

const STEP_MS: i64 = 100;

async fn a_release_that_runs_out_of_time_is_asked_again_at_once(backend: Backend) {
    // The first snapshot is held at its archive step until the test lets it go.
    let lx = lx_with_faults(backend, "snapshot=hold:times=1").await;
    let proxy = Proxy::start(&lx.provider.base_url()).await;
    register_at(lx.store(), &lx.provider, &proxy.base_url).await;
    let config = ClientConfig {
        timeouts: Timeouts {
            release: StdDuration::from_secs(1),
            ..Timeouts::default()
        },
        ..ClientConfig::default()
    };
    let replica = Replica::with_clients(lx.store().clone(), "replica-t", config);
    let session = lx.session().await;
    let run = lx.isolated_run(&session).await.id;
    assert_eq!(replica.drain().await, 1);
    let claim = lx.claim_one().await;
    lx.suspend(&claim, SuspensionReason::ApprovalRequired, 1)
        .await;

    // An ingress answers its HTML pages while the human approves: the tries back off.
    proxy.set(Mode::Html404);
    assert_eq!(replica.drain().await, 1);
    let snapshot = lx
        .store()
        .snapshot(Some(TENANT), &session.id)
        .await
        .unwrap();
    let pending = &snapshot.pending_interactions[0];
    lx.store()
        .reply_interaction(Some(TENANT), &session.id, &pending.id, &approve(), "alice")
        .await
        .unwrap();
    for _ in 0..(4_000 / STEP_MS) {
        replica.drain().await;
        lx.clock.advance(Duration::milliseconds(STEP_MS));
    }
    let record = lx.record(&run).await;
    assert_eq!(record.state, ResourceState::ReleaseFailed, "{record:?}");
    assert!(record.retry_count >= 4, "{record:?}");

    // The ingress heals; the release reaches the provider, whose snapshot takes longer than
    // the call may.
    proxy.set(Mode::PassThrough);
    let due = record.next_retry_at.unwrap();
    lx.clock.advance(due - lx.store().now());
    assert_eq!(replica.drain().await, 1);
    let record = lx.record(&run).await;
    let error = record.error.as_ref().map(|e| e.code.as_str());
    assert_eq!(error, Some("provider.timeout"), "{record:?}");
    let wait = record.next_retry_at.unwrap() - lx.store().now();
    assert!(
        wait <= Duration::milliseconds(275),
        "asked again after the first wait, not the streak's: {wait}"
    );

    // The snapshot ends; a repeat of the key gets its receipt and the run is restored.
    lx.provider.open_held_calls();
    let mut record = record;
    for _ in 0..10 {
        if record.state == ResourceState::Active {
            break;
        }
        lx.clock.advance(Duration::milliseconds(300));
        replica.drain().await;
        record = lx.record(&run).await;
    }
    assert_eq!(record.state, ResourceState::Active, "{record:?}");
    assert_eq!(record.generation, 2, "restored");
}
