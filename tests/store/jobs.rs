use sagents::domain::commands::CreateJob;
use sagents::domain::job::{ExecutionAffinity, JobState, PauseBehavior};
use sagents::domain::{JobId, RunId};
use sagents::store::{Backend, StoreError};
use serde_json::json;

use super::{fx, suspend_cmd, Fx};
use crate::on_both_backends;

on_both_backends!(jobs_only_move_forward);

fn job(token: i64, pause: PauseBehavior) -> CreateJob {
    CreateJob {
        fencing_token: token,
        kind: "shell".into(),
        payload: json!({ "cmd": "make" }),
        pause_behavior: Some(pause),
        execution_affinity: None,
    }
}

async fn update(f: &Fx, run: &RunId, job: &JobId, state: JobState) -> Result<JobState, String> {
    match f.store.update_job(Some("acme"), run, job, state).await {
        Ok(j) => Ok(j.state),
        Err(StoreError::Conflict { code, .. }) => Err(code.to_owned()),
        Err(e) => panic!("unexpected {e:?}"),
    }
}

async fn jobs_only_move_forward(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let claim = f.claimed(&s).await;
    let run = &claim.run.id;
    let mut external = job(claim.lease.fencing_token, PauseBehavior::Continue);
    external.execution_affinity = Some(ExecutionAffinity::External);
    let a = f
        .store
        .create_job(Some("acme"), run, &external)
        .await
        .unwrap();
    assert_eq!(a.pause_behavior, PauseBehavior::Continue);
    assert_eq!(a.execution_affinity, ExecutionAffinity::External);
    let mut defaults = job(claim.lease.fencing_token, PauseBehavior::Detach);
    defaults.pause_behavior = None;
    let b = f
        .store
        .create_job(Some("acme"), run, &defaults)
        .await
        .unwrap();
    assert_eq!(b.pause_behavior, PauseBehavior::Detach);

    f.store
        .suspend_run(
            Some("acme"),
            run,
            &suspend_cmd(claim.lease.fencing_token, 1, true),
        )
        .await
        .unwrap();
    // Jobs outlive the lease: their updates need no token.
    assert_eq!(
        update(&f, run, &a.id, JobState::Orphaned).await,
        Ok(JobState::Orphaned)
    );
    assert_eq!(
        update(&f, run, &a.id, JobState::Created).await,
        Err("job.invalid_transition".into())
    );
    f.advance(1);
    assert_eq!(
        update(&f, run, &a.id, JobState::Completed).await,
        Ok(JobState::Completed)
    );
    assert_eq!(
        update(&f, run, &a.id, JobState::Completed).await,
        Ok(JobState::Completed)
    );
    assert_eq!(
        update(&f, run, &a.id, JobState::Failed).await,
        Err("job.finished".into())
    );
    let listed = f.store.list_jobs(Some("acme"), run).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].id, a.id);
    assert_eq!(listed[0].state, JobState::Completed);
    assert_eq!(listed[0].updated_at, f.store.now());
    assert_eq!(listed[1].state, JobState::Running);

    assert!(matches!(
        f.store
            .update_job(Some("globex"), run, &b.id, JobState::Completed)
            .await,
        Err(StoreError::NotFound("job"))
    ));
    assert!(matches!(
        f.store
            .update_job(Some("acme"), run, &JobId::new(), JobState::Completed)
            .await,
        Err(StoreError::NotFound("job"))
    ));
    assert!(matches!(
        f.store.list_jobs(Some("globex"), run).await,
        Err(StoreError::NotFound("run"))
    ));
    assert!(matches!(
        f.store
            .create_job(
                Some("acme"),
                run,
                &job(claim.lease.fencing_token, PauseBehavior::Detach)
            )
            .await,
        Err(StoreError::LeaseLost)
    ));
}
