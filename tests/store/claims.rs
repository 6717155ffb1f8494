use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use sagents::domain::claim::ClaimKind;
use sagents::domain::commands::{CompleteRun, ConfirmResumed, CreateJob, FailRun};
use sagents::domain::run::{RunState, RunStatus};
use sagents::domain::sandbox::{
    LifecyclePolicy, ResolvedSandboxSpec, Resources, WorkspaceMode, SPEC_VERSION_V3,
};
use sagents::store::{Backend, StoreError};
use serde_json::json;

use super::{fx, hash, run_cmd, suspend_cmd, ttl, TTL};
use crate::on_both_backends;

on_both_backends!(
    claims_oldest_first_within_max_and_tenant,
    claims_take_runs_in_the_order_they_became_available,
    runs_with_a_sandbox_spec_wait,
    concurrent_claimers_never_share_a_run,
    stale_tokens_change_nothing,
    expired_leases_are_lost_and_taken_over,
    heartbeats_extend_the_lease,
    handed_back_leases_are_claimable_again,
    take_over_of_a_resumed_run_resumes_from_its_checkpoint,
);

fn complete(token: i64) -> CompleteRun {
    CompleteRun {
        fencing_token: token,
        output: json!({}),
    }
}

async fn claims_oldest_first_within_max_and_tenant(backend: Backend) {
    let f = fx(backend).await;
    let other = f.session("globex").await;
    let foreign = f.run(&other).await;
    let s = f.session("acme").await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        f.advance(1);
        ids.push(f.run(&s).await.id);
    }
    let work = f.store.hub().subscribe_work();

    let first = f
        .store
        .claim_runs(Some("acme"), "w1", 2, ttl())
        .await
        .unwrap();
    let got: Vec<_> = first.iter().map(|c| c.run.id.clone()).collect();
    assert_eq!(got, ids[..2]);
    for c in &first {
        assert_eq!(c.kind, ClaimKind::Start);
        assert_eq!(c.run.state, RunState::Running);
        assert_eq!(c.lease.expires_at, f.store.now() + ttl());
        assert_eq!(c.expected.resolved_spec_hash, hash('a'));
        assert_eq!(c.expected.spec_hash, None);
        assert!(c.checkpoint.is_none());
        assert!(c.sandbox.is_none());
    }
    assert!(first[0].lease.fencing_token < first[1].lease.fencing_token);
    assert_ne!(first[0].lease.lease_id, first[1].lease.lease_id);
    assert_eq!(
        f.snapshot(&s)
            .await
            .runs
            .iter()
            .map(|r| r.status)
            .collect::<Vec<_>>(),
        vec![RunStatus::Running, RunStatus::Running, RunStatus::Queued]
    );

    let rest = f
        .store
        .claim_runs(Some("acme"), "w1", 5, ttl())
        .await
        .unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].run.id, ids[2]);
    assert!(rest[0].lease.fencing_token > first[1].lease.fencing_token);
    f.nothing_claimable(Some("acme")).await;
    assert!(!work.has_changed().unwrap(), "claiming creates no new work");

    let any = f.store.claim_runs(None, "w2", 5, ttl()).await.unwrap();
    assert_eq!(any.len(), 1);
    assert_eq!(any[0].run.id, foreign.id);
    assert_eq!(f.store.metrics().lease_claims.load(Ordering::Relaxed), 4);
    assert_eq!(f.store.metrics().lease_takeovers.load(Ordering::Relaxed), 0);

    match f.store.claim_runs(None, "bad worker", 1, ttl()).await {
        Err(StoreError::Invalid(e)) => assert_eq!(e.field, "worker_id"),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

async fn claims_take_runs_in_the_order_they_became_available(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let a = f.run(&s).await;
    assert_eq!(f.claim_one("acme").await.run.id, a.id);
    f.advance(1);
    let b = f.run(&s).await;
    f.advance(TTL + 1);
    let c = f.run(&s).await;
    // Created by a replica whose clock runs ahead: claimable all the same.
    f.clock.advance(chrono::Duration::milliseconds(1500));
    let d = f.run(&s).await;
    f.clock.advance(chrono::Duration::milliseconds(-1500));

    // B waits since its creation, A since its lease expired, then C and D.
    let mut order = Vec::new();
    for _ in 0..4 {
        order.push(f.claim_one("acme").await.run.id);
    }
    assert_eq!(order, vec![b.id, a.id, c.id, d.id]);
    f.nothing_claimable(Some("acme")).await;
}

fn spec() -> ResolvedSandboxSpec {
    ResolvedSandboxSpec {
        spec_version: SPEC_VERSION_V3.into(),
        provider_id: "local".into(),
        spec_hash: hash('1'),
        policy_hash: hash('2'),
        workspace_mode: WorkspaceMode::Isolated,
        host_workspace: None,
        lifecycle: LifecyclePolicy::default(),
        resources: Resources::default(),
        metadata: json!({}),
    }
}

async fn runs_with_a_sandbox_spec_wait(backend: Backend) {
    let f = fx(backend).await;
    f.store
        .upsert_provider("local", "http://127.0.0.1:9/", "t", &json!({}), "u")
        .await
        .unwrap();
    let s = f.session("acme").await;
    let mut cmd = run_cmd(None);
    cmd.sandbox_spec = Some(spec());
    let run = f.store.create_run("acme", &s.id, &cmd).await.unwrap();
    assert_eq!(
        run.sandbox_spec,
        Some(serde_json::to_value(spec()).unwrap())
    );
    f.nothing_claimable(None).await;
    assert_eq!(
        f.store.get_run(None, &run.id).await.unwrap().state,
        RunState::Queued
    );
    let plain = f.run(&s).await;
    let claims = f.store.claim_runs(None, "w1", 10, ttl()).await.unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].run.id, plain.id);
}

async fn concurrent_claimers_never_share_a_run(backend: Backend) {
    let f = fx(backend).await;
    let a = f.session("acme").await;
    let b = f.session("acme").await;
    let mut all = HashSet::new();
    for i in 0..40 {
        let s = if i % 2 == 0 { &a } else { &b };
        all.insert(f.run(s).await.id);
    }
    let mut tasks = Vec::new();
    for w in 0..8 {
        let store = f.store.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let claims = store
                    .claim_runs(Some("acme"), &format!("w{w}"), 3, super::ttl())
                    .await
                    .unwrap();
                if claims.is_empty() {
                    return mine;
                }
                mine.extend(
                    claims
                        .into_iter()
                        .map(|c| (c.run.id, c.lease.fencing_token)),
                );
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
    assert_eq!(seen.len(), 40, "every run was claimed");
    assert!(seen.values().all(|&n| n == 1), "no run was claimed twice");
    assert_eq!(seen.keys().cloned().collect::<HashSet<_>>(), all);
    assert_eq!(f.store.metrics().lease_claims.load(Ordering::Relaxed), 40);
    f.nothing_claimable(None).await;
}

async fn stale_tokens_change_nothing(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let claim = f.claimed(&s).await;
    let run_id = &claim.run.id;
    let stale = claim.lease.fencing_token + 1000;
    let before_run = f.store.get_run(None, run_id).await.unwrap();
    let before = f.snapshot(&s).await;

    let results = [
        f.store
            .complete_run(Some("acme"), run_id, &complete(stale))
            .await
            .map(|_| ()),
        f.store
            .fail_run(
                Some("acme"),
                run_id,
                &FailRun {
                    fencing_token: stale,
                    error: json!({ "code": "x" }),
                },
            )
            .await
            .map(|_| ()),
        f.store
            .suspend_run(Some("acme"), run_id, &suspend_cmd(stale, 1, true))
            .await
            .map(|_| ()),
        f.store
            .create_job(
                Some("acme"),
                run_id,
                &CreateJob {
                    fencing_token: stale,
                    kind: "shell".into(),
                    payload: json!({}),
                    pause_behavior: None,
                    execution_affinity: None,
                },
            )
            .await
            .map(|_| ()),
        f.store
            .heartbeat(Some("acme"), &claim.lease.lease_id, stale, ttl())
            .await
            .map(|_| ()),
    ];
    for r in results {
        assert!(matches!(r, Err(StoreError::LeaseLost)), "{r:?}");
    }
    assert_eq!(
        f.store.metrics().fenced_rejections.load(Ordering::Relaxed),
        5
    );
    assert_eq!(f.store.get_run(None, run_id).await.unwrap(), before_run);
    assert_eq!(f.snapshot(&s).await, before);
    assert!(f
        .store
        .list_jobs(Some("acme"), run_id)
        .await
        .unwrap()
        .is_empty());

    // Another tenant cannot even see the run.
    assert!(matches!(
        f.store
            .complete_run(Some("globex"), run_id, &complete(claim.lease.fencing_token))
            .await,
        Err(StoreError::NotFound("run"))
    ));
    f.store
        .complete_run(Some("acme"), run_id, &complete(claim.lease.fencing_token))
        .await
        .unwrap();
}

async fn expired_leases_are_lost_and_taken_over(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let old = f.claimed(&s).await;
    let run_id = old.run.id.clone();
    let before = f.snapshot(&s).await;

    f.advance(TTL);
    assert!(matches!(
        f.store
            .complete_run(Some("acme"), &run_id, &complete(old.lease.fencing_token))
            .await,
        Err(StoreError::LeaseLost)
    ));
    assert!(matches!(
        f.store
            .heartbeat(
                Some("acme"),
                &old.lease.lease_id,
                old.lease.fencing_token,
                ttl()
            )
            .await,
        Err(StoreError::LeaseLost)
    ));

    let new = f
        .store
        .claim_runs(Some("acme"), "w2", 1, ttl())
        .await
        .unwrap()
        .remove(0);
    assert_eq!(new.run.id, run_id);
    assert_eq!(new.kind, ClaimKind::Start, "no checkpoint yet: start again");
    assert_eq!(new.run.state, RunState::Running);
    assert_ne!(new.lease.lease_id, old.lease.lease_id);
    assert!(new.lease.fencing_token > old.lease.fencing_token);
    assert_eq!(f.store.metrics().lease_takeovers.load(Ordering::Relaxed), 1);
    assert_eq!(f.snapshot(&s).await, before, "a take-over is not visible");
    let log = f.store.list_session_log(None, &s.id, 0, 100).await.unwrap();
    let taken = log
        .iter()
        .find(|e| e.r#type == "lease.taken_over")
        .expect("a lease.taken_over entry for operators");
    assert_eq!(taken.data["run_id"], json!(run_id));
    let seen = f.store.list_events(Some("acme"), &s.id, 0, 100).await;
    assert!(
        seen.unwrap()
            .iter()
            .all(|e| !e.r#type.starts_with("lease.")),
        "a frontend never sees it"
    );

    assert!(matches!(
        f.store
            .complete_run(Some("acme"), &run_id, &complete(old.lease.fencing_token))
            .await,
        Err(StoreError::LeaseLost)
    ));
    let done = f
        .store
        .complete_run(Some("acme"), &run_id, &complete(new.lease.fencing_token))
        .await
        .unwrap();
    assert_eq!(done.state, RunState::Completed);
}

async fn heartbeats_extend_the_lease(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let claim = f.claimed(&s).await;
    let (lease, token) = (&claim.lease.lease_id, claim.lease.fencing_token);

    f.advance(TTL - 10);
    let expires = f
        .store
        .heartbeat(Some("acme"), lease, token, ttl())
        .await
        .unwrap()
        .expires_at;
    assert_eq!(expires, f.store.now() + ttl());
    assert!(matches!(
        f.store.heartbeat(Some("globex"), lease, token, ttl()).await,
        Err(StoreError::LeaseLost)
    ));

    // Past the first expiry but within the extension: still the holder.
    f.advance(20);
    f.nothing_claimable(None).await;
    let done = f
        .store
        .complete_run(Some("acme"), &claim.run.id, &complete(token))
        .await
        .unwrap();
    assert_eq!(done.state, RunState::Completed);
    assert!(matches!(
        f.store.heartbeat(Some("acme"), lease, token, ttl()).await,
        Err(StoreError::LeaseLost)
    ));
}

async fn handed_back_leases_are_claimable_again(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    f.run(&s).await;
    f.run(&s).await;
    let first = f
        .store
        .claim_runs(Some("acme"), "w1", 5, ttl())
        .await
        .unwrap();
    assert_eq!(first.len(), 2);
    let work = f.store.hub().subscribe_work();

    assert_eq!(f.store.release_leases_of("w1").await.unwrap(), 2);
    assert!(work.has_changed().unwrap(), "handed-back runs are new work");
    assert_eq!(f.store.release_leases_of("w1").await.unwrap(), 0);
    assert!(matches!(
        f.store
            .complete_run(
                Some("acme"),
                &first[0].run.id,
                &complete(first[0].lease.fencing_token)
            )
            .await,
        Err(StoreError::LeaseLost)
    ));

    let again = f
        .store
        .claim_runs(Some("acme"), "w2", 5, ttl())
        .await
        .unwrap();
    assert_eq!(
        again.iter().map(|c| &c.run.id).collect::<Vec<_>>(),
        first.iter().map(|c| &c.run.id).collect::<Vec<_>>()
    );
    assert!(again.iter().all(|c| c.kind == ClaimKind::Start));
    assert!(again[0].lease.fencing_token > first[1].lease.fencing_token);
    assert_eq!(
        f.store.metrics().lease_takeovers.load(Ordering::Relaxed),
        0,
        "a handed-back lease is not a take-over"
    );
}

async fn take_over_of_a_resumed_run_resumes_from_its_checkpoint(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let (run_id, _) = f.suspended(&s, false).await;
    f.store.resume_run(None, &s.id, &run_id, "u").await.unwrap();
    let first = f.claim_one("acme").await;
    f.store
        .confirm_resumed(
            Some("acme"),
            &run_id,
            &ConfirmResumed {
                fencing_token: first.lease.fencing_token,
                resolved_spec_hash: hash('a'),
                spec_hash: None,
                policy_hash: None,
            },
        )
        .await
        .unwrap();
    f.advance(TTL + 1);
    let second = f.claim_one("acme").await;
    assert_eq!(second.run.id, run_id);
    assert_eq!(second.run.state, RunState::Running);
    assert_eq!(second.kind, ClaimKind::Resume);
    assert_eq!(second.checkpoint.as_ref().map(|c| c.sequence), Some(1));
    assert!(second.lease.fencing_token > first.lease.fencing_token);
}
