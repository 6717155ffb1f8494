use std::collections::BTreeMap;

use chrono::Duration;
use sagents::domain::resource::ResourceState;
use sagents::domain::resource::{ExecutionResourceRecord, LifecycleWork, RunEffect};
use sagents::metrics::{
    Histogram, LifecycleMetrics, ReleaseHistograms, RELEASE_ATTEMPT_BUCKETS,
    RELEASE_LATENCY_BUCKETS,
};
use sagents::store::Backend;

use super::{activate, due_sandbox_runs, register, release, save_and_release};
use crate::on_both_backends;
use crate::store::fx;

on_both_backends!(lifecycle_metrics_on_a_known_data_set, an_empty_lifecycle);

async fn save(
    f: &crate::store::Fx,
    w: &LifecycleWork,
    record: &ExecutionResourceRecord,
) -> Result<ExecutionResourceRecord, sagents::store::StoreError> {
    f.store
        .save_resource(&w.run.id, w.lease.fencing_token, record, RunEffect::None)
        .await
}

async fn lifecycle_metrics_on_a_known_data_set(backend: Backend) {
    let f = fx(backend).await;
    register(&f).await;
    let s = f.session("acme").await;
    let work = due_sandbox_runs(&f, &s, 14).await;

    let blocked = |r: &mut sagents::domain::resource::ExecutionResourceRecord| {
        activate(r);
        r.state = ResourceState::ReleaseBlocked;
    };
    let t0 = f.store.now();
    save_and_release(&f, &work[0], blocked).await;
    f.advance(10);
    save_and_release(&f, &work[1], blocked).await;
    save_and_release(&f, &work[13], |r| {
        activate(r);
        r.state = ResourceState::NeedsAttention;
        r.retry_count = 10;
    })
    .await;
    for w in &work[2..4] {
        save_and_release(&f, w, activate).await;
    }
    save_and_release(&f, &work[4], |r| {
        activate(r);
        r.state = ResourceState::ReleaseRequested;
    })
    .await;
    for (w, retries) in work[5..7].iter().zip([2, 3]) {
        save_and_release(&f, w, |r| {
            activate(r);
            r.state = ResourceState::ReleaseFailed;
            r.retry_count = retries;
        })
        .await;
    }
    let now = f.store.now();
    for (w, (latency, retries)) in work[7..11].iter().zip([(3, 1), (1, 0), (10, 0), (2, 0)]) {
        let mut asked = w.record.clone();
        activate(&mut asked);
        asked.state = ResourceState::ReleaseRequested;
        let mut done = save(&f, w, &asked).await.unwrap();
        release(&mut done, now);
        done.release_requested_at = Some(now - Duration::seconds(latency));
        done.retry_count = retries;
        let mut restored = save(&f, w, &done).await.unwrap();
        if latency == 2 {
            // Restored since: its release still counts.
            restored.state = ResourceState::RestoreRequested;
            let mut active = save(&f, w, &restored).await.unwrap();
            activate(&mut active);
            save(&f, w, &active).await.unwrap();
        }
        f.store.release_lease(&w.run.id, &w.lease).await.unwrap();
    }
    save_and_release(&f, &work[11], |r| {
        r.state = ResourceState::RestoreRequested;
        r.retry_count = 4;
        r.due_at = None;
    })
    .await;
    f.store
        .release_lease(&work[12].run.id, &work[12].lease)
        .await
        .unwrap();

    f.advance(30);
    let before = f.snapshot(&s).await;
    let metrics = f.store.lifecycle_metrics().await.unwrap();
    let by_state: BTreeMap<String, i64> = [
        ("active", 3),
        ("needs_attention", 1),
        ("provisioning", 1),
        ("release_blocked", 2),
        ("release_failed", 2),
        ("release_requested", 1),
        ("released", 3),
        ("restore_requested", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(
        metrics,
        LifecycleMetrics {
            active_sandboxes: 3,
            retained_sandboxes: 2,
            pending_releases: 6,
            release_failure_count: 2,
            release_retry_count: 16,
            bind_retry_count: 4,
            max_blocked_age_seconds: (f.store.now() - t0).num_milliseconds() as f64 / 1000.0,
            needs_attention_count: 1,
            oldest_attention_age_seconds: 30.0,
            average_release_latency_seconds: 4.0,
            release_latency_p50_seconds: 2.0,
            release_latency_p95_seconds: 10.0,
            release_latency_p99_seconds: 10.0,
            records_by_state: by_state,
            generated_at: f.store.now(),
            histograms: ReleaseHistograms {
                latency: Histogram {
                    bounds: RELEASE_LATENCY_BUCKETS.to_vec(),
                    cumulative: vec![0, 0, 0, 1, 2, 3, 4, 4, 4, 4, 4, 4],
                    count: 4,
                    sum: 16.0,
                },
                attempts: Histogram {
                    bounds: RELEASE_ATTEMPT_BUCKETS.to_vec(),
                    cumulative: vec![3, 4, 4, 4, 4, 4, 4],
                    count: 4,
                    sum: 5.0,
                },
            },
        }
    );
    assert_eq!(metrics.max_blocked_age_seconds, 40.0);
    assert_eq!(
        f.snapshot(&s).await,
        before,
        "reading metrics changes nothing"
    );
}

async fn an_empty_lifecycle(backend: Backend) {
    let f = fx(backend).await;
    let metrics = f.store.lifecycle_metrics().await.unwrap();
    assert_eq!(
        (
            metrics.active_sandboxes,
            metrics.pending_releases,
            metrics.release_retry_count
        ),
        (0, 0, 0)
    );
    assert_eq!(metrics.max_blocked_age_seconds, 0.0);
    assert_eq!(metrics.average_release_latency_seconds, 0.0);
    assert_eq!(metrics.release_latency_p99_seconds, 0.0);
    assert_eq!(metrics.records_by_state.len(), ResourceState::ALL.len());
    assert!(metrics.records_by_state.values().all(|&n| n == 0));
    assert_eq!(f.store.next_lifecycle_due().await.unwrap(), None);
}
