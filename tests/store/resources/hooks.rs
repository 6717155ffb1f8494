use chrono::{DateTime, Duration, Utc};
use sagents::domain::claim::ClaimKind;
use sagents::domain::commands::{CompleteRun, ConfirmResumed, CreateJob, FailRun};
use sagents::domain::job::{JobState, PauseBehavior};
use sagents::domain::resource::ExecutionResourceRecord;
use sagents::domain::resource::ResourceState;
use sagents::domain::run::RunState;
use sagents::domain::RunId;
use sagents::store::{Backend, StoreError};
use serde_json::json;

use super::{running, sandbox_run, save_and_release, settle_due, suspended_sandbox, work_for};
use crate::on_both_backends;
use crate::store::{fx, hash, reply, suspend_cmd, Fx};

on_both_backends!(
    suspending_and_resuming_make_the_record_due,
    ending_a_run_makes_its_record_due,
    a_finished_job_wakes_a_blocked_record,
    a_child_is_written_only_once_its_parents_record_is_held,
    a_child_is_created_while_its_parents_lease_changes,
);

/// The run's record is due at `at` with a new version and its state untouched; the
/// coordinator then settles it (nothing to do) so the next step starts from a quiet record.
async fn due_then_settle(
    f: &Fx,
    run: &RunId,
    before: &ExecutionResourceRecord,
    at: DateTime<Utc>,
) -> ExecutionResourceRecord {
    let r = f.store.get_resource(run).await.unwrap();
    assert_eq!(r.due_at, Some(at), "due");
    assert_eq!(r.version, before.version + 1, "a new version");
    assert_eq!(r.state, before.state, "a hook never changes the state");
    settle_due(f, run).await
}

fn confirm(token: i64, policy: char) -> ConfirmResumed {
    ConfirmResumed {
        fencing_token: token,
        resolved_spec_hash: hash('a'),
        spec_hash: Some(hash('1')),
        policy_hash: Some(hash(policy)),
    }
}

async fn suspending_and_resuming_make_the_record_due(backend: Backend) {
    let f = fx(backend).await;
    super::register(&f).await;
    let s = f.session("acme").await;
    let (run, claim) = running(&f, &s).await;
    let r0 = f.store.get_resource(&run.id).await.unwrap();
    assert_eq!(r0.due_at, None);

    f.advance(1);
    let work = f.store.hub().subscribe_lifecycle_work();
    f.store
        .suspend_run(
            None,
            &run.id,
            &suspend_cmd(claim.lease.fencing_token, 1, true),
        )
        .await
        .unwrap();
    assert!(
        work.has_changed().unwrap(),
        "the sandbox is due for a release: the lifecycle pool wakes"
    );
    let r1 = due_then_settle(&f, &run.id, &r0, f.store.now()).await;

    f.advance(1);
    let interaction = f.pending_interaction(&s).await;
    let lifecycle = f.store.hub().subscribe_lifecycle_work();
    f.store
        .reply_interaction(None, &s.id, &interaction, &reply("approve"), "user-1")
        .await
        .unwrap();
    assert!(
        lifecycle.has_changed().unwrap(),
        "the released sandbox is due for a restore: the lifecycle pool wakes"
    );
    let r2 = due_then_settle(&f, &run.id, &r1, f.store.now()).await;

    let resumed = f.claim_one("acme").await;
    assert_eq!(resumed.kind, ClaimKind::Resume);
    assert_eq!(resumed.sandbox.as_ref().map(|s| s.generation), Some(1));
    let token = resumed.lease.fencing_token;
    f.store
        .confirm_resumed(None, &run.id, &confirm(token, '2'))
        .await
        .unwrap();
    assert_eq!(
        f.store.get_resource(&run.id).await.unwrap(),
        r2,
        "continuing the agent loop needs nothing from the coordinator"
    );
    f.advance(1);
    f.store
        .suspend_run(None, &run.id, &suspend_cmd(token, 2, false))
        .await
        .unwrap();
    let r3 = due_then_settle(&f, &run.id, &r2, f.store.now()).await;
    f.advance(1);
    f.store
        .resume_run(None, &s.id, &run.id, "operator")
        .await
        .unwrap();
    due_then_settle(&f, &run.id, &r3, f.store.now()).await;
}

async fn ending_a_run_makes_its_record_due(backend: Backend) {
    let f = fx(backend).await;
    super::register(&f).await;
    let s = f.session("acme").await;
    let (done, claim) = running(&f, &s).await;
    let before = f.store.get_resource(&done.id).await.unwrap();
    f.advance(1);
    let complete = CompleteRun {
        fencing_token: claim.lease.fencing_token,
        output: json!({}),
    };
    f.store
        .complete_run(None, &done.id, &complete)
        .await
        .unwrap();
    due_then_settle(&f, &done.id, &before, f.store.now()).await;

    let (failed, claim) = running(&f, &s).await;
    let before = f.store.get_resource(&failed.id).await.unwrap();
    f.advance(1);
    let fail = FailRun {
        fencing_token: claim.lease.fencing_token,
        error: json!({ "code": "agent.crashed" }),
    };
    f.store.fail_run(None, &failed.id, &fail).await.unwrap();
    due_then_settle(&f, &failed.id, &before, f.store.now()).await;

    let queued = sandbox_run(&f, &s, None).await;
    let before = settle_due(&f, &queued.id).await;
    f.advance(1);
    f.store
        .cancel_run(None, &s.id, &queued.id, "u")
        .await
        .unwrap();
    due_then_settle(&f, &queued.id, &before, f.store.now()).await;

    // A record that is already due keeps its earlier due time.
    let early = sandbox_run(&f, &s, None).await;
    let before = f.store.get_resource(&early.id).await.unwrap();
    f.advance(1);
    f.store
        .cancel_run(None, &s.id, &early.id, "u")
        .await
        .unwrap();
    due_then_settle(&f, &early.id, &before, before.due_at.unwrap()).await;

    let (expiring, claim) = running(&f, &s).await;
    let mut cmd = suspend_cmd(claim.lease.fencing_token, 1, true);
    if let Some(i) = cmd.interaction.as_mut() {
        i.expires_at = Some(f.store.now() + Duration::seconds(10));
    }
    f.store.suspend_run(None, &expiring.id, &cmd).await.unwrap();
    let before = settle_due(&f, &expiring.id).await;
    f.advance(11);
    assert_eq!(f.store.expire_interactions().await.unwrap(), 1);
    assert_eq!(
        f.store.get_run(None, &expiring.id).await.unwrap().state,
        RunState::Failed
    );
    due_then_settle(&f, &expiring.id, &before, f.store.now()).await;

    let (stale, _) = suspended_sandbox(&f, &s, false).await;
    settle_due(&f, &stale.id).await;
    f.store
        .resume_run(None, &s.id, &stale.id, "operator")
        .await
        .unwrap();
    let before = settle_due(&f, &stale.id).await;
    let resumed = f.claim_one("acme").await;
    f.advance(1);
    assert!(matches!(
        f.store
            .confirm_resumed(None, &stale.id, &confirm(resumed.lease.fencing_token, '9'))
            .await,
        Err(StoreError::PolicyStale(_))
    ));
    due_then_settle(&f, &stale.id, &before, f.store.now()).await;
}

async fn a_finished_job_wakes_a_blocked_record(backend: Backend) {
    let f = fx(backend).await;
    super::register(&f).await;
    let s = f.session("acme").await;
    let (run, claim) = running(&f, &s).await;
    let token = claim.lease.fencing_token;
    let job = |pause| CreateJob {
        fencing_token: token,
        kind: "shell".into(),
        payload: json!({ "cmd": "make test" }),
        pause_behavior: Some(pause),
        execution_affinity: None,
    };
    let held = f
        .store
        .create_job(None, &run.id, &job(PauseBehavior::Continue))
        .await
        .unwrap();
    let early = f
        .store
        .create_job(None, &run.id, &job(PauseBehavior::Detach))
        .await
        .unwrap();

    // While the run runs, a finished job only invalidates plans made before it finished.
    let r0 = f.store.get_resource(&run.id).await.unwrap();
    f.store
        .update_job(None, &run.id, &early.id, JobState::Completed)
        .await
        .unwrap();
    let r1 = f.store.get_resource(&run.id).await.unwrap();
    assert_eq!((r1.due_at, r1.version), (None, r0.version + 1));

    f.store
        .suspend_run(None, &run.id, &suspend_cmd(token, 1, false))
        .await
        .unwrap();
    let work = work_for(&f, &run.id).await;
    let states: Vec<_> = work.jobs.iter().map(|j| (j.id.clone(), j.state)).collect();
    assert_eq!(
        states,
        vec![
            (held.id.clone(), JobState::Running),
            (early.id, JobState::Completed)
        ]
    );
    let blocked = save_and_release(&f, &work, |r| {
        r.state = ResourceState::ReleaseBlocked;
        r.blocking_job_ids = vec![held.id.clone()];
        r.due_at = None;
    })
    .await;

    f.advance(3);
    let wake = f.store.hub().subscribe_work();
    f.store
        .update_job(None, &run.id, &held.id, JobState::Completed)
        .await
        .unwrap();
    assert!(wake.has_changed().unwrap());
    due_then_settle(&f, &run.id, &blocked, f.store.now()).await;
}

/// A claim reads a record's descendants while it holds the record: a child whose rows were
/// written before the claim took the parent's record, but committed after it read them, would
/// let the parent's release go on under it. So a child's creation takes its ancestors' records
/// first (PostgreSQL: it waits for a holder before writing anything).
async fn a_child_is_written_only_once_its_parents_record_is_held(backend: Backend) {
    let f = fx(backend).await;
    super::register(&f).await;
    let s = f.session("acme").await;
    let (parent, _) = suspended_sandbox(&f, &s, true).await;
    let before = f.store.get_resource(&parent.id).await.unwrap();
    let creating = {
        let store = f.store.clone();
        let s = s.clone();
        let parent = parent.id.clone();
        let mut cmd = crate::store::run_cmd(Some(parent));
        cmd.sandbox_spec = Some(super::spec());
        async move { store.create_run(&s.tenant_id, &s.id, &cmd).await.unwrap() }
    };
    let child = match backend {
        Backend::Sqlite => creating.await,
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(f.store.url()).await.unwrap();
            let mut claim = pool.begin().await.unwrap();
            sqlx::query("SELECT 1 FROM execution_resources WHERE run_id = $1 FOR NO KEY UPDATE")
                .bind(parent.id.as_str())
                .execute(&mut *claim)
                .await
                .unwrap();
            let task = tokio::spawn(creating);
            let waiting = loop {
                let pids: Vec<i32> = sqlx::query_scalar(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
                     AND datname = current_database()",
                )
                .fetch_all(&pool)
                .await
                .unwrap();
                if let Some(&pid) = pids.first() {
                    break pid;
                }
                assert!(
                    !task.is_finished(),
                    "the creation did not wait for the parent"
                );
                tokio::task::yield_now().await;
            };
            let written: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation \
                 WHERE l.pid = $1 AND c.relname = 'runs' \
                 AND l.mode = 'RowExclusiveLock' AND l.granted",
            )
            .bind(waiting)
            .fetch_one(&pool)
            .await
            .unwrap();
            assert_eq!(
                written, 0,
                "the child's rows were written before its parent was held"
            );
            claim.commit().await.unwrap();
            task.await.unwrap()
        }
    };
    let after = f.store.get_resource(&parent.id).await.unwrap();
    assert_eq!(
        after.version,
        before.version + 1,
        "the parent's record was bumped"
    );
    let due = super::due_work(&f).await;
    let work = due
        .iter()
        .find(|w| w.run.id == parent.id)
        .expect("the parent is due");
    let children: Vec<_> = work.descendants.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(
        children,
        vec![child.id],
        "the parent's claim sees the child"
    );
}

/// A child's creation holds its parent's record, then checks its parent's run (PostgreSQL: a
/// foreign key's share lock). A lease change on the parent (a claim, a hand-back) holds that
/// run, then its record: if the lease change locked out the check, the two would deadlock.
async fn a_child_is_created_while_its_parents_lease_changes(backend: Backend) {
    let f = fx(backend).await;
    super::register(&f).await;
    let s = f.session("acme").await;
    let (parent, _) = suspended_sandbox(&f, &s, true).await;
    let mut cmd = crate::store::run_cmd(Some(parent.id.clone()));
    cmd.sandbox_spec = Some(super::spec());
    let creating = f.store.create_run(&s.tenant_id, &s.id, &cmd);
    let child = match backend {
        Backend::Sqlite => creating.await.unwrap(),
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(f.store.url()).await.unwrap();
            let mut lease = pool.begin().await.unwrap();
            sqlx::query(
                "UPDATE runs SET lease_id = 'lease_held', lease_holder = 'other:w1' WHERE id = $1",
            )
            .bind(parent.id.as_str())
            .execute(&mut *lease)
            .await
            .unwrap();
            let child = tokio::time::timeout(std::time::Duration::from_secs(10), creating)
                .await
                .expect("the creation waited for the parent's lease change")
                .unwrap();
            sqlx::query("UPDATE execution_resources SET version = version + 1 WHERE run_id = $1")
                .bind(parent.id.as_str())
                .execute(&mut *lease)
                .await
                .unwrap();
            lease.rollback().await.unwrap();
            child
        }
    };
    assert_eq!(child.parent_run_id, Some(parent.id.clone()));
    let work = super::due_work(&f).await;
    let parent_work = work.iter().find(|w| w.run.id == parent.id);
    assert!(
        parent_work.is_some_and(|w| w.descendants.iter().any(|(id, _)| *id == child.id)),
        "the parent's next claim sees the child"
    );
}
