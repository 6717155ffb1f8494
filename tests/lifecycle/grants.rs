//! A heartbeat renews the sandbox grant with the lease, so a long run keeps its exec; the
//! provider checks grants against the app's clock, moved here without sleeping.

use sagents::store::Backend;
use serde_json::json;

use super::fixture::ax;
use crate::on_both_backends;

on_both_backends!(a_heartbeat_renews_the_grant_past_the_first_ones_expiry);

async fn a_heartbeat_renews_the_grant_past_the_first_ones_expiry(backend: Backend) {
    let ax = ax(backend).await;
    let session = ax.app.create_session().await;
    let (_run, first) = ax.running_isolated(&session).await;
    assert!(
        first.grant.starts_with("sgr2."),
        "an Ed25519 grant: {}",
        first.grant
    );
    assert_eq!(ax.sh(&first, "echo one").await, "one\n");

    let ttl = ax.app.state.config.lease_ttl().num_seconds();
    ax.advance(ttl - 5);
    let renewed = ax
        .app
        .post_ok(
            &format!("/v1/runtime/leases/{}/heartbeat", first.lease_id),
            &ax.app.runtime,
            &json!({"fencing_token": first.token}),
            200,
        )
        .await;
    let grant = renewed["grant"].as_str().expect("a fresh grant").to_owned();
    assert_ne!(grant, first.grant);

    ax.advance(10);
    let refused = ax.exec(&first, "true").await;
    assert!(
        matches!(&refused, Err(e) if e.to_string().contains("grant.invalid") && e.to_string().contains("expired")),
        "the first grant has expired: {refused:?}"
    );
    let second = super::fixture::Claimed {
        grant,
        ..first.clone()
    };
    assert_eq!(ax.sh(&second, "echo two").await, "two\n");
}
