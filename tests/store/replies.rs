use chrono::Duration;
use sagents::domain::commands::NewInteraction;
use sagents::domain::interaction::{payload_digest, InteractionStatus, InteractionType};
use sagents::domain::run::{RunState, RunStatus};
use sagents::domain::{InteractionId, SessionId};
use sagents::store::{Backend, StoreError};
use serde_json::json;

use super::{fx, reply, suspend_cmd};
use crate::on_both_backends;

on_both_backends!(
    replies_resolve_once_and_replay_the_first_answer,
    replies_must_fit_the_interaction,
    expired_interactions_fail_their_runs,
    a_reply_is_bound_to_the_payload_shown_and_keeps_its_comment,
);

fn conflict<T: std::fmt::Debug>(r: Result<T, StoreError>) -> &'static str {
    match r {
        Err(StoreError::Conflict { code, .. }) => code,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

async fn replies_resolve_once_and_replay_the_first_answer(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let (run_id, _) = f.suspended(&s, true).await;
    let id = f.pending_interaction(&s).await;

    let mut first = reply("approve");
    first.expected_revision = Some(1);
    let answer = f
        .store
        .reply_interaction(Some("acme"), &s.id, &id, &first, "tok_a")
        .await
        .unwrap();
    assert_eq!(answer.interaction.status, InteractionStatus::Resolved);
    let after = f.snapshot(&s).await;

    f.advance(3);
    let replay = f
        .store
        .reply_interaction(Some("acme"), &s.id, &id, &first, "tok_b")
        .await
        .unwrap();
    assert_eq!(
        replay.interaction, answer.interaction,
        "the first answer, unchanged"
    );
    assert_eq!(replay.run_status, RunStatus::Resuming);
    assert_eq!(f.snapshot(&s).await, after, "a replay changes nothing");

    assert_eq!(
        conflict(
            f.store
                .reply_interaction(Some("acme"), &s.id, &id, &reply("deny"), "tok_a")
                .await
        ),
        "interaction.not_pending"
    );
    let mut other_payload = reply("approve");
    other_payload.payload = json!({ "note": "changed my mind" });
    assert_eq!(
        conflict(
            f.store
                .reply_interaction(Some("acme"), &s.id, &id, &other_payload, "tok_a")
                .await
        ),
        "interaction.not_pending"
    );
    assert_eq!(
        f.store.get_run(None, &run_id).await.unwrap().state,
        RunState::Resuming
    );
}

async fn replies_must_fit_the_interaction(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    f.suspended(&s, true).await;
    let id = f.pending_interaction(&s).await;
    let before = f.snapshot(&s).await;

    match f
        .store
        .reply_interaction(Some("acme"), &s.id, &id, &reply("maybe"), "u")
        .await
    {
        Err(StoreError::Invalid(e)) => {
            assert_eq!(e.field, "decision");
            assert!(e.message.contains("approve"));
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
    let mut stale = reply("approve");
    stale.expected_revision = Some(7);
    assert_eq!(
        conflict(
            f.store
                .reply_interaction(Some("acme"), &s.id, &id, &stale, "u")
                .await
        ),
        "interaction.revision_mismatch"
    );
    let elsewhere = f.session("acme").await;
    for (tenant, session, interaction) in [
        (Some("globex"), &s.id, &id),
        (Some("acme"), &elsewhere.id, &id),
        (Some("acme"), &SessionId::new(), &id),
        (Some("acme"), &s.id, &InteractionId::new()),
    ] {
        assert!(matches!(
            f.store
                .reply_interaction(tenant, session, interaction, &reply("approve"), "u")
                .await,
            Err(StoreError::NotFound("interaction"))
        ));
    }
    assert_eq!(
        f.snapshot(&s).await,
        before,
        "refused replies change nothing"
    );
}

async fn expired_interactions_fail_their_runs(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let keeper = f.session("acme").await;
    f.suspended(&keeper, true).await;

    let claim = f.claimed(&s).await;
    let mut cmd = suspend_cmd(claim.lease.fencing_token, 1, true);
    cmd.interaction = Some(NewInteraction {
        interaction_type: InteractionType::UserInput,
        allowed_decisions: vec!["submit".into()],
        payload: json!({ "question": "which branch?" }),
        expires_at: Some(f.store.now() + Duration::seconds(60)),
        expires_in_seconds: None,
        warn_before_seconds: None,
        on_expiry: None,
    });
    f.store
        .suspend_run(Some("acme"), &claim.run.id, &cmd)
        .await
        .unwrap();
    let id = f.pending_interaction(&s).await;
    assert_eq!(f.store.expire_interactions().await.unwrap(), 0);

    f.advance(60);
    let before = f.snapshot(&s).await;
    assert_eq!(
        conflict(
            f.store
                .reply_interaction(Some("acme"), &s.id, &id, &reply("submit"), "u")
                .await
        ),
        "interaction.expired"
    );
    assert_eq!(f.snapshot(&s).await, before);

    let mut watch = f.store.hub().subscribe_session(s.id.as_str());
    assert_eq!(f.store.expire_interactions().await.unwrap(), 1);
    assert!(watch.changed(std::time::Duration::ZERO).await);
    let snap = f.snapshot(&s).await;
    assert!(snap.pending_interactions.is_empty());
    assert_eq!(snap.runs[0].status, RunStatus::Failed);
    assert_eq!(snap.session.revision, before.session.revision + 1);
    let run = f.store.get_run(None, &claim.run.id).await.unwrap();
    assert_eq!(run.error.as_ref().unwrap()["code"], "interaction.expired");
    assert_eq!(f.store.expire_interactions().await.unwrap(), 0);
    assert_eq!(
        conflict(
            f.store
                .reply_interaction(Some("acme"), &s.id, &id, &reply("submit"), "u")
                .await
        ),
        "interaction.not_pending"
    );
    let types: Vec<_> = f
        .store
        .list_events(None, &s.id, 0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.r#type)
        .collect();
    assert!(types.ends_with(&[
        "interaction.expired".to_owned(),
        "suspension.cancelled".to_owned(),
        "run.failed".to_owned()
    ]));
    assert_eq!(
        f.snapshot(&keeper).await.pending_interactions.len(),
        1,
        "interactions without a deadline never expire"
    );
}

/// A reply that names the digest of the payload it was made for is refused when the
/// interaction's payload is another one; its comment is kept with the resolution and logged.
async fn a_reply_is_bound_to_the_payload_shown_and_keeps_its_comment(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    f.suspended(&s, true).await;
    let before = f.snapshot(&s).await;
    let pending = &before.pending_interactions[0];
    assert_eq!(
        pending.payload_sha256,
        payload_digest(&pending.payload),
        "the snapshot serves the payload's digest"
    );

    let mut elsewhere = reply("approve");
    elsewhere.payload_sha256 = Some(payload_digest(&json!({ "command": "rm -rf /" })));
    assert_eq!(
        conflict(
            f.store
                .reply_interaction(Some("acme"), &s.id, &pending.id, &elsewhere, "u")
                .await
        ),
        "interaction.payload_changed"
    );
    assert_eq!(
        f.snapshot(&s).await,
        before,
        "a refused reply changes nothing"
    );

    let mut bound = reply("approve");
    bound.payload_sha256 = Some(pending.payload_sha256.clone());
    bound.comment = Some("checked the diff with Ann".into());
    let answer = f
        .store
        .reply_interaction(Some("acme"), &s.id, &pending.id, &bound, "u")
        .await
        .unwrap();
    let resolution = answer.interaction.resolution.expect("resolved");
    assert_eq!(
        resolution.comment.as_deref(),
        Some("checked the diff with Ann")
    );
    f.advance(1);
    let replay = f
        .store
        .reply_interaction(Some("acme"), &s.id, &pending.id, &bound, "u")
        .await
        .unwrap();
    assert_eq!(
        replay
            .interaction
            .resolution
            .and_then(|r| r.comment)
            .as_deref(),
        Some("checked the diff with Ann"),
        "the comment is stored"
    );
    let events = f
        .store
        .list_events(Some("acme"), &s.id, 0, 100)
        .await
        .unwrap();
    let resolved = events
        .iter()
        .find(|e| e.r#type == "interaction.resolved")
        .expect("a resolution entry");
    assert_eq!(resolved.data["comment"], "checked the diff with Ann");
}
