//! Cancels, resumes and resume confirmations that arrive together are written in one group,
//! and each keeps its own checks and answer. These run on one thread, so every write is
//! queued before the later groups are written: the first writes take every free writer
//! alone and the others share the next group.

use std::sync::atomic::Ordering;

use futures::future::{join_all, FutureExt, LocalBoxFuture};
use sagents::domain::commands::ConfirmResumed;
use sagents::domain::run::{Run, RunState};
use sagents::domain::session::Session;
use sagents::domain::RunId;
use sagents::store::{Backend, StoreError};
use serde_json::json;

use super::{fx, hash, refuse_writes, Fx};

#[tokio::test]
async fn sqlite_transitions_in_one_group_keep_their_own_answers() {
    transitions_in_one_group_keep_their_own_answers(Backend::Sqlite).await
}

#[tokio::test]
async fn postgres_transitions_in_one_group_keep_their_own_answers() {
    transitions_in_one_group_keep_their_own_answers(Backend::Postgres).await
}

#[tokio::test]
async fn sqlite_a_transition_the_database_refuses_fails_alone() {
    a_transition_the_database_refuses_fails_alone(Backend::Sqlite).await
}

#[tokio::test]
async fn postgres_a_transition_the_database_refuses_fails_alone() {
    a_transition_the_database_refuses_fails_alone(Backend::Postgres).await
}

type Write<'a> = LocalBoxFuture<'a, Result<Run, StoreError>>;

fn cancel<'a>(f: &'a Fx, session: &Session, run: &RunId) -> Write<'a> {
    let (session, run) = (session.id.clone(), run.clone());
    async move { f.store.cancel_run(Some("acme"), &session, &run, "u").await }.boxed_local()
}

fn resume<'a>(f: &'a Fx, session: &Session, run: &RunId) -> Write<'a> {
    let (session, run) = (session.id.clone(), run.clone());
    async move {
        f.store
            .resume_run(Some("acme"), &session, &run, "tok_a")
            .await
    }
    .boxed_local()
}

fn confirm<'a>(f: &'a Fx, run: &RunId, token: i64, hash_of: char) -> Write<'a> {
    let run = run.clone();
    let cmd: ConfirmResumed = serde_json::from_value(json!({
        "fencing_token": token,
        "resolved_spec_hash": hash(hash_of),
    }))
    .unwrap();
    async move { f.store.confirm_resumed(Some("acme"), &run, &cmd).await }.boxed_local()
}

fn ok(answer: &Result<Run, StoreError>) -> &Run {
    answer
        .as_ref()
        .unwrap_or_else(|e| panic!("expected a run: {e:?}"))
}

fn refusal(answer: &Result<Run, StoreError>) -> String {
    match answer {
        Err(StoreError::Conflict { code, .. }) => (*code).to_owned(),
        Err(StoreError::NotFound(what)) => format!("not_found:{what}"),
        Err(StoreError::LeaseLost) => "lease_lost".to_owned(),
        Err(StoreError::PolicyStale(_)) => "policy_stale".to_owned(),
        Err(StoreError::Database(_)) => "database".to_owned(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A run of `session` that is `resuming` and claimed again: its id and fencing token.
async fn resuming(f: &Fx, session: &Session) -> (RunId, i64) {
    let (run, _) = f.suspended(session, false).await;
    f.store
        .resume_run(Some("acme"), &session.id, &run, "tok_a")
        .await
        .unwrap();
    let claim = f.claim_one("acme").await;
    assert_eq!(claim.run.id, run);
    (run, claim.lease.fencing_token)
}

async fn state(f: &Fx, run: &RunId) -> RunState {
    f.store.get_run(Some("acme"), run).await.unwrap().state
}

async fn transitions_in_one_group_keep_their_own_answers(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let other = f.session("acme").await;
    let running = f.claimed(&s).await.run.id;
    let elsewhere = f.claimed(&s).await.run.id;
    let (paused, _) = f.suspended(&s, false).await;
    let (asking, _) = f.suspended(&s, true).await;
    let done = f.claimed(&s).await.run.id;
    f.store
        .cancel_run(Some("acme"), &s.id, &done, "u")
        .await
        .unwrap();
    let (back, back_token) = resuming(&f, &s).await;
    let (stale, stale_token) = resuming(&f, &s).await;
    let (lost, lost_token) = resuming(&f, &s).await;
    let queued = f.run(&s).await.id;
    let metrics = f.store.metrics().clone();
    let (commits, writes) = (
        metrics.group_commits.load(Ordering::Relaxed),
        metrics.grouped_writes.load(Ordering::Relaxed),
    );

    // The first writes succeed: those that take a writer alone are counted like the others.
    let asked: Vec<Write> = vec![
        cancel(&f, &s, &running),
        resume(&f, &s, &paused),
        confirm(&f, &back, back_token, 'a'),
        cancel(&f, &s, &queued),
        resume(&f, &s, &asking),
        cancel(&f, &s, &done),
        cancel(&f, &other, &elsewhere),
        confirm(&f, &stale, stale_token, 'b'),
        confirm(&f, &lost, lost_token + 1000, 'a'),
    ];
    let count = asked.len() as u64;
    let a = join_all(asked).await;

    assert_eq!(ok(&a[0]).state, RunState::Cancelled);
    assert_eq!(ok(&a[1]).state, RunState::Resuming);
    assert_eq!(ok(&a[2]).state, RunState::Running);
    assert_eq!(ok(&a[3]).state, RunState::Cancelled);
    assert_eq!(refusal(&a[4]), "interaction.pending");
    assert_eq!(refusal(&a[5]), "run.terminal");
    assert_eq!(refusal(&a[6]), "not_found:run");
    assert_eq!(refusal(&a[7]), "policy_stale");
    assert_eq!(refusal(&a[8]), "lease_lost");

    // What was written is what was answered, and nothing else.
    assert_eq!(state(&f, &running).await, RunState::Cancelled);
    assert_eq!(state(&f, &paused).await, RunState::Resuming);
    assert_eq!(state(&f, &asking).await, RunState::Suspended);
    assert_eq!(state(&f, &elsewhere).await, RunState::Running);
    assert_eq!(state(&f, &back).await, RunState::Running);
    assert_eq!(
        state(&f, &stale).await,
        RunState::Failed,
        "a stale policy fails the run, committed"
    );
    assert_eq!(state(&f, &lost).await, RunState::Resuming);
    assert_eq!(state(&f, &queued).await, RunState::Cancelled);
    let snap = f.snapshot(&s).await;
    assert_eq!(snap.pending_interactions.len(), 1, "{snap:?}");
    let events = f
        .store
        .list_events(Some("acme"), &s.id, 0, 1000)
        .await
        .unwrap();
    let count_of = |kind: &str| events.iter().filter(|e| e.r#type == kind).count();
    assert_eq!(count_of("run.cancelled"), 3, "one before, two in the group");
    assert_eq!(
        count_of("run.resuming"),
        4,
        "three before, one in the group"
    );
    assert_eq!(count_of("run.running"), 1);
    assert_eq!(count_of("run.failed"), 1);
    let sequences: Vec<i64> = events.iter().map(|e| e.sequence).collect();
    let expected: Vec<i64> = (1..=sequences.len() as i64).collect();
    assert_eq!(sequences, expected, "the session's events have no gap");

    let grouped = metrics.grouped_writes.load(Ordering::Relaxed) - writes;
    let groups = metrics.group_commits.load(Ordering::Relaxed) - commits;
    assert_eq!(grouped, count, "every write went through a group");
    let writers = match backend {
        Backend::Sqlite => 1,
        Backend::Postgres => 2,
    };
    assert!(
        groups <= writers + 1,
        "{grouped} writes took {groups} groups"
    );
}

/// Makes the database refuse to mark `run`'s suspension `resolving`, and to log a cancel in
/// `session`.
async fn refuse(f: &Fx, run: &RunId, session: &Session) {
    let cancelled_in = format!(
        "NEW.type = 'run.cancelled' AND NEW.session_id = '{}'",
        session.id
    );
    refuse_writes(
        f,
        &[
            (
                "UPDATE",
                "suspensions",
                format!("NEW.status = 'resolving' AND NEW.run_id = '{run}'"),
            ),
            ("INSERT", "session_events", cancelled_in),
        ],
    )
    .await;
}

async fn a_transition_the_database_refuses_fails_alone(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let refused_session = f.session("acme").await;
    let mut paused = Vec::new();
    for _ in 0..7 {
        paused.push(f.suspended(&s, false).await.0);
    }
    let running = f.claimed(&s).await.run.id;
    let refused_cancel = f.claimed(&refused_session).await.run.id;
    refuse(&f, &paused[6], &refused_session).await;
    let metrics = f.store.metrics().clone();
    let fallbacks = metrics.group_fallbacks.load(Ordering::Relaxed);

    // One write refused inside a group: only its own rows are undone, the group commits.
    let a = join_all(paused.iter().map(|run| resume(&f, &s, run))).await;
    for (i, answer) in a.iter().enumerate().take(6) {
        assert_eq!(ok(answer).state, RunState::Resuming, "{i}");
    }
    assert_eq!(refusal(&a[6]), "database");
    assert_eq!(state(&f, &paused[6]).await, RunState::Suspended);
    assert_eq!(
        metrics.group_fallbacks.load(Ordering::Relaxed),
        fallbacks,
        "the group itself did not fail"
    );

    // A group that cannot commit: every write is written again alone.
    let mut asked: Vec<Write> = paused
        .iter()
        .take(5)
        .map(|run| cancel(&f, &s, run))
        .collect();
    asked.push(cancel(&f, &s, &running));
    asked.push(cancel(&f, &refused_session, &refused_cancel));
    let a = join_all(asked).await;
    for (i, answer) in a.iter().enumerate().take(6) {
        assert_eq!(ok(answer).state, RunState::Cancelled, "{i}");
    }
    assert_eq!(refusal(&a[6]), "database");
    assert_eq!(state(&f, &refused_cancel).await, RunState::Running);
    assert_eq!(state(&f, &running).await, RunState::Cancelled);
    assert_eq!(
        metrics.group_fallbacks.load(Ordering::Relaxed),
        fallbacks + 1,
        "the group that held the refused cancel failed once, then wrote each alone"
    );
}
