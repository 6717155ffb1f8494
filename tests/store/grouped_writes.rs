//! Session and run creations and suspensions that arrive together are written in one group,
//! and each keeps its own checks and answer. These run on one thread, so every write is
//! queued before the later groups are written: the first writes take every free writer
//! alone and the others share the next group.

use std::sync::atomic::Ordering;

use futures::future::{join_all, FutureExt, LocalBoxFuture};
use sagents::domain::commands::CreateSession;
use sagents::domain::run::{Run, RunState};
use sagents::domain::session::Session;
use sagents::domain::RunId;
use sagents::store::{Backend, StoreError};
use serde_json::json;

use super::{fx, hash, refuse_writes, run_cmd, suspend_cmd, Fx};

#[tokio::test]
async fn sqlite_writes_in_one_group_keep_their_own_answers() {
    writes_in_one_group_keep_their_own_answers(Backend::Sqlite).await
}

#[tokio::test]
async fn postgres_writes_in_one_group_keep_their_own_answers() {
    writes_in_one_group_keep_their_own_answers(Backend::Postgres).await
}

#[tokio::test]
async fn sqlite_a_write_the_database_refuses_fails_alone() {
    a_write_the_database_refuses_fails_alone(Backend::Sqlite).await
}

#[tokio::test]
async fn postgres_a_write_the_database_refuses_fails_alone() {
    a_write_the_database_refuses_fails_alone(Backend::Postgres).await
}

/// What one write of the group answered.
#[derive(Debug)]
enum Answer {
    Session(Result<Session, StoreError>),
    Run(Result<Run, StoreError>),
}

impl Answer {
    fn session(&self) -> &Session {
        match self {
            Answer::Session(Ok(s)) => s,
            other => panic!("expected a session, got {other:?}"),
        }
    }

    fn run(&self) -> &Run {
        match self {
            Answer::Run(Ok(r)) => r,
            other => panic!("expected a run, got {other:?}"),
        }
    }

    fn error(&self) -> &StoreError {
        match self {
            Answer::Session(Err(e)) | Answer::Run(Err(e)) => e,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    /// The refusal's code, or the field an `Invalid` names.
    fn refusal(&self) -> String {
        match self.error() {
            StoreError::Conflict { code, .. } => (*code).to_owned(),
            StoreError::NotFound(what) => format!("not_found:{what}"),
            StoreError::Invalid(v) => format!("invalid:{}", v.field),
            StoreError::LeaseLost => "lease_lost".to_owned(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}

type Write<'a> = LocalBoxFuture<'a, Answer>;

fn new_session<'a>(f: &'a Fx, tenant: &'a str, title: &str, parent: Option<&Session>) -> Write<'a> {
    let cmd = CreateSession {
        title: Some(title.to_owned()),
        metadata: json!({ "k": "v" }),
        parent_session_id: parent.map(|p| p.id.clone()),
    };
    async move { Answer::Session(f.store.create_session(tenant, &cmd).await) }.boxed_local()
}

fn new_run<'a>(f: &'a Fx, tenant: &'a str, session: &Session, parent: Option<RunId>) -> Write<'a> {
    let session_id = session.id.clone();
    let cmd = run_cmd(parent);
    async move { Answer::Run(f.store.create_run(tenant, &session_id, &cmd).await) }.boxed_local()
}

fn suspend<'a>(f: &'a Fx, run: &RunId, token: i64, sequence: i64, hash_of: char) -> Write<'a> {
    let run = run.clone();
    let mut cmd = suspend_cmd(token, sequence, true);
    cmd.checkpoint.resolved_spec_hash = hash(hash_of);
    async move { Answer::Run(f.store.suspend_run(Some("acme"), &run, &cmd).await) }.boxed_local()
}

async fn writes_in_one_group_keep_their_own_answers(backend: Backend) {
    let f = fx(backend).await;
    let acme = f.session("acme").await;
    let other = f.session("initech").await;
    let globex = f.session("globex").await;
    let parent_run = f.run(&other).await;
    let mut claims = Vec::new();
    for _ in 0..5 {
        claims.push(f.claimed(&acme).await);
    }
    // The third run suspended once already: its next checkpoint must come after sequence 1.
    f.store
        .suspend_run(
            Some("acme"),
            &claims[2].run.id,
            &suspend_cmd(claims[2].lease.fencing_token, 1, false),
        )
        .await
        .unwrap();
    let resumed = f
        .store
        .resume_run(Some("acme"), &acme.id, &claims[2].run.id, "tok_a")
        .await
        .unwrap();
    assert_eq!(resumed.state, RunState::Resuming);
    let again = f.claim_one("acme").await;
    f.store
        .confirm_resumed(
            Some("acme"),
            &again.run.id,
            &confirm(again.lease.fencing_token),
        )
        .await
        .unwrap();
    let metrics = f.store.metrics().clone();
    let (commits, writes) = (
        metrics.group_commits.load(Ordering::Relaxed),
        metrics.grouped_writes.load(Ordering::Relaxed),
    );

    let c = &claims;
    let token = |i: usize| c[i].lease.fencing_token;
    let writes_asked: Vec<Write> = vec![
        suspend(&f, &c[0].run.id, token(0), 1, 'a'),
        new_session(&f, "acme", "plain", None),
        new_run(&f, "acme", &acme, None),
        suspend(&f, &c[1].run.id, token(1) + 1000, 1, 'a'),
        suspend(&f, &again.run.id, again.lease.fencing_token, 1, 'a'),
        suspend(&f, &c[3].run.id, token(3), 1, 'b'),
        suspend(&f, &c[4].run.id, token(4), 1, 'a'),
        new_session(&f, "acme", "child", Some(&acme)),
        new_session(&f, "acme", "foreign parent", Some(&globex)),
        new_run(&f, "acme", &globex, None),
        new_run(&f, "acme", &acme, Some(parent_run.id.clone())),
        new_run(&f, "initech", &other, Some(parent_run.id.clone())),
    ];
    let count = writes_asked.len() as u64;
    let a = join_all(writes_asked).await;

    assert_eq!(a[0].run().state, RunState::Suspended);
    assert_eq!(a[0].run().id, c[0].run.id);
    assert_eq!(a[1].session().title.as_deref(), Some("plain"));
    assert_eq!(a[1].session().revision, 1);
    assert_eq!(a[2].run().state, RunState::Queued);
    assert_eq!(a[2].run().session_id, acme.id);
    assert_eq!(a[3].refusal(), "lease_lost");
    assert_eq!(a[4].refusal(), "checkpoint.sequence");
    assert_eq!(a[5].refusal(), "invalid:checkpoint.resolved_spec_hash");
    assert_eq!(a[6].run().state, RunState::Suspended);
    assert_eq!(
        a[7].session().parent_session_id.as_ref(),
        Some(&acme.id),
        "a parent of the same tenant"
    );
    assert_eq!(a[8].refusal(), "invalid:parent_session_id");
    assert_eq!(a[9].refusal(), "not_found:session");
    assert_eq!(a[10].refusal(), "invalid:parent_run_id");
    assert_eq!(a[11].run().parent_run_id.as_ref(), Some(&parent_run.id));

    // What was written is what was answered, and nothing else.
    let snap = f.snapshot(&acme).await;
    let state_of = |id: &RunId| snap.runs.iter().find(|r| &r.id == id).map(|r| r.status);
    assert_eq!(snap.pending_interactions.len(), 2, "{snap:?}");
    assert!(state_of(&a[2].run().id).is_some());
    for refused in [&c[1].run.id, &c[3].run.id] {
        let run = f.store.get_run(Some("acme"), refused).await.unwrap();
        assert_eq!(
            run.state,
            RunState::Running,
            "a refused suspension wrote nothing"
        );
    }
    assert_eq!(snap.runs.len(), 6);
    let child = f
        .store
        .get_session(Some("acme"), &a[7].session().id)
        .await
        .unwrap();
    assert_eq!(child.parent_session_id.as_ref(), Some(&acme.id));
    assert!(f
        .store
        .list_sessions("acme", None, 100)
        .await
        .unwrap()
        .iter()
        .all(|s| s.title.as_deref() != Some("foreign parent")));
    let events = f
        .store
        .list_events(Some("acme"), &acme.id, 0, 1000)
        .await
        .unwrap();
    let suspended: Vec<_> = events
        .iter()
        .filter(|e| e.r#type == "run.suspended")
        .collect();
    assert_eq!(suspended.len(), 3, "one before, two in the group");
    // A refused suspension left its lease alone: the runtime may still suspend.
    let retry = f
        .store
        .suspend_run(Some("acme"), &c[3].run.id, &suspend_cmd(token(3), 1, false))
        .await
        .unwrap();
    assert_eq!(retry.state, RunState::Suspended);

    let grouped = metrics.grouped_writes.load(Ordering::Relaxed) - writes;
    let groups = metrics.group_commits.load(Ordering::Relaxed) - commits;
    assert_eq!(grouped, count + 1, "every write went through a group");
    let writers = match backend {
        Backend::Sqlite => 1,
        Backend::Postgres => 2,
    };
    assert!(
        groups <= writers + 2,
        "{grouped} writes took {groups} groups"
    );
}

fn confirm(token: i64) -> sagents::domain::commands::ConfirmResumed {
    serde_json::from_value(json!({
        "fencing_token": token,
        "resolved_spec_hash": hash('a'),
    }))
    .unwrap()
}

/// Triggers that make the database refuse a session titled `refused`, a run whose input
/// is `{"refused": true}` and a checkpoint of codec `refused`.
async fn refuse(f: &Fx) {
    refuse_writes(
        f,
        &[
            ("INSERT", "sessions", "NEW.title = 'refused'".into()),
            ("INSERT", "runs", "NEW.input = '{\"refused\":true}'".into()),
            (
                "INSERT",
                "checkpoints",
                "NEW.codec_version = 'refused'".into(),
            ),
        ],
    )
    .await;
}

async fn a_write_the_database_refuses_fails_alone(backend: Backend) {
    let f = fx(backend).await;
    let acme = f.session("acme").await;
    let mut claims = Vec::new();
    for _ in 0..6 {
        claims.push(f.claimed(&acme).await);
    }
    refuse(&f).await;
    let metrics = f.store.metrics().clone();
    let fallbacks = metrics.group_fallbacks.load(Ordering::Relaxed);

    let refused_run = {
        let session_id = acme.id.clone();
        let mut cmd = run_cmd(None);
        cmd.input = json!({ "refused": true });
        let f = &f;
        async move { Answer::Run(f.store.create_run("acme", &session_id, &cmd).await) }
            .boxed_local()
    };
    let refused_suspend = {
        let run = claims[5].run.id.clone();
        let mut cmd = suspend_cmd(claims[5].lease.fencing_token, 1, true);
        cmd.checkpoint.codec_version = "refused".into();
        let f = &f;
        async move { Answer::Run(f.store.suspend_run(Some("acme"), &run, &cmd).await) }
            .boxed_local()
    };
    let mut asked: Vec<Write> = (0..5)
        .map(|i| suspend(&f, &claims[i].run.id, claims[i].lease.fencing_token, 1, 'a'))
        .collect();
    asked.push(new_session(&f, "acme", "kept", None));
    asked.push(new_run(&f, "acme", &acme, None));
    asked.push(new_session(&f, "acme", "refused", None));
    asked.push(refused_run);
    asked.push(refused_suspend);
    let a = join_all(asked).await;

    for (i, answer) in a.iter().enumerate().take(5) {
        assert_eq!(answer.run().state, RunState::Suspended, "{i}");
    }
    assert_eq!(a[5].session().title.as_deref(), Some("kept"));
    assert_eq!(a[6].run().state, RunState::Queued);
    for (i, answer) in a.iter().enumerate().skip(7) {
        assert!(
            matches!(answer.error(), StoreError::Database(_)),
            "{i}: {answer:?}"
        );
    }
    let snap = f.snapshot(&acme).await;
    assert_eq!(snap.runs.len(), 7, "six claimed runs and the one created");
    assert_eq!(snap.pending_interactions.len(), 5);
    let still_running = f
        .store
        .get_run(Some("acme"), &claims[5].run.id)
        .await
        .unwrap();
    assert_eq!(still_running.state, RunState::Running);
    let titles: Vec<_> = f
        .store
        .list_sessions("acme", None, 100)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|s| s.title)
        .collect();
    assert!(titles.contains(&"kept".to_owned()));
    assert!(!titles.contains(&"refused".to_owned()));
    assert_eq!(
        metrics.group_fallbacks.load(Ordering::Relaxed),
        fallbacks + 1,
        "the group that held the refused writes failed once, then wrote each alone"
    );
}
