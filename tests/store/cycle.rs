use sagents::domain::claim::ClaimKind;
use sagents::domain::commands::{CompleteRun, ConfirmResumed, CreateJob, CreateRun};
use sagents::domain::job::{ExecutionAffinity, JobState, PauseBehavior};
use sagents::domain::run::{RunState, RunStatus};
use sagents::domain::sandbox::{ResolvedSandboxSpec, WorkspaceMode};
use sagents::domain::RunId;
use sagents::store::{Backend, StoreError};
use serde_json::json;

use super::{fx, hash, reply, run_cmd, suspend_cmd, ttl};
use crate::on_both_backends;

on_both_backends!(
    a_run_suspends_waits_for_a_reply_and_resumes,
    create_run_checks_its_input,
    suspend_checks_the_checkpoint,
    cancel_closes_what_the_run_left_open,
    explicit_resume_needs_no_pending_interaction,
    stale_policy_fails_the_run,
);

fn job(token: i64, pause: PauseBehavior) -> CreateJob {
    CreateJob {
        fencing_token: token,
        kind: "shell".into(),
        payload: json!({ "cmd": "make" }),
        pause_behavior: Some(pause),
        execution_affinity: None,
    }
}

fn confirm(token: i64, resolved: char) -> ConfirmResumed {
    ConfirmResumed {
        fencing_token: token,
        resolved_spec_hash: hash(resolved),
        spec_hash: None,
        policy_hash: None,
    }
}

async fn a_run_suspends_waits_for_a_reply_and_resumes(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let run = f.run(&s).await;
    assert_eq!(run.state, RunState::Queued);
    let claim = f.claim_one("acme").await;
    assert_eq!(
        (claim.kind, claim.run.id.clone()),
        (ClaimKind::Start, run.id.clone())
    );
    let token = claim.lease.fencing_token;

    let killed = f
        .store
        .create_job(Some("acme"), &run.id, &job(token, PauseBehavior::Cancel))
        .await
        .unwrap();
    let kept = f
        .store
        .create_job(Some("acme"), &run.id, &job(token, PauseBehavior::Detach))
        .await
        .unwrap();
    assert_eq!(killed.state, JobState::Running);
    assert_eq!(kept.execution_affinity, ExecutionAffinity::Sandbox);

    f.advance(1);
    let suspended = f
        .store
        .suspend_run(Some("acme"), &run.id, &suspend_cmd(token, 1, true))
        .await
        .unwrap();
    assert_eq!(suspended.state, RunState::Suspended);
    let jobs = f.store.list_jobs(Some("acme"), &run.id).await.unwrap();
    let states: Vec<_> = jobs.iter().map(|j| (j.id.clone(), j.state)).collect();
    assert_eq!(
        states,
        vec![(killed.id, JobState::Killed), (kept.id, JobState::Running)]
    );

    let snap = f.snapshot(&s).await;
    assert_eq!(snap.runs[0].status, RunStatus::WaitingForInput);
    assert_eq!(snap.pending_interactions.len(), 1);
    let pending = &snap.pending_interactions[0];
    assert_eq!(pending.run_id, run.id);
    assert_eq!(pending.requested_at, f.store.now());
    assert!(
        f.store
            .claim_runs(None, "w", 5, ttl())
            .await
            .unwrap()
            .is_empty(),
        "a suspended run waits for its reply"
    );
    assert!(
        matches!(
            f.store
                .complete_run(
                    Some("acme"),
                    &run.id,
                    &CompleteRun {
                        fencing_token: token,
                        output: json!({})
                    }
                )
                .await,
            Err(StoreError::LeaseLost)
        ),
        "suspending hands the lease back"
    );

    let work = f.store.hub().subscribe_work();
    let outcome = f
        .store
        .reply_interaction(
            Some("acme"),
            &s.id,
            &pending.id,
            &reply("approve"),
            "tok_user",
        )
        .await
        .unwrap();
    assert_eq!(outcome.run_status, RunStatus::Resuming);
    let resolution = outcome.interaction.resolution.as_ref().unwrap();
    assert_eq!(resolution.decision, "approve");
    assert_eq!(resolution.resolved_by, "tok_user");
    assert_eq!(outcome.interaction.revision, pending.revision + 1);
    assert!(work.has_changed().unwrap(), "a resumed run is new work");
    let snap = f.snapshot(&s).await;
    assert_eq!(snap.runs[0].status, RunStatus::Resuming);
    assert!(snap.pending_interactions.is_empty());

    let resume = f.claim_one("acme").await;
    assert_eq!(resume.kind, ClaimKind::Resume);
    assert_eq!(resume.run.state, RunState::Resuming);
    let checkpoint = resume
        .checkpoint
        .as_ref()
        .expect("the resume claim carries the checkpoint");
    assert_eq!(checkpoint.sequence, 1);
    assert_eq!(checkpoint.state, json!({ "step": 1 }));
    assert_eq!(checkpoint.codec_version, "v1");
    assert_eq!(resume.expected.resolved_spec_hash, hash('a'));
    assert!(resume.lease.fencing_token > token);

    let token = resume.lease.fencing_token;
    let running = f
        .store
        .confirm_resumed(Some("acme"), &run.id, &confirm(token, 'a'))
        .await
        .unwrap();
    assert_eq!(running.state, RunState::Running);
    let done = f
        .store
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
    assert_eq!(done.state, RunState::Completed);
    assert_eq!(done.output, Some(json!({ "answer": 42 })));
    assert_eq!(f.store.get_run(Some("acme"), &run.id).await.unwrap(), done);
    assert_eq!(f.snapshot(&s).await.runs[0].status, RunStatus::Completed);
    assert!(matches!(
        f.store
            .heartbeat(Some("acme"), &resume.lease.lease_id, token, ttl())
            .await,
        Err(StoreError::LeaseLost)
    ));
}

async fn create_run_checks_its_input(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let other = f.session("acme").await;
    let foreign_parent = f.run(&other).await;
    let before = f.snapshot(&s).await;

    let invalid_field = |r: Result<_, StoreError>| match r {
        Err(StoreError::Invalid(e)) => e.field,
        other => panic!("expected Invalid, got {other:?}"),
    };
    for parent in [foreign_parent.id.clone(), RunId::new()] {
        let r = f
            .store
            .create_run("acme", &s.id, &run_cmd(Some(parent)))
            .await;
        assert_eq!(invalid_field(r), "parent_run_id");
    }
    let bad_hash = CreateRun {
        resolved_spec_hash: "sha256:nope".into(),
        ..run_cmd(None)
    };
    let r = f.store.create_run("acme", &s.id, &bad_hash).await;
    assert_eq!(invalid_field(r), "resolved_spec_hash");
    let mut v2 = run_cmd(None);
    let mut spec: ResolvedSandboxSpec = serde_json::from_value(json!({
        "spec_version": "sagents.sandbox-spec/v3",
        "provider_id": "local",
        "spec_hash": hash('1'),
        "policy_hash": hash('2'),
        "workspace_mode": "isolated",
    }))
    .unwrap();
    spec.spec_version = "sagents.sandbox-spec/v2".into();
    v2.sandbox_spec = Some(spec.clone());
    let r = f.store.create_run("acme", &s.id, &v2).await;
    assert!(
        matches!(&r, Err(StoreError::SpecUnsupported(m)) if m.contains("sagents.sandbox-spec/v2")),
        "{r:?}"
    );
    spec.spec_version = "sagents.sandbox-spec/v3".into();
    spec.workspace_mode = WorkspaceMode::ActiveWorkspace;
    v2.sandbox_spec = Some(spec);
    let r = f.store.create_run("acme", &s.id, &v2).await;
    assert_eq!(invalid_field(r), "sandbox_spec.host_workspace");
    assert_eq!(
        f.snapshot(&s).await,
        before,
        "refused input changes nothing"
    );

    let parent = f.run(&s).await;
    let child = f
        .store
        .create_run("acme", &s.id, &run_cmd(Some(parent.id.clone())))
        .await
        .unwrap();
    assert_eq!(child.parent_run_id, Some(parent.id));
    assert_eq!(child.revision, 1);
    assert_eq!(child.input, json!({ "prompt": "hello" }));
}

async fn suspend_checks_the_checkpoint(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let claim = f.claimed(&s).await;
    let run_id = &claim.run.id;
    let token = claim.lease.fencing_token;
    let before = f.snapshot(&s).await;

    let mut wrong_hash = suspend_cmd(token, 5, true);
    wrong_hash.checkpoint.resolved_spec_hash = hash('b');
    let mut expired = suspend_cmd(token, 5, true);
    if let Some(i) = expired.interaction.as_mut() {
        i.expires_at = Some(f.store.now());
    }
    let mut duplicate = suspend_cmd(token, 5, true);
    if let Some(i) = duplicate.interaction.as_mut() {
        i.allowed_decisions = vec!["approve".into(), "approve".into()];
    }
    for (cmd, field) in [
        (wrong_hash, "checkpoint.resolved_spec_hash"),
        (expired, "interaction.expires_at"),
        (duplicate, "interaction.allowed_decisions"),
    ] {
        match f.store.suspend_run(Some("acme"), run_id, &cmd).await {
            Err(StoreError::Invalid(e)) => assert_eq!(e.field, field),
            other => panic!("expected Invalid on {field}, got {other:?}"),
        }
    }
    assert_eq!(f.snapshot(&s).await, before);

    f.store
        .suspend_run(Some("acme"), run_id, &suspend_cmd(token, 5, false))
        .await
        .unwrap();
    f.store
        .resume_run(Some("acme"), &s.id, run_id, "tok_user")
        .await
        .unwrap();
    let resume = f.claim_one("acme").await;
    let token = resume.lease.fencing_token;
    f.store
        .confirm_resumed(Some("acme"), run_id, &confirm(token, 'a'))
        .await
        .unwrap();
    let before = f.snapshot(&s).await;
    match f
        .store
        .suspend_run(Some("acme"), run_id, &suspend_cmd(token, 5, true))
        .await
    {
        Err(StoreError::Conflict { code, .. }) => assert_eq!(code, "checkpoint.sequence"),
        other => panic!("expected a checkpoint.sequence conflict, got {other:?}"),
    }
    assert_eq!(f.snapshot(&s).await, before);
    f.store
        .suspend_run(Some("acme"), run_id, &suspend_cmd(token, 6, true))
        .await
        .unwrap();
}

async fn cancel_closes_what_the_run_left_open(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let (suspended, _) = f.suspended(&s, true).await;
    let running = f.claimed(&s).await;
    let queued = f.run(&s).await;
    let interaction = f.pending_interaction(&s).await;

    for id in [&suspended, &running.run.id, &queued.id] {
        let r = f
            .store
            .cancel_run(Some("acme"), &s.id, id, "u")
            .await
            .unwrap();
        assert_eq!(r.state, RunState::Cancelled);
    }
    let snap = f.snapshot(&s).await;
    assert!(snap.runs.iter().all(|r| r.status == RunStatus::Cancelled));
    assert!(snap.pending_interactions.is_empty());
    match f
        .store
        .reply_interaction(Some("acme"), &s.id, &interaction, &reply("approve"), "u")
        .await
    {
        Err(StoreError::Conflict { code, .. }) => assert_eq!(code, "interaction.not_pending"),
        other => panic!("expected not_pending, got {other:?}"),
    }
    assert!(matches!(
        f.store
            .complete_run(
                Some("acme"),
                &running.run.id,
                &CompleteRun {
                    fencing_token: running.lease.fencing_token,
                    output: json!({})
                }
            )
            .await,
        Err(StoreError::LeaseLost)
    ));
    assert!(f
        .store
        .claim_runs(None, "w", 5, ttl())
        .await
        .unwrap()
        .is_empty());
    match f
        .store
        .cancel_run(Some("acme"), &s.id, &queued.id, "u")
        .await
    {
        Err(StoreError::Conflict { code, .. }) => assert_eq!(code, "run.terminal"),
        other => panic!("expected run.terminal, got {other:?}"),
    }
    let elsewhere = f.session("acme").await;
    assert!(matches!(
        f.store
            .cancel_run(Some("acme"), &elsewhere.id, &queued.id, "u")
            .await,
        Err(StoreError::NotFound("run"))
    ));
    assert!(matches!(
        f.store
            .cancel_run(Some("globex"), &s.id, &queued.id, "u")
            .await,
        Err(StoreError::NotFound("run"))
    ));
}

async fn explicit_resume_needs_no_pending_interaction(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let (with_question, _) = f.suspended(&s, true).await;
    let (paused, _) = f.suspended(&s, false).await;
    let queued = f.run(&s).await;

    let code = |r: Result<_, StoreError>| match r {
        Err(StoreError::Conflict { code, .. }) => code,
        other => panic!("expected a conflict, got {other:?}"),
    };
    assert_eq!(
        code(
            f.store
                .resume_run(Some("acme"), &s.id, &with_question, "u")
                .await
        ),
        "interaction.pending"
    );
    assert_eq!(
        code(
            f.store
                .resume_run(Some("acme"), &s.id, &queued.id, "u")
                .await
        ),
        "run.not_suspended"
    );
    let work = f.store.hub().subscribe_work();
    let resumed = f
        .store
        .resume_run(Some("acme"), &s.id, &paused, "u")
        .await
        .unwrap();
    assert_eq!(resumed.state, RunState::Resuming);
    assert!(work.has_changed().unwrap());
    assert_eq!(
        code(f.store.resume_run(Some("acme"), &s.id, &paused, "u").await),
        "run.not_suspended"
    );
    let claims = f.store.claim_runs(None, "w", 5, ttl()).await.unwrap();
    let kinds: Vec<_> = claims.iter().map(|c| (c.run.id.clone(), c.kind)).collect();
    assert_eq!(
        kinds,
        vec![(paused, ClaimKind::Resume), (queued.id, ClaimKind::Start)]
    );
}

async fn stale_policy_fails_the_run(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let (run_id, _) = f.suspended(&s, false).await;
    f.store.resume_run(None, &s.id, &run_id, "u").await.unwrap();
    let resume = f.claim_one("acme").await;
    let token = resume.lease.fencing_token;

    match f
        .store
        .confirm_resumed(Some("acme"), &run_id, &confirm(token, 'b'))
        .await
    {
        Err(StoreError::PolicyStale(message)) => assert!(message.contains("resolved_spec_hash")),
        other => panic!("expected PolicyStale, got {other:?}"),
    }
    let run = f.store.get_run(None, &run_id).await.unwrap();
    assert_eq!(run.state, RunState::Failed);
    assert_eq!(run.error.as_ref().unwrap()["code"], "sandbox.policy_stale");
    assert_eq!(f.snapshot(&s).await.runs[0].status, RunStatus::Failed);
    assert!(matches!(
        f.store
            .heartbeat(Some("acme"), &resume.lease.lease_id, token, ttl())
            .await,
        Err(StoreError::LeaseLost)
    ));
    assert!(matches!(
        f.store
            .confirm_resumed(Some("acme"), &run_id, &confirm(token, 'a'))
            .await,
        Err(StoreError::LeaseLost)
    ));
}
