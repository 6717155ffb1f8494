//! Concurrent record saves and lease hand-backs share transactions (the group commit) and
//! one claim leases many runs with set-based reads; every write still gets its own fence,
//! its own version check and its own answer.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use futures::future::join_all;
use sagents::domain::commands::CreateJob;
use sagents::domain::job::PauseBehavior;
use sagents::domain::resource::ExecutionResourceRecord;
use sagents::domain::resource::ResourceState;
use sagents::domain::resource::RunEffect;
use sagents::store::{Backend, StoreError};
use serde_json::json;

use super::{
    activate, due_sandbox_runs, due_work, register, release, sandbox_run, save_and_release,
    work_for,
};
use crate::on_both_backends;
use crate::store::{fx, suspend_cmd, Fx};

on_both_backends!(
    a_claim_defers_the_record_until_its_lease_ends,
    concurrent_saves_are_grouped_and_answered_one_by_one,
    one_claim_reads_each_runs_own_jobs_children_and_suspension,
);

/// Every event of every session, by session: (sequence, type).
async fn events(
    f: &Fx,
    sessions: &[sagents::domain::session::Session],
) -> BTreeMap<String, Vec<(i64, String)>> {
    let mut out = BTreeMap::new();
    for s in sessions {
        let list = f
            .store
            .list_events(None, &s.id, 0, 1000)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.sequence, e.r#type))
            .collect();
        out.insert(s.id.to_string(), list);
    }
    out
}

async fn a_claim_defers_the_record_until_its_lease_ends(backend: Backend) {
    let f = fx(backend).await;
    register(&f).await;
    let s = f.session("acme").await;
    let run = sandbox_run(&f, &s, None).await;
    let work = work_for(&f, &run.id).await;
    let stored = f.store.get_resource(&run.id).await.unwrap();
    assert_eq!(stored.due_at, Some(work.lease.expires_at));
    assert_eq!(
        stored.version, work.record.version,
        "deferring is not a change"
    );
    assert!(due_work(&f).await.is_empty());

    // Handed back untouched: due again at once.
    f.advance(1);
    f.store.release_lease(&run.id, &work.lease).await.unwrap();
    let stored = f.store.get_resource(&run.id).await.unwrap();
    assert_eq!(stored.due_at, Some(f.store.now()));

    // Handed back after a save that set its own due time: that time stays.
    let work = work_for(&f, &run.id).await;
    let mut record = work.record.clone();
    let retry_at = f.store.now() + chrono::Duration::seconds(5);
    record.retry_count = 1;
    record.next_retry_at = Some(retry_at);
    record.due_at = Some(retry_at);
    f.store
        .save_resource(&run.id, work.lease.fencing_token, &record, RunEffect::None)
        .await
        .unwrap();
    f.store.release_lease(&run.id, &work.lease).await.unwrap();
    assert_eq!(
        f.store.get_resource(&run.id).await.unwrap().due_at,
        Some(retry_at)
    );
    assert!(due_work(&f).await.is_empty());
    f.advance(5);
    assert_eq!(work_for(&f, &run.id).await.record.retry_count, 1);
}

async fn concurrent_saves_are_grouped_and_answered_one_by_one(backend: Backend) {
    let f = fx(backend).await;
    register(&f).await;
    // Two runs per session, so one group writes several events into the same session log.
    let mut sessions = Vec::new();
    let mut runs = Vec::new();
    for _ in 0..6 {
        let s = f.session("acme").await;
        runs.push(sandbox_run(&f, &s, None).await);
        runs.push(sandbox_run(&f, &s, None).await);
        sessions.push(s);
    }
    let work = due_work(&f).await;
    assert_eq!(work.len(), runs.len());
    let before_events = events(&f, &sessions).await;
    let revisions: Vec<i64> = join_all(sessions.iter().map(|s| f.snapshot(s)))
        .await
        .iter()
        .map(|snap| snap.session.revision)
        .collect();
    let metrics = f.store.metrics().clone();
    let rejected = metrics.fenced_rejections.load(Ordering::Relaxed);
    let groups = metrics.group_commits.load(Ordering::Relaxed);

    // Item 0 has a stale token, item 1 a stale version; the others are good.
    let saves = work.iter().enumerate().map(|(i, w)| {
        let mut record = w.record.clone();
        activate(&mut record);
        let token = w.lease.fencing_token + if i == 0 { 1000 } else { 0 };
        if i == 1 {
            record.version += 5;
        }
        let store = f.store.clone();
        let run_id = w.run.id.clone();
        async move {
            store
                .save_resource(&run_id, token, &record, RunEffect::None)
                .await
        }
    });
    let answers = join_all(saves).await;

    assert!(matches!(answers[0], Err(StoreError::LeaseLost)));
    match &answers[1] {
        Err(StoreError::VersionConflict { current, expected }) => assert_ne!(current, expected),
        other => panic!("expected a version conflict, got {other:?}"),
    }
    for (w, answer) in work.iter().zip(&answers).skip(2) {
        let saved = answer.as_ref().expect("a good save is written");
        assert_eq!(saved.run_id, w.run.id);
        assert_eq!(saved.state, ResourceState::Active);
        assert_eq!(saved.version, w.record.version + 1);
        assert_eq!(f.store.get_resource(&w.run.id).await.unwrap(), *saved);
    }
    for w in &work[..2] {
        let untouched = ExecutionResourceRecord {
            due_at: Some(w.lease.expires_at),
            ..w.record.clone()
        };
        assert_eq!(f.store.get_resource(&w.run.id).await.unwrap(), untouched);
    }
    assert_eq!(
        metrics.fenced_rejections.load(Ordering::Relaxed),
        rejected + 1
    );
    let used = metrics.group_commits.load(Ordering::Relaxed) - groups;
    assert!(
        (1..answers.len() as u64).contains(&used),
        "{} concurrent saves took {used} transactions",
        answers.len()
    );

    // Each written run's resource history got one `lifecycle.active`, numbered by the record's
    // version; the session logs and revisions did not move: compute changes are not visible.
    assert_eq!(events(&f, &sessions).await, before_events);
    for (w, answer) in work[2..].iter().zip(&answers[2..]) {
        let history = f
            .store
            .list_resource_events(&w.run.id, 0, 100)
            .await
            .unwrap();
        let last = history.last().expect("an entry for the write");
        assert_eq!(last.r#type, "lifecycle.active");
        assert_eq!(last.sequence, answer.as_ref().unwrap().version);
    }
    let now: Vec<i64> = join_all(sessions.iter().map(|s| f.snapshot(s)))
        .await
        .iter()
        .map(|snap| snap.session.revision)
        .collect();
    assert_eq!(now, revisions);

    // Hand-backs group too; a stale token hands nothing back.
    let backs = work.iter().enumerate().map(|(i, w)| {
        let store = f.store.clone();
        let run_id = w.run.id.clone();
        let mut lease = w.lease.clone();
        if i == 0 {
            lease.fencing_token += 1000;
        }
        async move { store.release_lease(&run_id, &lease).await }
    });
    assert!(join_all(backs).await.iter().all(Result::is_ok));
    // Run 1 (not written, still due) was handed back: claimable at once. Run 0 still holds
    // its lease (handed back with a stale token) until it expires.
    let leftover: Vec<_> = due_work(&f).await.into_iter().map(|w| w.run.id).collect();
    assert_eq!(leftover, vec![work[1].run.id.clone()]);
    f.advance(crate::store::TTL);
    let mut again: Vec<_> = due_work(&f).await.into_iter().map(|w| w.run.id).collect();
    again.sort();
    let mut expected = vec![work[0].run.id.clone(), work[1].run.id.clone()];
    expected.sort();
    assert_eq!(again, expected);
}

// On one thread, so every save is queued before any group is written: which saves share a
// group is then fixed.
#[tokio::test]
async fn a_write_sqlite_refuses_fails_alone() {
    a_write_the_database_refuses_fails_alone(Backend::Sqlite).await
}

#[tokio::test]
async fn a_write_postgres_refuses_fails_alone() {
    a_write_the_database_refuses_fails_alone(Backend::Postgres).await
}

/// A trigger that makes the database refuse any record update to `generation`.
async fn refuse_generation(f: &Fx, generation: i64) {
    let raw = sqlx::AnyPool::connect(f.store.url()).await.unwrap();
    let statements = match f.store.backend() {
        Backend::Sqlite => vec![format!(
            "CREATE TRIGGER refuse BEFORE UPDATE ON execution_resources \
             WHEN NEW.generation = {generation} BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )],
        Backend::Postgres => vec![
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'refused'; END $$"
                .to_owned(),
            format!(
                "CREATE TRIGGER refuse BEFORE UPDATE ON execution_resources FOR EACH ROW \
                 WHEN (NEW.generation = {generation}) EXECUTE FUNCTION refuse()"
            ),
        ],
    };
    for sql in statements {
        sqlx::query(&sql).execute(&raw).await.unwrap();
    }
    raw.close().await;
}

async fn a_write_the_database_refuses_fails_alone(backend: Backend) {
    let f = fx(backend).await;
    register(&f).await;
    let s = f.session("acme").await;
    let work = due_sandbox_runs(&f, &s, 8).await;
    refuse_generation(&f, 999).await;
    let metrics = f.store.metrics().clone();
    let fallbacks = metrics.group_fallbacks.load(Ordering::Relaxed);

    // The database refuses the last item, which fails its whole statement. The first saves
    // take every free writer (one on SQLite, four on PostgreSQL) alone while the others
    // queue, so the last shares a group with the ones queued before it.
    const LAST: usize = 7;
    let saves = work.iter().enumerate().map(|(i, w)| {
        let mut record = w.record.clone();
        activate(&mut record);
        if i == LAST {
            record.generation = 999;
        }
        let store = f.store.clone();
        let (run_id, token) = (w.run.id.clone(), w.lease.fencing_token);
        async move {
            store
                .save_resource(&run_id, token, &record, RunEffect::None)
                .await
        }
    });
    let answers = join_all(saves).await;

    assert!(
        matches!(answers[LAST], Err(StoreError::Database(_))),
        "{:?}",
        answers[LAST]
    );
    let stored = f.store.get_resource(&work[LAST].run.id).await.unwrap();
    assert_eq!(
        (stored.state, stored.version),
        (work[LAST].record.state, work[LAST].record.version),
        "the refused write changed nothing"
    );
    for (i, (w, answer)) in work.iter().zip(&answers).enumerate() {
        if i == LAST {
            continue;
        }
        let saved = answer.as_ref().expect("the others are written");
        assert_eq!(
            (saved.state, saved.version),
            (ResourceState::Active, w.record.version + 1)
        );
        assert_eq!(f.store.get_resource(&w.run.id).await.unwrap(), *saved);
    }
    assert_eq!(
        metrics.group_fallbacks.load(Ordering::Relaxed),
        fallbacks + 1,
        "the group that held the refused write failed once, then wrote each alone"
    );
    let mut active = 0;
    for w in &work {
        let history = f
            .store
            .list_resource_events(&w.run.id, 0, 100)
            .await
            .unwrap();
        active += history
            .iter()
            .filter(|e| e.r#type == "lifecycle.active")
            .count();
    }
    assert_eq!(
        active, 7,
        "one event per written save, none for the refused one"
    );
}

async fn one_claim_reads_each_runs_own_jobs_children_and_suspension(backend: Backend) {
    let f = fx(backend).await;
    register(&f).await;
    let s = f.session("acme").await;
    // Two parents, each with a child whose compute is released; the first parent has a job.
    let mut parents = Vec::new();
    let mut children = Vec::new();
    for _ in 0..2 {
        let parent = sandbox_run(&f, &s, None).await;
        let w = work_for(&f, &parent.id).await;
        save_and_release(&f, &w, activate).await;
        let child = sandbox_run(&f, &s, Some(parent.id.clone())).await;
        let w = work_for(&f, &child.id).await;
        let now = f.store.now();
        save_and_release(&f, &w, |r| release(r, now)).await;
        parents.push(parent);
        children.push(child);
    }
    let claims = f
        .store
        .claim_runs(Some("acme"), "runtime-1", 10, crate::store::ttl())
        .await
        .unwrap();
    let claim_of = |id: &sagents::domain::RunId| {
        claims
            .iter()
            .find(|c| &c.run.id == id)
            .expect("the parent is claimable")
            .lease
            .fencing_token
    };
    let job = f
        .store
        .create_job(
            Some("acme"),
            &parents[0].id,
            &CreateJob {
                fencing_token: claim_of(&parents[0].id),
                kind: "sandbox.exec".into(),
                payload: json!({ "cmd": "make" }),
                pause_behavior: Some(PauseBehavior::Continue),
                execution_affinity: None,
            },
        )
        .await
        .unwrap();
    for (i, p) in parents.iter().enumerate() {
        f.store
            .suspend_run(
                Some("acme"),
                &p.id,
                &suspend_cmd(claim_of(&p.id), i as i64 + 1, true),
            )
            .await
            .unwrap();
    }

    let work = due_work(&f).await;
    let ids: Vec<_> = work.iter().map(|w| w.run.id.clone()).collect();
    assert_eq!(ids.len(), 2, "both parents are due: {ids:?}");
    for w in &work {
        let i = parents.iter().position(|p| p.id == w.run.id).unwrap();
        assert_eq!(
            w.descendants,
            vec![(children[i].id.clone(), ResourceState::Released)]
        );
        let suspension = w.suspension.as_ref().expect("its suspension");
        assert_eq!(suspension.run_id, w.run.id);
        let jobs: Vec<_> = w.jobs.iter().map(|j| j.id.clone()).collect();
        if i == 0 {
            assert_eq!(jobs, vec![job.id.clone()]);
        } else {
            assert!(jobs.is_empty());
        }
    }
}
