//! The audit trail: decisions, expiries, cancels and operators' changes land in their
//! tenant's hash chain with the change itself, in order, and any edit breaks the chain.

use sagents::domain::audit::{self, SYSTEM_CHAIN};
use sagents::domain::interaction::Resolver;
use sagents::domain::tenant::TenantPolicy;
use sagents::domain::token::{NewToken, Role};
use sagents::store::{Backend, Store};
use serde_json::json;

use super::{fx, replicas, reply};
use crate::on_both_backends;

on_both_backends!(
    every_decision_and_change_lands_in_its_chain,
    an_edited_record_breaks_the_chain_where_it_was_edited,
    replicas_appending_at_once_keep_one_unbroken_chain,
);

async fn every_decision_and_change_lands_in_its_chain(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let (_, _) = f.suspended(&s, true).await;
    let id = f.pending_interaction(&s).await;
    let ann = Resolver {
        id: "token:tok_ann".into(),
        name: Some("Ann".into()),
    };
    let mut answer = reply("approve");
    answer.comment = Some("checked the diff".into());
    f.store
        .reply_interaction(Some("acme"), &s.id, &id, &answer, ann.clone())
        .await
        .unwrap();
    // A refused reply writes nothing, to the chain neither.
    assert!(f
        .store
        .reply_interaction(Some("acme"), &s.id, &id, &reply("deny"), "token:tok_bob")
        .await
        .is_err());
    let queued = f.run(&s).await;
    f.store
        .cancel_run(Some("acme"), &s.id, &queued.id, ann.clone())
        .await
        .unwrap();
    let new = NewToken {
        role: Role::Frontend,
        tenant: Some("acme".into()),
        expires_at: None,
        name: Some("Bob".into()),
    };
    let (bob, secret) = f.store.create_token_keyed(&new, "cli", None).await.unwrap();
    f.store.revoke_token(&bob.id, "cli").await.unwrap();
    f.store.revoke_token(&bob.id, "cli").await.unwrap();
    f.store
        .put_tenant_policy("acme", &TenantPolicy::default(), "token:tok_admin")
        .await
        .unwrap();
    f.store.create_token(Role::Admin, None, None).await.unwrap();

    let chain = f.store.list_audit("acme", 0, None, 100).await.unwrap();
    let kinds: Vec<&str> = chain.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "interaction.resolved",
            "run.cancelled",
            "token.created",
            "token.revoked",
            "tenant_policy.changed"
        ],
        "a second revocation changes nothing"
    );
    let decision = &chain[0];
    assert_eq!(decision.subject, id.to_string());
    assert_eq!(
        (decision.actor.as_str(), decision.actor_name.as_deref()),
        ("token:tok_ann", Some("Ann"))
    );
    assert_eq!(decision.data["decision"], "approve");
    assert_eq!(decision.data["comment"], "checked the diff");
    assert_eq!(decision.data["session_id"], json!(s.id));
    assert_eq!(chain[1].subject, queued.id.to_string());
    assert_eq!(chain[2].data["name"], "Bob");
    let exported = serde_json::to_string(&chain).unwrap();
    assert!(!exported.contains(&secret), "no secret is audited");
    assert_eq!(audit::verify(&chain).unwrap()["acme"], 5);
    assert_eq!(
        (chain[0].sequence, chain[0].prev_hash.as_str()),
        (1, audit::GENESIS)
    );

    let system = f
        .store
        .list_audit(SYSTEM_CHAIN, 0, None, 100)
        .await
        .unwrap();
    assert_eq!(system.len(), 1, "the admin token is the system chain's");
    assert_eq!(system[0].kind, "token.created");
    assert!(f
        .store
        .list_audit("beta", 0, None, 100)
        .await
        .unwrap()
        .is_empty());

    let page = f.store.list_audit("acme", 2, None, 2).await.unwrap();
    assert_eq!(page.iter().map(|r| r.sequence).collect::<Vec<_>>(), [3, 4]);
    f.advance(5);
    let later = f.store.now();
    f.store
        .put_tenant_policy("acme", &TenantPolicy::default(), "token:tok_admin")
        .await
        .unwrap();
    let since = f
        .store
        .list_audit("acme", 0, Some(later), 100)
        .await
        .unwrap();
    assert_eq!(since.iter().map(|r| r.sequence).collect::<Vec<_>>(), [6]);
}

async fn an_edited_record_breaks_the_chain_where_it_was_edited(backend: Backend) {
    let r = replicas(backend).await;
    let store = &r.a;
    for _ in 0..3 {
        store
            .put_tenant_policy("acme", &TenantPolicy::default(), "token:tok_admin")
            .await
            .unwrap();
    }
    assert!(audit::verify(&store.list_audit("acme", 0, None, 10).await.unwrap()).is_ok());
    crate::common::db::execute(
        &r.url,
        "UPDATE audit_records SET actor = 'token:tok_mallory' WHERE sequence = 2",
    )
    .await;
    let broken = audit::verify(&store.list_audit("acme", 0, None, 10).await.unwrap()).unwrap_err();
    assert_eq!((broken.tenant.as_str(), broken.sequence), ("acme", 2));
    r.close().await;
}

async fn replicas_appending_at_once_keep_one_unbroken_chain(backend: Backend) {
    const EACH: usize = 8;
    let r = replicas(backend).await;
    let changes = |store: Store| async move {
        for _ in 0..EACH {
            store
                .put_tenant_policy("acme", &TenantPolicy::default(), "token:tok_admin")
                .await
                .unwrap();
        }
        store
    };
    let (a, b) = tokio::join!(changes(r.a.clone()), changes(r.b.clone()));
    let chain = a.list_audit("acme", 0, None, 100).await.unwrap();
    assert_eq!(audit::verify(&chain).unwrap()["acme"], 2 * EACH);
    drop((a, b));
    r.close().await;
}
