//! Replies that arrive together are written in one group, and each keeps its own answer.
//! These run on one thread, so every reply is queued before the second group is written:
//! the first reply takes the writer alone and the others share the next group.

use std::sync::atomic::Ordering;

use futures::future::join_all;
use sagents::domain::commands::ReplyInteraction;
use sagents::domain::interaction::InteractionStatus;
use sagents::domain::run::RunStatus;
use sagents::domain::session::Session;
use sagents::domain::{InteractionId, SessionId};
use sagents::store::{Backend, ReplyOutcome, StoreError};

use super::{fx, reply, Fx};

#[tokio::test]
async fn sqlite_replies_in_one_group_keep_their_own_answers() {
    replies_in_one_group_keep_their_own_answers(Backend::Sqlite).await
}

#[tokio::test]
async fn postgres_replies_in_one_group_keep_their_own_answers() {
    replies_in_one_group_keep_their_own_answers(Backend::Postgres).await
}

#[tokio::test]
async fn sqlite_a_reply_the_database_refuses_fails_alone() {
    a_reply_the_database_refuses_fails_alone(Backend::Sqlite).await
}

#[tokio::test]
async fn postgres_a_reply_the_database_refuses_fails_alone() {
    a_reply_the_database_refuses_fails_alone(Backend::Postgres).await
}

#[tokio::test]
async fn sqlite_a_group_writes_each_reply_once() {
    a_group_writes_each_reply_once(Backend::Sqlite).await
}

#[tokio::test]
async fn postgres_a_group_writes_each_reply_once() {
    a_group_writes_each_reply_once(Backend::Postgres).await
}

/// `count` sessions of `acme`, each with a run suspended on a pending approval.
async fn pending(f: &Fx, count: usize) -> Vec<(Session, InteractionId)> {
    let mut out = Vec::new();
    for _ in 0..count {
        let s = f.session("acme").await;
        f.suspended(&s, true).await;
        let id = f.pending_interaction(&s).await;
        out.push((s, id));
    }
    out
}

struct Ask {
    tenant: &'static str,
    session: SessionId,
    interaction: InteractionId,
    cmd: ReplyInteraction,
    actor: &'static str,
}

fn ask(s: &Session, id: &InteractionId, cmd: ReplyInteraction) -> Ask {
    Ask {
        tenant: "acme",
        session: s.id.clone(),
        interaction: id.clone(),
        cmd,
        actor: "tok_a",
    }
}

async fn send_all(f: &Fx, asks: &[Ask]) -> Vec<Result<ReplyOutcome, StoreError>> {
    join_all(asks.iter().map(|a| {
        f.store
            .reply_interaction(Some(a.tenant), &a.session, &a.interaction, &a.cmd, a.actor)
    }))
    .await
}

fn code<T: std::fmt::Debug>(r: &Result<T, StoreError>) -> &'static str {
    match r {
        Err(StoreError::Conflict { code, .. }) => code,
        Err(StoreError::NotFound(what)) => what,
        Err(StoreError::Invalid(_)) => "invalid",
        other => panic!("expected a refusal, got {other:?}"),
    }
}

async fn replies_in_one_group_keep_their_own_answers(backend: Backend) {
    let f = fx(backend).await;
    let p = pending(&f, 8).await;
    let metrics = f.store.metrics().clone();
    let (commits, writes) = (
        metrics.group_commits.load(Ordering::Relaxed),
        metrics.grouped_writes.load(Ordering::Relaxed),
    );

    let mut stale = reply("approve");
    stale.expected_revision = Some(7);
    let mut other_tenant = ask(&p[5].0, &p[5].1, reply("approve"));
    other_tenant.tenant = "globex";
    let asks = vec![
        ask(&p[0].0, &p[0].1, reply("approve")),
        ask(&p[1].0, &p[1].1, reply("approve")),
        ask(&p[2].0, &p[2].1, reply("deny")),
        ask(&p[3].0, &p[3].1, reply("maybe")),
        ask(&p[4].0, &p[4].1, stale),
        other_tenant,
        // The same reply twice and a different one: whichever is written first resolves
        // it, the same reply replays its answer and the other is refused. (PostgreSQL
        // writes groups side by side, so which comes first is not fixed there.)
        ask(&p[6].0, &p[6].1, reply("approve")),
        ask(&p[6].0, &p[6].1, reply("approve")),
        ask(&p[6].0, &p[6].1, reply("deny")),
        // An interaction of another session.
        ask(&p[0].0, &p[7].1, reply("approve")),
    ];
    let answers = send_all(&f, &asks).await;

    for i in [0, 1, 2] {
        let answer = answers[i].as_ref().expect("resolved");
        assert_eq!(answer.interaction.id, asks[i].interaction);
        assert_eq!(answer.interaction.status, InteractionStatus::Resolved);
        assert_eq!(answer.interaction.revision, 2);
        assert_eq!(
            answer.interaction.resolution.as_ref().unwrap().decision,
            asks[i].cmd.decision
        );
        assert_eq!(answer.run_status, RunStatus::Resuming);
    }
    assert_eq!(code(&answers[3]), "invalid");
    assert_eq!(code(&answers[4]), "interaction.revision_mismatch");
    assert_eq!(code(&answers[5]), "interaction");
    match &answers[6] {
        Ok(first) => {
            assert_eq!(answers[7].as_ref().expect("a replay"), first);
            assert_eq!(code(&answers[8]), "interaction.not_pending");
        }
        Err(_) => {
            let deny = answers[8].as_ref().expect("the deny was written first");
            assert_eq!(
                deny.interaction.resolution.as_ref().unwrap().decision,
                "deny"
            );
            assert_eq!(code(&answers[6]), "interaction.not_pending");
            assert_eq!(code(&answers[7]), "interaction.not_pending");
        }
    }
    assert_eq!(code(&answers[9]), "interaction");

    for (i, (s, id)) in p.iter().enumerate() {
        let snap = f.snapshot(s).await;
        let resolved = [0, 1, 2, 6].contains(&i);
        assert_eq!(
            snap.pending_interactions.iter().any(|x| &x.id == id),
            !resolved,
            "session {i}"
        );
        let status = snap.runs[0].status;
        let expected = if resolved {
            RunStatus::Resuming
        } else {
            RunStatus::WaitingForInput
        };
        assert_eq!(status, expected, "session {i}");
    }
    let events = f
        .store
        .list_events(Some("acme"), &p[1].0.id, 0, 100)
        .await
        .unwrap();
    let kinds: Vec<&str> = events
        .iter()
        .rev()
        .take(2)
        .map(|e| e.r#type.as_str())
        .collect();
    assert_eq!(kinds, ["run.resuming", "interaction.resolved"]);

    let grouped = metrics.grouped_writes.load(Ordering::Relaxed) - writes;
    let groups = metrics.group_commits.load(Ordering::Relaxed) - commits;
    assert_eq!(
        grouped,
        asks.len() as u64,
        "every reply went through a group"
    );
    // The first replies take every free writer (one on SQLite, four on PostgreSQL) alone;
    // the rest share one group, but for the two later replies to the same interaction,
    // which each wait for the next group so they see the one before.
    let writers = match backend {
        Backend::Sqlite => 1,
        Backend::Postgres => 2,
    };
    assert!(
        groups <= writers + 3,
        "{grouped} replies took {groups} groups"
    );
}

/// A trigger that makes the database refuse any reply by `actor`.
async fn refuse_actor(f: &Fx, actor: &str) {
    let raw = sqlx::AnyPool::connect(f.store.url()).await.unwrap();
    let statements = match f.store.backend() {
        Backend::Sqlite => vec![format!(
            "CREATE TRIGGER refuse BEFORE UPDATE ON interactions \
             WHEN NEW.resolved_by = '{actor}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )],
        Backend::Postgres => vec![
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'refused'; END $$"
                .to_owned(),
            format!(
                "CREATE TRIGGER refuse BEFORE UPDATE ON interactions FOR EACH ROW \
                 WHEN (NEW.resolved_by = '{actor}') EXECUTE FUNCTION refuse()"
            ),
        ],
    };
    for sql in statements {
        sqlx::query(&sql).execute(&raw).await.unwrap();
    }
    raw.close().await;
}

async fn a_reply_the_database_refuses_fails_alone(backend: Backend) {
    let f = fx(backend).await;
    let p = pending(&f, 6).await;
    refuse_actor(&f, "tok_refused").await;
    let metrics = f.store.metrics().clone();
    let fallbacks = metrics.group_fallbacks.load(Ordering::Relaxed);

    let mut asks: Vec<Ask> = p
        .iter()
        .map(|(s, id)| ask(s, id, reply("approve")))
        .collect();
    const LAST: usize = 5;
    asks[LAST].actor = "tok_refused";
    let answers = send_all(&f, &asks).await;

    assert!(
        matches!(answers[LAST], Err(StoreError::Database(_))),
        "{:?}",
        answers[LAST]
    );
    for (i, answer) in answers.iter().enumerate().take(LAST) {
        let answer = answer.as_ref().expect("the others are written");
        assert_eq!(
            answer.interaction.status,
            InteractionStatus::Resolved,
            "{i}"
        );
        let snap = f.snapshot(&p[i].0).await;
        assert!(snap.pending_interactions.is_empty(), "{i}");
        assert_eq!(snap.runs[0].status, RunStatus::Resuming, "{i}");
    }
    let snap = f.snapshot(&p[LAST].0).await;
    assert_eq!(
        snap.pending_interactions[0].id, p[LAST].1,
        "the refused reply changed nothing"
    );
    assert_eq!(snap.runs[0].status, RunStatus::WaitingForInput);
    assert_eq!(
        metrics.group_fallbacks.load(Ordering::Relaxed),
        fallbacks + 1,
        "the group that held the refused reply failed once, then wrote each alone"
    );
}

/// A group whose size is not one its statements are written for (they are padded with
/// repeated rows on PostgreSQL): every session, interaction and event is written once.
async fn a_group_writes_each_reply_once(backend: Backend) {
    let f = fx(backend).await;
    // One or two replies take the free writers alone; the other five or six share a group.
    let p = pending(&f, 7).await;
    let mut before = Vec::new();
    for (s, _) in &p {
        let snap = f.snapshot(s).await;
        let run = f
            .store
            .get_run(Some("acme"), &snap.runs[0].id)
            .await
            .unwrap();
        let revision = (snap.session.revision, run.revision);
        let events = f
            .store
            .list_events(Some("acme"), &s.id, 0, 100)
            .await
            .unwrap();
        before.push((revision, events.len() as i64));
    }
    let asks: Vec<Ask> = p
        .iter()
        .map(|(s, id)| ask(s, id, reply("approve")))
        .collect();
    let fallbacks = f.store.metrics().group_fallbacks.load(Ordering::Relaxed);
    let answers = send_all(&f, &asks).await;
    // A group the database refused would be written again reply by reply, unpadded.
    assert_eq!(
        f.store.metrics().group_fallbacks.load(Ordering::Relaxed),
        fallbacks
    );

    for (i, (s, id)) in p.iter().enumerate() {
        let answer = answers[i].as_ref().expect("resolved");
        assert_eq!(&answer.interaction.id, id);
        assert_eq!(answer.interaction.revision, 2, "session {i}");
        let snap = f.snapshot(s).await;
        assert_eq!(snap.session.revision, before[i].0 .0 + 1, "session {i}");
        let run = f
            .store
            .get_run(Some("acme"), &snap.runs[0].id)
            .await
            .unwrap();
        assert_eq!(run.revision, before[i].0 .1 + 1, "session {i}");
        assert!(snap.pending_interactions.is_empty(), "session {i}");
        assert_eq!(snap.runs[0].status, RunStatus::Resuming, "session {i}");
        let events = f
            .store
            .list_events(Some("acme"), &s.id, 0, 100)
            .await
            .unwrap();
        let sequences: Vec<i64> = events.iter().map(|e| e.sequence).collect();
        let last = before[i].1;
        assert_eq!(sequences, (1..=last + 2).collect::<Vec<_>>(), "session {i}");
        let new: Vec<(i64, &str)> = events
            .iter()
            .skip(last as usize)
            .map(|e| (e.sequence, e.r#type.as_str()))
            .collect();
        assert_eq!(
            new,
            [
                (last + 1, "interaction.resolved"),
                (last + 2, "run.resuming")
            ],
            "session {i}"
        );
    }
    // A replay answers with the interaction as stored: resolved once, at revision 2.
    for (i, replay) in send_all(&f, &asks).await.iter().enumerate() {
        let stored = &replay.as_ref().expect("a replay").interaction;
        assert_eq!(stored.revision, 2, "session {i}");
        assert_eq!(stored.status, InteractionStatus::Resolved, "session {i}");
    }
}
