use std::sync::Arc;

use chrono::Duration;
use sagents::clock::SystemClock;
use sagents::domain::token::{hash_secret, Role};
use sagents::domain::TokenId;
use sagents::metrics::Metrics;
use sagents::notify::ChangeHub;
use sagents::store::{Backend, IdempotencyBegin, Store, StoreError};
use serde_json::json;

use super::{fx, run_cmd};

/// How long a request may run with the default configuration (a 60 s long-poll and 15 s).
const IN_FLIGHT: Duration = Duration::seconds(75);
use crate::common::db;
use crate::on_both_backends;

on_both_backends!(
    tokens_are_stored_hashed_and_revocable,
    idempotency_keys_replay_and_refuse,
    providers_are_upserted_and_listed,
    concurrent_setting_init_agrees_on_one_value,
    readiness_needs_every_migration,
    postgres_sessions_run_without_jit,
    corrupt_rows_are_errors_not_panics,
);

async fn tokens_are_stored_hashed_and_revocable(backend: Backend) {
    let f = fx(backend).await;
    let (front, secret) = f
        .store
        .create_token(Role::Frontend, Some("acme"), None)
        .await
        .unwrap();
    assert_eq!(front.tenant_id.as_deref(), Some("acme"));
    assert!(secret.starts_with("sag_"));
    let (admin, admin_secret) = f.store.create_token(Role::Admin, None, None).await.unwrap();
    assert_ne!(secret, admin_secret);

    for (role, tenant) in [
        (Role::Frontend, None),
        (Role::Runtime, None),
        (Role::Admin, Some("acme")),
        (Role::Metrics, Some("acme")),
        (Role::Runtime, Some("no spaces")),
    ] {
        match f.store.create_token(role, tenant, None).await {
            Err(StoreError::Invalid(e)) => assert_eq!(e.field, "tenant"),
            other => panic!("{role} {tenant:?}: expected Invalid, got {other:?}"),
        }
    }

    let p = f
        .store
        .authenticate(&hash_secret(&secret))
        .await
        .unwrap()
        .expect("the token authenticates by its hash");
    assert_eq!(
        (p.token_id, p.role, p.tenant_id),
        (front.id.clone(), Role::Frontend, Some("acme".into()))
    );
    let p = f
        .store
        .authenticate(&hash_secret(&admin_secret))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((p.role, p.tenant_id), (Role::Admin, None));
    assert_eq!(
        f.store.authenticate(&secret).await.unwrap(),
        None,
        "the raw secret is not stored"
    );
    assert_eq!(
        f.store
            .authenticate(&hash_secret("sag_nope"))
            .await
            .unwrap(),
        None
    );

    let listed = f.store.list_tokens().await.unwrap();
    assert_eq!(listed, vec![front.clone(), admin.clone()]);

    f.advance(5);
    let revoked = f.store.revoke_token(&front.id, "u").await.unwrap();
    assert_eq!(revoked.revoked_at, Some(f.store.now()));
    assert_eq!(
        f.store.authenticate(&hash_secret(&secret)).await.unwrap(),
        None
    );
    f.advance(5);
    assert_eq!(
        f.store.revoke_token(&front.id, "u").await.unwrap(),
        revoked,
        "revoking twice changes nothing"
    );
    assert!(matches!(
        f.store.revoke_token(&TokenId::new(), "u").await,
        Err(StoreError::NotFound("token"))
    ));
    assert!(f
        .store
        .authenticate(&hash_secret(&admin_secret))
        .await
        .unwrap()
        .is_some());
}

async fn idempotency_keys_replay_and_refuse(backend: Backend) {
    let f = fx(backend).await;
    let s = &f.store;
    assert_eq!(
        s.idempotency_begin("tok_a", "k1", "h1", IN_FLIGHT)
            .await
            .unwrap(),
        IdempotencyBegin::Started
    );
    assert_eq!(
        s.idempotency_begin("tok_a", "k1", "h1", IN_FLIGHT)
            .await
            .unwrap(),
        IdempotencyBegin::InFlight
    );
    assert_eq!(
        s.idempotency_begin("tok_a", "k1", "h2", IN_FLIGHT)
            .await
            .unwrap(),
        IdempotencyBegin::Mismatch
    );
    assert_eq!(
        s.idempotency_begin("tok_b", "k1", "h2", IN_FLIGHT)
            .await
            .unwrap(),
        IdempotencyBegin::Started,
        "keys are scoped per caller"
    );

    let body = br#"{"id":"ses_1"}"#;
    s.idempotency_finish("tok_a", "k1", 201, body)
        .await
        .unwrap();
    assert_eq!(
        s.idempotency_begin("tok_a", "k1", "h1", IN_FLIGHT)
            .await
            .unwrap(),
        IdempotencyBegin::Replay {
            status: 201,
            body: body.to_vec()
        }
    );
    assert_eq!(
        s.idempotency_begin("tok_a", "k1", "h2", IN_FLIGHT)
            .await
            .unwrap(),
        IdempotencyBegin::Mismatch
    );

    assert_eq!(
        s.idempotency_begin("tok_a", "k2", "h", IN_FLIGHT)
            .await
            .unwrap(),
        IdempotencyBegin::Started
    );
    s.idempotency_abort("tok_a", "k2").await.unwrap();
    assert_eq!(
        s.idempotency_begin("tok_a", "k2", "other", IN_FLIGHT)
            .await
            .unwrap(),
        IdempotencyBegin::Started,
        "an aborted key is free again"
    );

    f.advance(IN_FLIGHT.num_seconds() - 1);
    assert_eq!(
        s.idempotency_begin("tok_a", "k2", "other", IN_FLIGHT)
            .await
            .unwrap(),
        IdempotencyBegin::InFlight,
        "its request may still be running"
    );
    f.advance(1);
    assert_eq!(
        s.idempotency_begin("tok_a", "k2", "other", IN_FLIGHT)
            .await
            .unwrap(),
        IdempotencyBegin::Started,
        "past its request's deadline the key is taken over and the retry runs"
    );
    assert_eq!(
        s.idempotency_begin("tok_a", "k2", "other", IN_FLIGHT)
            .await
            .unwrap(),
        IdempotencyBegin::InFlight
    );

    f.clock.advance(Duration::hours(25));
    assert_eq!(s.purge_idempotency(Duration::hours(24)).await.unwrap(), 1);
    assert_eq!(
        s.idempotency_begin("tok_a", "k1", "h3", IN_FLIGHT)
            .await
            .unwrap(),
        IdempotencyBegin::Started
    );
}

async fn providers_are_upserted_and_listed(backend: Backend) {
    let f = fx(backend).await;
    let caps = json!({ "api_version": "3", "capability": "execution.sandbox" });
    let b = f
        .store
        .upsert_provider("zeta", "http://127.0.0.1:9001", "t1", &caps, "u")
        .await
        .unwrap();
    let a = f
        .store
        .upsert_provider("alpha", "http://127.0.0.1:9000", "t0", &caps, "u")
        .await
        .unwrap();
    assert_eq!(a.capabilities, caps);
    assert_eq!(
        f.store.list_providers().await.unwrap(),
        vec![a.clone(), b.clone()]
    );

    f.advance(10);
    let b2 = f
        .store
        .upsert_provider(
            "zeta",
            "http://127.0.0.1:9002",
            "t2",
            &json!({ "api_version": "3" }),
            "u",
        )
        .await
        .unwrap();
    assert_eq!(b2.base_url, "http://127.0.0.1:9002");
    assert_eq!(b2.token, "t2");
    let printed = format!("{b2:?}");
    assert!(
        printed.contains("zeta") && !printed.contains("\"t2\""),
        "{printed}"
    );
    assert_eq!(b2.created_at, b.created_at);
    assert_eq!(b2.updated_at, f.store.now());
    assert_eq!(
        f.store.get_provider("zeta").await.unwrap(),
        Some(b2.clone())
    );
    assert_eq!(f.store.get_provider("nope").await.unwrap(), None);
    assert_eq!(f.store.list_providers().await.unwrap(), vec![a, b2]);
    match f
        .store
        .upsert_provider("bad id", "http://x", "t", &caps, "u")
        .await
    {
        Err(StoreError::Invalid(e)) => assert_eq!(e.field, "provider_id"),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

async fn concurrent_setting_init_agrees_on_one_value(backend: Backend) {
    let f = fx(backend).await;
    let (url, store) = (f.store.url().to_owned(), f.store.clone());
    let other = Store::connect(
        &url,
        Arc::new(SystemClock),
        ChangeHub::new(),
        Arc::new(Metrics::default()),
    )
    .await
    .unwrap();
    let (a, b) = tokio::join!(
        tokio::spawn(async move { store.setting_or_init("grant_secret", "from-a").await }),
        tokio::spawn(async move { other.setting_or_init("grant_secret", "from-b").await }),
    );
    let (a, b) = (a.unwrap().unwrap(), b.unwrap().unwrap());
    assert_eq!(a, b);
    assert!(a == "from-a" || a == "from-b");
    assert_eq!(
        f.store
            .setting_or_init("grant_secret", "late")
            .await
            .unwrap(),
        a
    );
    assert_eq!(f.store.setting_or_init("other", "x").await.unwrap(), "x");
}

async fn postgres_sessions_run_without_jit(backend: Backend) {
    let f = fx(backend).await;
    let expected = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => Some("off".to_owned()),
    };
    // Asked at once, so that several pooled connections answer.
    let settings = futures::future::join_all((0..8).map(|_| f.store.session_setting("jit"))).await;
    for setting in settings {
        assert_eq!(setting.unwrap(), expected);
    }
    if backend == Backend::Postgres {
        assert_eq!(
            f.store.session_setting("no_such.setting").await.unwrap(),
            None
        );
    }
}

async fn readiness_needs_every_migration(backend: Backend) {
    let f = fx(backend).await;
    f.store.check_ready().await.unwrap();

    let (url, _db) = db::blank_url(backend).await;
    // SQLite: the file and its missing folders are created, in WAL mode.
    let url = match backend {
        Backend::Sqlite => url.replace("/sagents.db", "/nested/deeper/sagents.db"),
        Backend::Postgres => url,
    };
    let blank = Store::connect(
        &url,
        Arc::new(SystemClock),
        ChangeHub::new(),
        Arc::new(Metrics::default()),
    )
    .await
    .unwrap();
    assert!(matches!(
        blank.check_ready().await,
        Err(StoreError::Unavailable(_))
    ));
    if backend == Backend::Sqlite {
        let path = url.trim_start_matches("sqlite://").to_owned();
        assert!(std::path::Path::new(&path).is_file());
        let raw = sqlx::AnyPool::connect(&url).await.unwrap();
        let mode: String = sqlx::Row::get(
            &sqlx::query("PRAGMA journal_mode")
                .fetch_one(&raw)
                .await
                .unwrap(),
            0,
        );
        assert_eq!(mode, "wal");
        raw.close().await;
    }
    blank.migrate().await.unwrap();
    blank.check_ready().await.unwrap();
    blank.migrate().await.unwrap();
    blank.close().await;
    assert!(matches!(
        blank.check_ready().await,
        Err(StoreError::Unavailable(_))
    ));

    match Store::connect(
        "mysql://x",
        Arc::new(SystemClock),
        ChangeHub::new(),
        Arc::new(Metrics::default()),
    )
    .await
    {
        Err(StoreError::Invalid(e)) => assert_eq!(e.field, "database_url"),
        Err(other) => panic!("expected Invalid, got {other:?}"),
        Ok(_) => panic!("a mysql URL must be refused"),
    }
}

async fn corrupt_rows_are_errors_not_panics(backend: Backend) {
    let f = fx(backend).await;
    let s = f.session("acme").await;
    let run = f
        .store
        .create_run("acme", &s.id, &run_cmd(None))
        .await
        .unwrap();
    let raw = sqlx::AnyPool::connect(f.store.url()).await.unwrap();
    sqlx::query("UPDATE sessions SET metadata = 'not json' WHERE id = $1")
        .bind(s.id.as_str())
        .execute(&raw)
        .await
        .unwrap();
    sqlx::query("UPDATE runs SET input = '{\"unterminated' WHERE id = $1")
        .bind(run.id.as_str())
        .execute(&raw)
        .await
        .unwrap();
    raw.close().await;
    assert!(matches!(
        f.store.get_session(Some("acme"), &s.id).await,
        Err(StoreError::Database(_))
    ));
    assert!(matches!(
        f.store.snapshot(Some("acme"), &s.id).await,
        Err(StoreError::Database(_))
    ));
    assert!(matches!(
        f.store.get_run(None, &run.id).await,
        Err(StoreError::Database(_))
    ));
}
