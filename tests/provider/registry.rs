//! Registration through a real store (SQLite and PostgreSQL) against real providers.

use std::sync::Arc;

use axum::routing::get;
use axum::{Json, Router};
use sagents::clock::SystemClock;
use sagents::config::{generate_key, Sealer};
use sagents::metrics::Metrics;
use sagents::notify::ChangeHub;
use sagents::service::providers::{
    client_for, list_providers, register_provider, RegisterProvider, RegistryError,
};
use sagents::store::{Backend, Store, StoreError};

use super::Harness;
use crate::common::db;
use crate::on_both_backends;

on_both_backends!(
    a_v3_provider_is_registered_and_listed_without_its_token,
    a_v2_provider_is_refused_and_nothing_is_stored,
    sealed_tokens_survive_a_key_rotation_and_need_their_key
);

async fn sealed_store(url: &str, keys: &str) -> Store {
    let store = Store::connect(
        url,
        Arc::new(SystemClock),
        ChangeHub::new(),
        Arc::new(Metrics::default()),
    )
    .await
    .unwrap();
    store.migrate().await.unwrap();
    assert!(store.use_sealer(Sealer::from_keys(keys).unwrap()));
    store
}

async fn sealed_tokens_survive_a_key_rotation_and_need_their_key(backend: Backend) {
    let (url, _db) = db::fresh_url(backend).await;
    let (old, new) = (generate_key().unwrap(), generate_key().unwrap());
    let local =
        Harness::with(|c| c.token = Some("provider-secret-0123456789abcdef0123".into())).await;
    let req = RegisterProvider {
        provider_id: "local-1".into(),
        base_url: local.base_url(),
        token: "provider-secret-0123456789abcdef0123".into(),
    };
    let token_of = |store: Store| async move {
        let record = store.get_provider("local-1").await.unwrap().unwrap();
        assert!(client_for(&record)
            .unwrap()
            .capabilities(&Default::default())
            .await
            .is_ok());
        store.close().await;
        record.token
    };

    let store = sealed_store(&url, &old).await;
    register_provider(&store, &req, "u").await.unwrap();
    let sealed_old = db::column_text(&url, "providers", "token").await;
    assert!(sealed_old[0].starts_with("sealed:v1:") && !sealed_old[0].contains("provider"));
    assert_eq!(
        token_of(store).await,
        "provider-secret-0123456789abcdef0123"
    );

    // Rotation: the new key seals, the old one still opens; a reseal moves every token over.
    let rotating = sealed_store(&url, &format!("{new},{old}")).await;
    assert_eq!(rotating.reseal_provider_tokens().await.unwrap(), 1);
    assert_eq!(rotating.reseal_provider_tokens().await.unwrap(), 0);
    let sealed_new = db::column_text(&url, "providers", "token").await;
    assert_ne!(sealed_new, sealed_old);
    assert_eq!(
        token_of(rotating).await,
        "provider-secret-0123456789abcdef0123"
    );
    assert_eq!(
        token_of(sealed_store(&url, &new).await).await,
        "provider-secret-0123456789abcdef0123"
    );

    // Without its key a token is unusable, says why, and nothing is rewritten.
    let stranger = sealed_store(&url, &generate_key().unwrap()).await;
    let e = stranger.get_provider("local-1").await.unwrap_err();
    assert!(
        matches!(&e, StoreError::Unavailable(m) if m.contains("not configured")),
        "{e:?}"
    );
    assert!(stranger.reseal_provider_tokens().await.is_err());
    assert_eq!(
        db::column_text(&url, "providers", "token").await,
        sealed_new
    );
}

async fn a_v3_provider_is_registered_and_listed_without_its_token(backend: Backend) {
    let (store, _db) = db::store(backend, Arc::new(SystemClock)).await;
    let local =
        Harness::with(|c| c.token = Some("provider-secret-0123456789abcdef0123".into())).await;
    let req = RegisterProvider {
        provider_id: "local-1".into(),
        base_url: local.base_url(),
        token: "provider-secret-0123456789abcdef0123".into(),
    };
    let info = register_provider(&store, &req, "u").await.unwrap();
    assert_eq!(info.provider_id, "local-1");
    assert_eq!(info.capabilities.api_version, "3");
    let listed = list_providers(&store).await.unwrap();
    assert_eq!(listed, vec![info.clone()]);
    let json = serde_json::to_string(&listed).unwrap();
    assert!(
        !json.contains("provider-secret-0123456789abcdef0123"),
        "{json}"
    );
    // The stored token is the one the provider accepts.
    let record = store.get_provider("local-1").await.unwrap().unwrap();
    let client = sagents::service::providers::client_for(&record).unwrap();
    assert!(client.capabilities(&Default::default()).await.is_ok());
    // A wrong token is found out at registration.
    let wrong = RegisterProvider {
        token: "nope".into(),
        ..req.clone()
    };
    let e = register_provider(&store, &wrong, "u").await.unwrap_err();
    assert!(matches!(e, RegistryError::ProviderRefused(_)), "{e:?}");
    assert_eq!((e.code(), e.http_status()), ("provider.refused", 422));
    assert_eq!(
        store.get_provider("local-1").await.unwrap().unwrap().token,
        "provider-secret-0123456789abcdef0123"
    );
}

async fn a_v2_provider_is_refused_and_nothing_is_stored(backend: Backend) {
    let (store, _db) = db::store(backend, Arc::new(SystemClock)).await;
    let app = Router::new().route(
        "/v3/capabilities",
        get(|| async {
            Json(serde_json::json!({
                "api_version": "2", "capability": "execution.sandbox", "provider_id": "old",
                "provider_version": "2.9", "isolation_level": "vm",
                "supported_release_dispositions": ["terminate"], "supports_snapshot": false,
                "supports_restore": false, "supports_reconnect": false
            }))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let req = RegisterProvider {
        provider_id: "old".into(),
        base_url: format!("http://{addr}"),
        token: "t".into(),
    };
    let e = register_provider(&store, &req, "u").await.unwrap_err();
    assert_eq!(
        (e.code(), e.http_status()),
        ("provider.api_version_unsupported", 422)
    );
    let bad = RegisterProvider {
        base_url: "file:///etc/passwd".into(),
        ..req
    };
    let e = register_provider(&store, &bad, "u").await.unwrap_err();
    assert_eq!((e.code(), e.http_status()), ("validation.failed", 422));
    assert!(list_providers(&store).await.unwrap().is_empty());
}
