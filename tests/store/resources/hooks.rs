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
    f.store.cancel_run(None, &s.id, &queued.id).await.unwrap();
    due_then_settle(&f, &queued.id, &before, f.store.now()).await;

    // A record that is already due keeps its earlier due time.
    let early = sandbox_run(&f, &s, None).await;
    let before = f.store.get_resource(&early.id).await.unwrap();
    f.advance(1);
    f.store.cancel_run(None, &s.id, &early.id).await.unwrap();
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
