use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use sagents::domain::claim::{ClaimKind, ClaimSandbox};
use sagents::domain::commands::CompleteRun;
use sagents::domain::resource::ExecutionResourceRecord;
use sagents::domain::resource::ResourceState;
use sagents::domain::resource::RunEffect;
use sagents::domain::run::RunState;
use sagents::domain::RunId;
use sagents::store::{Backend, StoreError};
use serde_json::json;

use super::{
    activate, due_work, register, sandbox_ref, sandbox_run, save_and_release, settle, settle_due,
    spec, work_for, COORDINATOR,
};
use crate::on_both_backends;
use crate::store::{fx, hash, run_cmd, ttl, Fx, TTL};

on_both_backends!(
    a_run_with_a_spec_gets_a_due_record,
    an_unregistered_provider_is_refused,
    runtime_claims_wait_for_active_compute,
    lifecycle_claims_lease_due_records_oldest_first,
    concurrent_coordinators_never_share_a_run,
    runtime_and_coordinator_share_one_lease,
);

async fn a_run_with_a_spec_gets_a_due_record(backend: Backend) {
    let f = fx(backend).await;
    register(&f).await;
    let s = f.session("acme").await;
    let work = f.store.hub().subscribe_work();
    let run = sandbox_run(&f, &s, None).await;
    assert!(work.has_changed().unwrap(), "a new record is new work");
    let now = f.store.now();
    assert_eq!(
        f.store.get_resource(&run.id).await.unwrap(),
        ExecutionResourceRecord::provisioning(run.id.clone(), spec(), hash('a'), now)
    );
    let plain = f.run(&s).await;
    for id in [plain.id, RunId::new()] {
        assert!(matches!(
            f.store.get_resource(&id).await,
            Err(StoreError::NotFound("execution_resource"))
        ));
    }
}

async fn an_unregistered_provider_is_refused(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let before = f.snapshot(&s).await;
    let events = f.store.list_events(None, &s.id, 0, 100).await.unwrap();
    let mut cmd = run_cmd(None);
    cmd.sandbox_spec = Some(spec());
    match f.store.create_run("acme", &s.id, &cmd).await {
        Err(StoreError::Invalid(e)) => {
            assert_eq!(e.field, "sandbox_spec.provider_id");
            assert_eq!(e.message, "provider `local` is not registered");
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
    assert_eq!(f.snapshot(&s).await, before, "nothing was written");
    assert_eq!(
        f.store.list_events(None, &s.id, 0, 100).await.unwrap(),
        events
    );

    f.store
        .upsert_provider("other", "http://127.0.0.1:9/", "t", &json!({}), "u")
        .await
        .unwrap();
    assert!(f.store.create_run("acme", &s.id, &cmd).await.is_err());
    register(&f).await;
    let run = f.store.create_run("acme", &s.id, &cmd).await.unwrap();
    assert_eq!(f.store.get_resource(&run.id).await.unwrap().run_id, run.id);
}

async fn runtime_claims_wait_for_active_compute(backend: Backend) {
    let f = fx(backend).await;
    register(&f).await;
    let s = f.session("acme").await;
    let run = sandbox_run(&f, &s, None).await;
    let runtime_claims = || f.store.claim_runs(None, "runtime-1", 10, ttl());
    assert!(runtime_claims().await.unwrap().is_empty(), "provisioning");

    // A provision to retry later: neither due now nor ready.
    let work = work_for(&f, &run.id).await;
    let retry_at = f.store.now() + chrono::Duration::seconds(5);
    save_and_release(&f, &work, |r| {
        r.bind_idempotency_key = Some("bind-1".into());
        r.retry_count = 1;
        r.due_at = Some(retry_at);
    })
    .await;
    assert!(runtime_claims().await.unwrap().is_empty(), "not active");
    assert!(due_work(&f).await.is_empty(), "not due yet");

    f.advance(5);
    let work = work_for(&f, &run.id).await;
    let now = f.store.now();
    save_and_release(&f, &work, |r| {
        activate(r);
        r.due_at = Some(now);
    })
    .await;
    assert!(runtime_claims().await.unwrap().is_empty(), "active but due");
    assert_eq!(
        f.store.get_run(None, &run.id).await.unwrap().state,
        RunState::Queued
    );

    settle_due(&f, &run.id).await;
    let claims = runtime_claims().await.unwrap();
    assert_eq!(claims.len(), 1);
    let claim = &claims[0];
    assert_eq!(claim.run.id, run.id);
    assert_eq!(claim.kind, ClaimKind::Start);
    assert_eq!(claim.run.state, RunState::Running);
    assert_eq!(
        claim.sandbox,
        Some(ClaimSandbox {
            r#ref: sandbox_ref(&run.id),
            generation: 1,
            grant: String::new(),
            grant_generation: Some(7),
            grant_audience: "local".into(),
        })
    );
    assert_eq!(claim.expected.resolved_spec_hash, hash('a'));
    assert_eq!(claim.expected.spec_hash, Some(hash('1')));
    assert_eq!(claim.expected.policy_hash, Some(hash('2')));
}

async fn lifecycle_claims_lease_due_records_oldest_first(backend: Backend) {
    let f = fx(backend).await;
    register(&f).await;
    let s = f.session("acme").await;
    f.run(&s).await;
    let a = sandbox_run(&f, &s, None).await;
    f.advance(1);
    let b = sandbox_run(&f, &s, None).await;
    f.advance(1);
    let c = sandbox_run(&f, &s, None).await;
    let now = f.store.now();

    let first = f.store.claim_lifecycle_work("c1", 2, ttl()).await.unwrap();
    let ids: Vec<_> = first.iter().map(|w| w.run.id.clone()).collect();
    assert_eq!(ids, vec![a.id.clone(), b.id.clone()]);
    for w in &first {
        assert_eq!(w.tenant_id, "acme");
        assert_eq!(w.run.state, RunState::Queued);
        assert_eq!(w.record.run_id, w.run.id);
        assert_eq!(w.record.state, ResourceState::Provisioning);
        assert!(w.record.due_at.is_some_and(|d| d <= now));
        assert_eq!(w.lease.expires_at, now + ttl());
        assert!(w.jobs.is_empty() && w.descendants.is_empty() && w.suspension.is_none());
    }
    assert_ne!(first[0].lease.fencing_token, first[1].lease.fencing_token);
    let second = f.store.claim_lifecycle_work("c2", 10, ttl()).await.unwrap();
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].run.id, c.id);
    assert!(due_work(&f).await.is_empty(), "every due record is leased");

    // a: nothing left to do; b: look again in 100 s; c: still leased.
    save_and_release(&f, &first[0], settle).await;
    let b_due = now + chrono::Duration::seconds(100);
    save_and_release(&f, &first[1], |r| r.due_at = Some(b_due)).await;
    assert!(due_work(&f).await.is_empty());
    assert_eq!(
        f.store.next_lifecycle_due().await.unwrap(),
        Some(now + ttl()),
        "c is due but leased: look again when its lease expires"
    );

    f.advance(TTL);
    let taken = due_work(&f).await;
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].run.id, c.id);
    assert!(taken[0].lease.fencing_token > second[0].lease.fencing_token);
    assert_eq!(f.store.metrics().lease_takeovers.load(Ordering::Relaxed), 1);
    assert_eq!(f.store.metrics().lease_claims.load(Ordering::Relaxed), 4);
    assert_eq!(
        f.store.next_lifecycle_due().await.unwrap(),
        Some(f.store.now() + ttl())
    );

    // Once every lease has expired, the earlier due_at comes first, whatever the creation order.
    f.advance(100);
    let last = due_work(&f).await;
    let ids: Vec<_> = last.iter().map(|w| w.run.id.clone()).collect();
    assert_eq!(ids, vec![c.id, b.id]);
    for w in &last {
        save_and_release(&f, w, settle).await;
    }
    assert_eq!(f.store.next_lifecycle_due().await.unwrap(), None);

    assert!(f
        .store
        .claim_lifecycle_work(COORDINATOR, 0, ttl())
        .await
        .unwrap()
        .is_empty());
    match f.store.claim_lifecycle_work("no spaces", 1, ttl()).await {
        Err(StoreError::Invalid(e)) => assert_eq!(e.field, "holder"),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

async fn concurrent_coordinators_never_share_a_run(backend: Backend) {
    let f = fx(backend).await;
    register(&f).await;
    let s = f.session("acme").await;
    let mut all = HashSet::new();
    for _ in 0..20 {
        all.insert(sandbox_run(&f, &s, None).await.id);
    }
    let mut tasks = Vec::new();
    for w in 0..8 {
        let store = f.store.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let work = store
                    .claim_lifecycle_work(&format!("c{w}"), 3, ttl())
                    .await
                    .unwrap();
                if work.is_empty() {
                    return mine;
                }
                mine.extend(work.into_iter().map(|w| (w.run.id, w.lease.fencing_token)));
            }
        }));
    }
    let mut seen: HashMap<_, usize> = HashMap::new();
    let mut tokens = HashSet::new();
    for t in tasks {
        for (run, token) in t.await.unwrap() {
            *seen.entry(run).or_default() += 1;
            assert!(tokens.insert(token), "fencing token {token} granted twice");
        }
    }
    assert!(seen.values().all(|&n| n == 1), "no run was leased twice");
    assert_eq!(seen.keys().cloned().collect::<HashSet<_>>(), all);
    assert_eq!(f.store.metrics().lease_claims.load(Ordering::Relaxed), 20);
}

/// No use case makes a record due while a runtime holds its run; the test does it directly.
async fn make_due(f: &Fx, run: &RunId) {
    let pool = sqlx::AnyPool::connect(f.store.url()).await.unwrap();
    sqlx::query("UPDATE execution_resources SET due_at = $2 WHERE run_id = $1")
        .bind(run.as_str())
        .bind(f.store.now().timestamp_millis())
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
}

async fn runtime_and_coordinator_share_one_lease(backend: Backend) {
    let f = fx(backend).await;
    register(&f).await;
    let s = f.session("acme").await;
    let run = sandbox_run(&f, &s, None).await;

    // The coordinator holds the run: compute is ready, yet no runtime may claim it.
    let work = work_for(&f, &run.id).await;
    let mut ready = work.record.clone();
    activate(&mut ready);
    f.store
        .save_resource(&run.id, work.lease.fencing_token, &ready, RunEffect::None)
        .await
        .unwrap();
    assert!(f.claim_none().await);
    f.store
        .heartbeat(None, &work.lease.lease_id, work.lease.fencing_token, ttl())
        .await
        .unwrap();
    f.advance(TTL - 1);
    assert!(f.claim_none().await, "the heartbeat kept the lease");

    // The coordinator died: a runtime takes the lease over, with a newer token.
    f.advance(1);
    let claim = f.claim_one("acme").await;
    assert_eq!(claim.run.id, run.id);
    assert!(claim.lease.fencing_token > work.lease.fencing_token);
    assert_eq!(f.store.metrics().lease_takeovers.load(Ordering::Relaxed), 1);
    assert!(matches!(
        f.store
            .save_resource(&run.id, work.lease.fencing_token, &ready, RunEffect::None)
            .await,
        Err(StoreError::LeaseLost)
    ));

    // The runtime holds the run: even a due record is not lifecycle work.
    make_due(&f, &run.id).await;
    assert!(due_work(&f).await.is_empty());
    f.advance(TTL);
    let taken = work_for(&f, &run.id).await;
    assert_eq!(taken.run.state, RunState::Running);
    assert!(taken.lease.fencing_token > claim.lease.fencing_token);
    let complete = CompleteRun {
        fencing_token: claim.lease.fencing_token,
        output: json!({}),
    };
    assert!(matches!(
        f.store.complete_run(None, &run.id, &complete).await,
        Err(StoreError::LeaseLost)
    ));
}

impl Fx {
    /// No runtime claim is granted.
    async fn claim_none(&self) -> bool {
        self.store
            .claim_runs(None, "runtime-1", 10, ttl())
            .await
            .unwrap()
            .is_empty()
    }
}
