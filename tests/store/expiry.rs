//! Expiry policies: a deadline announced once, then a run that fails, is cancelled or goes on
//! with the policy's decision; replicas sweeping at once act once.

use chrono::Duration;
use sagents::domain::commands::{NewInteraction, ReplyInteraction};
use sagents::domain::interaction::{
    ExpiryAction, InteractionStatus, InteractionType, OnExpiry, RESOLVED_BY_EXPIRY,
};
use sagents::domain::run::RunStatus;
use sagents::domain::session::Session;
use sagents::domain::tenant::{ExpiryDefault, TenantPolicy};
use sagents::store::{Backend, Store, StoreError};
use serde_json::json;

use super::{fx, replicas, suspend_cmd, Fx};
use crate::on_both_backends;

on_both_backends!(
    a_deadline_is_announced_once_then_decides_for_the_run,
    a_cancel_policy_cancels_the_run,
    replicas_sweeping_at_once_warn_and_expire_once,
    a_tenants_default_deadline_holds_where_an_interaction_names_none,
);

fn asking(policy: OnExpiry) -> NewInteraction {
    NewInteraction {
        interaction_type: InteractionType::Approval,
        allowed_decisions: vec!["approve".into(), "deny".into()],
        payload: json!({ "command": "deploy" }),
        expires_at: None,
        expires_in_seconds: Some(60),
        warn_before_seconds: Some(20),
        on_expiry: Some(policy),
    }
}

fn deny_on_expiry() -> OnExpiry {
    OnExpiry {
        action: ExpiryAction::Decide,
        decision: Some("deny".into()),
    }
}

/// A run of `session` suspended on `interaction`, on `store`.
async fn suspended_on(store: &Store, session: &Session, interaction: NewInteraction) {
    store
        .create_run(&session.tenant_id, &session.id, &super::run_cmd(None))
        .await
        .unwrap();
    let claim = store
        .claim_runs(Some(&session.tenant_id), "worker-1", 1, super::ttl())
        .await
        .unwrap()
        .remove(0);
    let mut cmd = suspend_cmd(claim.lease.fencing_token, 1, true);
    cmd.interaction = Some(interaction);
    store
        .suspend_run(Some(&session.tenant_id), &claim.run.id, &cmd)
        .await
        .unwrap();
}

fn reply(decision: &str, payload: serde_json::Value) -> ReplyInteraction {
    ReplyInteraction {
        decision: decision.into(),
        payload,
        expected_revision: None,
        payload_sha256: None,
        comment: None,
    }
}

async fn events(f: &Fx, session: &Session) -> Vec<(String, serde_json::Value)> {
    events_on(&f.store, session).await
}

async fn events_on(store: &Store, session: &Session) -> Vec<(String, serde_json::Value)> {
    store
        .list_events(None, &session.id, 0, 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.r#type, e.data))
        .collect()
}

async fn a_deadline_is_announced_once_then_decides_for_the_run(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let asked_at = f.store.now();
    suspended_on(&f.store, &s, asking(deny_on_expiry())).await;
    let pending = f.snapshot(&s).await.pending_interactions.remove(0);
    let deadline = pending.expires_at.expect("a deadline");
    assert_eq!(
        (deadline - asked_at).num_milliseconds(),
        60_000,
        "counted from the commit"
    );
    assert_eq!(pending.on_expiry, deny_on_expiry());

    f.advance(39);
    assert_eq!(f.store.warn_expiring().await.unwrap(), 0);
    f.advance(1);
    assert_eq!(f.store.warn_expiring().await.unwrap(), 1);
    assert_eq!(f.store.warn_expiring().await.unwrap(), 0, "announced once");
    let (kind, data) = events(&f, &s).await.pop().unwrap();
    assert_eq!(kind, "interaction.expiring");
    assert_eq!(data["interaction_id"], json!(pending.id));
    assert_eq!(data["on_expiry"]["decision"], "deny");
    assert_eq!(f.store.expire_interactions().await.unwrap(), 0);

    f.advance(20);
    assert_eq!(f.store.expire_interactions().await.unwrap(), 1);
    assert_eq!(f.store.expire_interactions().await.unwrap(), 0);
    let snap = f.snapshot(&s).await;
    assert!(snap.pending_interactions.is_empty());
    assert_eq!(snap.runs[0].status, RunStatus::Resuming, "the run goes on");
    let late = f
        .store
        .reply_interaction(
            Some("acme"),
            &s.id,
            &pending.id,
            &reply("approve", json!({})),
            "ann",
        )
        .await;
    assert!(
        matches!(
            late,
            Err(StoreError::Conflict {
                code: "interaction.not_pending",
                ..
            })
        ),
        "a late approval does not undo the deadline's decision: {late:?}"
    );
    let same = f
        .store
        .reply_interaction(
            Some("acme"),
            &s.id,
            &pending.id,
            &reply("deny", json!({})),
            "ann",
        )
        .await
        .unwrap();
    assert_eq!(same.interaction.status, InteractionStatus::Resolved);
    let resolution = same.interaction.resolution.expect("a resolution");
    assert_eq!(resolution.decision, "deny");
    assert_eq!(resolution.resolved_by, RESOLVED_BY_EXPIRY);
    let resumed = f.claim_one("acme").await;
    assert_eq!(
        resumed.run.id, snap.runs[0].id,
        "the runtime takes the run up again"
    );
    let kinds: Vec<String> = events(&f, &s).await.into_iter().map(|e| e.0).collect();
    assert!(kinds.ends_with(&[
        "interaction.expired".to_owned(),
        "interaction.resolved".to_owned(),
        "run.resuming".to_owned(),
    ]));
    let resolved = events(&f, &s).await.into_iter().rev().nth(1).unwrap().1;
    assert_eq!(resolved["resolved_by"], RESOLVED_BY_EXPIRY);
    assert_eq!(resolved["by_expiry"], true);
}

async fn a_cancel_policy_cancels_the_run(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let policy = OnExpiry {
        action: ExpiryAction::Cancel,
        decision: None,
    };
    suspended_on(&f.store, &s, asking(policy)).await;
    let id = f.pending_interaction(&s).await;
    f.advance(60);
    assert_eq!(f.store.expire_interactions().await.unwrap(), 1);
    let snap = f.snapshot(&s).await;
    assert_eq!(snap.runs[0].status, RunStatus::Cancelled);
    let run = f.store.get_run(None, &snap.runs[0].id).await.unwrap();
    assert_eq!(run.error.unwrap()["code"], "interaction.expired");
    let late = f
        .store
        .reply_interaction(
            Some("acme"),
            &s.id,
            &id,
            &reply("approve", json!({})),
            "ann",
        )
        .await;
    assert!(
        matches!(
            late,
            Err(StoreError::Conflict {
                code: "interaction.not_pending",
                ..
            })
        ),
        "{late:?}"
    );
    let kinds: Vec<String> = events(&f, &s).await.into_iter().map(|e| e.0).collect();
    assert!(kinds.ends_with(&[
        "interaction.expired".to_owned(),
        "suspension.cancelled".to_owned(),
        "run.cancelled".to_owned(),
    ]));
}

async fn replicas_sweeping_at_once_warn_and_expire_once(backend: Backend) {
    const RUNS: usize = 12;
    let r = replicas(backend).await;
    let (a, b, clock) = (&r.a, &r.b, &r.clock);
    let s = a
        .create_session("acme", &serde_json::from_value(json!({})).unwrap())
        .await
        .unwrap();
    for _ in 0..RUNS {
        suspended_on(a, &s, asking(deny_on_expiry())).await;
    }
    clock.advance(Duration::seconds(40));
    let (wa, wb) = tokio::join!(a.warn_expiring(), b.warn_expiring());
    assert_eq!(wa.unwrap() + wb.unwrap(), RUNS as u64);
    clock.advance(Duration::seconds(20));
    let (ea, eb) = tokio::join!(a.expire_interactions(), b.expire_interactions());
    assert_eq!(ea.unwrap() + eb.unwrap(), RUNS as u64);
    let kinds: Vec<String> = events_on(b, &s).await.into_iter().map(|e| e.0).collect();
    for kind in [
        "interaction.expiring",
        "interaction.expired",
        "interaction.resolved",
        "run.resuming",
    ] {
        let n = kinds.iter().filter(|k| *k == kind).count();
        assert_eq!(n, RUNS, "{kind} once per interaction");
    }
    let snap = b.snapshot(None, &s.id).await.unwrap();
    assert!(snap.runs.iter().all(|r| r.status == RunStatus::Resuming));
    r.close().await;
}

async fn a_tenants_default_deadline_holds_where_an_interaction_names_none(backend: Backend) {
    let f = fx(backend).await;
    let policy = TenantPolicy {
        allow_host_network: false,
        interaction_expiry: Some(ExpiryDefault {
            expires_in_seconds: 120,
            warn_before_seconds: None,
            on_expiry: Some(deny_on_expiry()),
        }),
    };
    f.store
        .put_tenant_policy("acme", &policy, "u")
        .await
        .unwrap();
    let stored = f.store.tenant_policy("acme").await.unwrap();
    assert_eq!(stored.interaction_expiry, policy.interaction_expiry);

    let (acme, beta) = (f.session("acme").await, f.session("beta").await);
    let asked_at = f.store.now();
    f.suspended(&acme, true).await;
    f.suspended(&beta, true).await;
    let own = f.session("acme").await;
    suspended_on(&f.store, &own, asking(OnExpiry::default())).await;

    let got = f.snapshot(&acme).await.pending_interactions.remove(0);
    assert_eq!(got.expires_at, Some(asked_at + Duration::seconds(120)));
    assert_eq!(got.on_expiry, deny_on_expiry());
    let other = f.snapshot(&beta).await.pending_interactions.remove(0);
    assert_eq!(
        other.expires_at, None,
        "another tenant's interactions keep no deadline"
    );
    assert_eq!(other.on_expiry, OnExpiry::default());
    let named = f.snapshot(&own).await.pending_interactions.remove(0);
    assert_eq!(named.expires_at, Some(asked_at + Duration::seconds(60)));
    assert_eq!(named.on_expiry, OnExpiry::default(), "its own policy holds");

    let mut bad = policy.clone();
    if let Some(d) = bad.interaction_expiry.as_mut() {
        d.warn_before_seconds = Some(0);
    }
    assert!(matches!(
        f.store.put_tenant_policy("acme", &bad, "u").await,
        Err(StoreError::Invalid(e)) if e.field == "interaction_expiry.warn_before_seconds"
    ));
    assert_eq!(
        f.store
            .tenant_policy("acme")
            .await
            .unwrap()
            .interaction_expiry,
        policy.interaction_expiry
    );
}
