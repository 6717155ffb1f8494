use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Duration as StdDuration;

use futures::future::join_all;

use sagents::domain::commands::{CompleteRun, ConfirmResumed, CreateJob, CreateSession};
use sagents::domain::job::JobState;
use sagents::domain::run::RunStatus;
use sagents::domain::snapshot::Snapshot;
use sagents::domain::SessionId;
use sagents::store::{Backend, StoreError};
use serde_json::json;

use super::{fx, hash, reply, run_cmd, suspend_cmd, ttl};
use crate::on_both_backends;

on_both_backends!(
    sessions_are_created_and_isolated_by_tenant,
    parent_sessions_must_belong_to_the_same_tenant,
    snapshot_lists_runs_and_pending_interactions_in_order,
    revision_moves_only_with_visible_changes,
    events_log_every_step_in_sequence,
    concurrent_readers_of_a_changed_session_make_one_read,
);

async fn sessions_are_created_and_isolated_by_tenant(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    assert_eq!(s.revision, 1);
    assert_eq!(s.title.as_deref(), Some("a session"));
    assert_eq!(s.metadata, json!({ "k": "v" }));
    assert_eq!(s.created_at, f.store.now());
    assert_eq!(f.store.get_session(Some("acme"), &s.id).await.unwrap(), s);
    assert_eq!(f.store.get_session(None, &s.id).await.unwrap(), s);

    let other = Some("globex");
    assert!(matches!(
        f.store.get_session(other, &s.id).await,
        Err(StoreError::NotFound("session"))
    ));
    assert!(matches!(
        f.store.session_revision(other, &s.id).await,
        Err(StoreError::NotFound("session"))
    ));
    assert!(matches!(
        f.store.snapshot(other, &s.id).await,
        Err(StoreError::NotFound("session"))
    ));
    assert!(matches!(
        f.store.list_events(other, &s.id, 0, 10).await,
        Err(StoreError::NotFound("session"))
    ));
    assert!(matches!(
        f.store.create_run("globex", &s.id, &run_cmd(None)).await,
        Err(StoreError::NotFound("session"))
    ));
    assert!(matches!(
        f.store.get_session(None, &SessionId::new()).await,
        Err(StoreError::NotFound("session"))
    ));
    assert_eq!(
        f.store.session_revision(Some("acme"), &s.id).await.unwrap(),
        1
    );

    let bad_metadata = CreateSession {
        title: None,
        metadata: json!([1, 2]),
        parent_session_id: None,
    };
    match f.store.create_session("acme", &bad_metadata).await {
        Err(StoreError::Invalid(e)) => assert_eq!(e.field, "metadata"),
        other => panic!("expected Invalid, got {other:?}"),
    }
    match f
        .store
        .create_session(
            "not a tenant",
            &CreateSession {
                title: None,
                metadata: json!({}),
                parent_session_id: None,
            },
        )
        .await
    {
        Err(StoreError::Invalid(e)) => assert_eq!(e.field, "tenant"),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

async fn parent_sessions_must_belong_to_the_same_tenant(backend: Backend) {
    let f = fx(backend).await;
    let parent = f.session("acme").await;
    let foreign = f.session("globex").await;
    let child = |p: &SessionId| CreateSession {
        title: None,
        metadata: json!({}),
        parent_session_id: Some(p.clone()),
    };
    for missing in [&foreign.id, &SessionId::new()] {
        match f.store.create_session("acme", &child(missing)).await {
            Err(StoreError::Invalid(e)) => assert_eq!(e.field, "parent_session_id"),
            other => panic!("expected Invalid, got {other:?}"),
        }
    }
    let ok = f
        .store
        .create_session("acme", &child(&parent.id))
        .await
        .unwrap();
    assert_eq!(ok.parent_session_id.as_ref(), Some(&parent.id));
}

async fn snapshot_lists_runs_and_pending_interactions_in_order(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    // Two runs suspended at different times, then two runs created in the same millisecond.
    let (first, _) = f.suspended(&s, true).await;
    f.advance(1);
    let (second, _) = f.suspended(&s, true).await;
    let noise = f.session("acme").await;
    f.suspended(&noise, true).await;
    f.advance(1);
    let queued = f.run(&s).await;
    let child = f
        .store
        .create_run("acme", &s.id, &run_cmd(Some(queued.id.clone())))
        .await
        .unwrap();

    let snap = f.snapshot(&s).await;
    assert_eq!(snap.session.id, s.id);
    assert_eq!(snap.session.title.as_deref(), Some("a session"));
    let runs: Vec<_> = snap
        .runs
        .iter()
        .map(|r| (r.id.clone(), r.status, r.parent_run_id.clone()))
        .collect();
    assert_eq!(
        runs,
        vec![
            (first.clone(), RunStatus::WaitingForInput, None),
            (second.clone(), RunStatus::WaitingForInput, None),
            (queued.id.clone(), RunStatus::Queued, None),
            (child.id.clone(), RunStatus::Queued, Some(queued.id.clone())),
        ]
    );
    let pending: Vec<_> = snap
        .pending_interactions
        .iter()
        .map(|i| i.run_id.clone())
        .collect();
    assert_eq!(pending, vec![first, second]);
    let p = &snap.pending_interactions[0];
    assert_eq!(p.allowed_decisions, vec!["approve", "deny"]);
    assert_eq!(p.payload, json!({ "command": "rm -rf build" }));
    assert_eq!(p.revision, 1);
    assert!(snap.pending_interactions[0].requested_at < snap.pending_interactions[1].requested_at);

    // The wire form carries nothing beyond the documented fields.
    let v = serde_json::to_value(&snap).unwrap();
    let keys = |v: &serde_json::Value| -> BTreeSet<String> {
        v.as_object().unwrap().keys().cloned().collect()
    };
    assert_eq!(
        keys(&v),
        ["pending_interactions", "runs", "session"]
            .map(String::from)
            .into()
    );
    assert_eq!(
        keys(&v["runs"][0]),
        ["created_at", "id", "parent_run_id", "status", "updated_at"]
            .map(String::from)
            .into()
    );
    assert_eq!(
        keys(&v["session"]),
        [
            "created_at",
            "id",
            "metadata",
            "revision",
            "title",
            "updated_at"
        ]
        .map(String::from)
        .into()
    );
}

fn bytes(s: &Snapshot) -> Vec<u8> {
    serde_json::to_vec(s).unwrap()
}

async fn revision_moves_only_with_visible_changes(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let hub = f.store.hub().clone();
    let mut watch = hub.subscribe_session(s.id.as_str());
    let mut work = hub.subscribe_work();
    let zero = StdDuration::ZERO;

    let run = f.run(&s).await;
    assert_eq!(f.snapshot(&s).await.session.revision, 2);
    assert!(
        watch.changed(zero).await,
        "creating a run publishes the session"
    );
    assert!(work.has_changed().unwrap(), "a new run is new work");
    work.borrow_and_update();

    f.advance(1);
    let claim = f.claim_one("acme").await;
    let token = claim.lease.fencing_token;
    let after_claim = f.snapshot(&s).await;
    assert_eq!(
        after_claim.session.revision, 3,
        "queued → running is visible"
    );
    assert_eq!(after_claim.runs[0].status, RunStatus::Running);
    assert_eq!(after_claim.runs[0].updated_at, f.store.now());
    assert_eq!(claim.run.revision, run.revision + 1);
    assert!(watch.changed(zero).await);

    // None of these is visible: the snapshot keeps its bytes and its revision.
    f.advance(5);
    f.store
        .heartbeat(Some("acme"), &claim.lease.lease_id, token, ttl())
        .await
        .unwrap();
    let job = f
        .store
        .create_job(
            Some("acme"),
            &run.id,
            &CreateJob {
                fencing_token: token,
                kind: "shell".into(),
                payload: json!({}),
                pause_behavior: None,
                execution_affinity: None,
            },
        )
        .await
        .unwrap();
    f.store
        .update_job(Some("acme"), &run.id, &job.id, JobState::Completed)
        .await
        .unwrap();
    assert_eq!(
        f.store
            .idempotency_begin("tok", "k", "h", chrono::Duration::seconds(75))
            .await
            .unwrap(),
        sagents::store::IdempotencyBegin::Started
    );
    f.store
        .idempotency_finish("tok", "k", 201, b"{}")
        .await
        .unwrap();
    f.store
        .upsert_provider("local", "http://127.0.0.1:1", "secret", &json!({}), "u")
        .await
        .unwrap();
    f.store.setting_or_init("grant_secret", "x").await.unwrap();
    f.store
        .list_events(Some("acme"), &s.id, 0, 100)
        .await
        .unwrap();
    let unchanged = f.snapshot(&s).await;
    assert_eq!(unchanged, after_claim);
    assert_eq!(bytes(&unchanged), bytes(&after_claim));
    assert!(!watch.changed(zero).await, "nothing visible was published");
    assert_eq!(
        f.store.get_run(None, &run.id).await.unwrap().revision,
        claim.run.revision
    );

    // Suspending with an interaction is one visible change: one bump.
    f.store
        .suspend_run(Some("acme"), &run.id, &suspend_cmd(token, 1, true))
        .await
        .unwrap();
    let suspended = f.snapshot(&s).await;
    assert_eq!(suspended.session.revision, 4);
    assert_ne!(bytes(&suspended), bytes(&unchanged));
    assert!(watch.changed(zero).await);

    let interaction = suspended.pending_interactions[0].id.clone();
    work.borrow_and_update();
    let lifecycle = hub.subscribe_lifecycle_work();
    f.store
        .reply_interaction(
            Some("acme"),
            &s.id,
            &interaction,
            &reply("approve"),
            "tok_user",
        )
        .await
        .unwrap();
    assert_eq!(f.snapshot(&s).await.session.revision, 5);
    assert!(watch.changed(zero).await);
    assert!(
        work.has_changed().unwrap(),
        "a resuming run is runtimes' work"
    );
    assert!(
        !lifecycle.has_changed().unwrap(),
        "without a sandbox nothing became due: the lifecycle pool sleeps"
    );

    // Claiming a resuming run is internal: it stays `resuming` to the user.
    let before_resume_claim = f.snapshot(&s).await;
    let resume = f.claim_one("acme").await;
    assert_eq!(bytes(&f.snapshot(&s).await), bytes(&before_resume_claim));
    assert!(!watch.changed(zero).await);

    let token = resume.lease.fencing_token;
    f.store
        .confirm_resumed(
            Some("acme"),
            &run.id,
            &ConfirmResumed {
                fencing_token: token,
                resolved_spec_hash: hash('a'),
                spec_hash: None,
                policy_hash: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(f.snapshot(&s).await.session.revision, 6);
    f.store
        .complete_run(
            Some("acme"),
            &run.id,
            &CompleteRun {
                fencing_token: token,
                output: json!({ "answer": 42 }),
            },
        )
        .await
        .unwrap();
    let done = f.snapshot(&s).await;
    assert_eq!(done.session.revision, 7);
    assert_eq!(done.runs[0].status, RunStatus::Completed);
    assert_eq!(
        f.store.session_revision(Some("acme"), &s.id).await.unwrap(),
        7
    );
}

async fn events_log_every_step_in_sequence(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let (run_id, _) = f.suspended(&s, true).await;
    let interaction = f.pending_interaction(&s).await;
    let mut answer = reply("approve");
    answer.payload = json!({ "password": "hunter2" });
    f.store
        .reply_interaction(Some("acme"), &s.id, &interaction, &answer, "tok_user")
        .await
        .unwrap();
    f.store
        .cancel_run(Some("acme"), &s.id, &run_id, "u")
        .await
        .unwrap();

    let events = f
        .store
        .list_events(Some("acme"), &s.id, 0, 100)
        .await
        .unwrap();
    let types: Vec<_> = events.iter().map(|e| e.r#type.as_str()).collect();
    assert_eq!(
        types,
        vec![
            "session.created",
            "run.created",
            "run.started",
            "run.suspended",
            "interaction.created",
            "interaction.resolved",
            "run.resuming",
            "suspension.cancelled",
            "run.cancelled",
        ]
    );
    let sequences: Vec<_> = events.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, (1..=events.len() as i64).collect::<Vec<_>>());
    assert!(events.iter().all(|e| e.session_id == s.id));
    assert_eq!(events[2].data["run_id"], json!(run_id));
    let all = serde_json::to_string(&events).unwrap();
    assert!(
        !all.contains("hunter2"),
        "event data never carries reply payloads"
    );

    let page = f.store.list_events(None, &s.id, 3, 2).await.unwrap();
    assert_eq!(
        page.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        vec![4, 5]
    );
    assert!(f
        .store
        .list_events(Some("acme"), &s.id, events.len() as i64, 10)
        .await
        .unwrap()
        .is_empty());
}

async fn concurrent_readers_of_a_changed_session_make_one_read(backend: Backend) {
    let f = fx(backend).await;
    if backend == Backend::Postgres {
        // As the change listener does once it listens: reads are trusted for a while.
        f.store
            .hub()
            .cache
            .set_trust(Some(StdDuration::from_secs(60)));
    }
    let s = f.session("acme").await;
    let other = f.session("acme").await;
    f.snapshot(&s).await;
    let reads = || f.store.metrics().snapshot_reads.load(Ordering::Relaxed);
    let before = reads();
    f.snapshot(&s).await;
    assert_eq!(
        reads(),
        before,
        "an unchanged session is read from the cache"
    );

    // A change: every reader waiting on it then wants the new revision at once.
    let run = f.run(&s).await;
    let before = reads();
    let snaps = join_all((0..20).map(|_| f.store.snapshot(Some("acme"), &s.id))).await;
    assert_eq!(reads(), before + 1, "twenty readers, one database read");
    for snap in &snaps {
        let snap = snap.as_ref().unwrap();
        assert_eq!(snap.runs.len(), 1);
        assert_eq!(snap.runs[0].id, run.id);
    }
    // Turns are per session: readers of another session do not wait for this one.
    let before = reads();
    let (a, b) = tokio::join!(f.store.snapshot(Some("acme"), &other.id), async {
        f.run(&s).await;
        f.store.snapshot(Some("acme"), &s.id).await
    });
    assert_eq!(a.unwrap().runs.len(), 0);
    assert_eq!(b.unwrap().runs.len(), 2);
    assert_eq!(reads(), before + 2);
    assert!(matches!(
        f.store.snapshot(Some("globex"), &s.id).await,
        Err(StoreError::NotFound("session"))
    ));
}
