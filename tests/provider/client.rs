//! The client's classification of every failure, against a real HTTP server that misbehaves
//! on purpose (one path prefix per misbehaviour).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::{Json, Router};
use sagents::lifecycle::outcome::{classify, FailureClass};
use sagents::providers::client::{ClientConfig, UncertainKind};
use sagents::providers::wire::{SandboxRef, SandboxState};
use sagents::providers::wire_spec::ReleaseDisposition as D;
use sagents::service::providers::{self as registry, RegistryError};

use super::*;

#[derive(Clone, Default)]
struct Seen {
    redirect_target_hits: Arc<AtomicUsize>,
    headers: Arc<Mutex<Option<HeaderMap>>>,
    pages: Arc<AtomicUsize>,
}

fn sandbox_ref() -> SandboxRef {
    SandboxRef {
        sandbox_id: "sbx_1".into(),
        provider_id: "fake".into(),
        provider_version: "0".into(),
        tenant_id: "acme".into(),
        owner_run_id: "run_1".into(),
        spec_hash: format!("sha256:{}", "a".repeat(64)),
        policy_hash: format!("sha256:{}", "b".repeat(64)),
    }
}

fn caps(version: &str) -> serde_json::Value {
    serde_json::json!({
        "api_version": version, "capability": "execution.sandbox", "provider_id": "fake",
        "provider_version": "0", "isolation_level": "none",
        "supported_release_dispositions": ["terminate"], "supports_snapshot": false,
        "supports_restore": false, "supports_reconnect": false
    })
}

fn error(status: u16, retryable: bool) -> Response {
    coded(status, "x.y", "c", retryable)
}

fn coded(status: u16, code: &str, category: &str, retryable: bool) -> Response {
    let body = serde_json::json!({"code": code, "category": category, "message": "m", "retryable": retryable});
    (StatusCode::from_u16(status).unwrap(), Json(body)).into_response()
}

fn inventory_item(n: usize) -> serde_json::Value {
    let mut r = sandbox_ref();
    r.sandbox_id = format!("sbx_{n}");
    serde_json::json!({"ref": r, "state": "ready", "generation": 1,
        "labels": {"owner_run_id": "run_1", "tenant_id": "acme"}})
}

fn inventory_page(n: usize, next: Option<String>) -> Response {
    Json(serde_json::json!({"items": [inventory_item(n)], "next_cursor": next})).into_response()
}

async fn misbehave(
    State(seen): State<Seen>,
    Path((mode, rest)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    match mode.as_str() {
        "pages" => {
            let n = match query
                .unwrap_or_default()
                .split('&')
                .find_map(|kv| kv.strip_prefix("cursor="))
            {
                None => 0,
                Some(c) => c.trim_start_matches('c').parse::<usize>().unwrap(),
            };
            inventory_page(n, (n < 2).then(|| format!("c{}", n + 1)))
        }
        "loop" => {
            seen.pages.fetch_add(1, Ordering::SeqCst);
            inventory_page(0, Some("same".into()))
        }
        "endless" => {
            let n = seen.pages.fetch_add(1, Ordering::SeqCst);
            inventory_page(n, Some(format!("c{n}")))
        }
        "deleted" | "deleted_other" => {
            let asked = rest.rsplit('/').next().unwrap_or_default();
            let named = if mode == "deleted" {
                asked
            } else {
                "ckp_other"
            };
            Json(serde_json::json!({"checkpoint_id": named, "deleted": true})).into_response()
        }
        "ok" => Json(caps("3")).into_response(),
        "v2" => Json(caps("2")).into_response(),
        "hang" => std::future::pending().await,
        "big" => {
            let chunk = Bytes::from(vec![b' '; 64 * 1024]);
            let stream =
                futures::stream::iter((0..32).map(move |_| Ok::<_, std::io::Error>(chunk.clone())));
            Response::new(Body::from_stream(stream))
        }
        "big_declared" => (StatusCode::OK, vec![b'{'; 2 * 1024 * 1024]).into_response(),
        "cut" => {
            let stream = futures::stream::iter([
                Ok(Bytes::from_static(b"{\"api_version\":")),
                Err(std::io::Error::other("cut")),
            ]);
            Response::new(Body::from_stream(stream))
        }
        "garbage" => (StatusCode::OK, "this is not json").into_response(),
        "accepted_garbage" => (StatusCode::ACCEPTED, "<html>queued</html>").into_response(),
        "accepted_forever" => (
            StatusCode::ACCEPTED,
            Json(
                serde_json::json!({"code": "operation.in_progress", "operation": "release",
                "idempotency_key": "k", "retry_after_ms": u64::MAX}),
            ),
        )
            .into_response(),
        "accepted_eager" => (
            StatusCode::ACCEPTED,
            Json(
                serde_json::json!({"code": "operation.in_progress", "operation": "release",
                "idempotency_key": "k", "retry_after_ms": 0}),
            ),
        )
            .into_response(),
        "redirect" => (
            StatusCode::TEMPORARY_REDIRECT,
            [("location", "/target/v3/capabilities")],
        )
            .into_response(),
        "target" => {
            seen.redirect_target_hits.fetch_add(1, Ordering::SeqCst);
            Json(caps("3")).into_response()
        }
        "recoverable" => error(503, true),
        "terminal" => coded(500, "sandbox.lost", "sandbox_failure", false),
        "unknown500" => error(500, false),
        "html404" => (
            StatusCode::NOT_FOUND,
            [("content-type", "text/html")],
            "<html><head><title>404 Not Found</title></head><body>nginx</body></html>",
        )
            .into_response(),
        "other_json404" => (
            StatusCode::NOT_FOUND,
            Json(serde_json::json!({"error": "no route"})),
        )
            .into_response(),
        "not_found" => coded(404, "sandbox.not_found", "not_found", false),
        "refused" => error(409, false),
        "html502" => (StatusCode::BAD_GATEWAY, "<html>bad gateway</html>").into_response(),
        "plain401" => (StatusCode::UNAUTHORIZED, "no").into_response(),
        "inconsistent" | "consistent" => {
            *seen.headers.lock().unwrap() = Some(headers);
            let detach_released = mode == "inconsistent";
            Json(serde_json::json!({
                "ref": sandbox_ref(), "disposition": "detach",
                "state": if detach_released { "terminated" } else { "ready" },
                "compute_released": detach_released, "duplicate": false,
                "released_at": "2026-01-01T00:00:00Z"
            }))
            .into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn fake_server() -> (String, Seen) {
    let seen = Seen::default();
    let app = Router::new()
        .route("/{mode}/{*rest}", any(misbehave))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

fn client(base: &str, mode: &str) -> ProviderClient {
    ProviderClient::new(&format!("{base}/{mode}"), Some("tok")).unwrap()
}

fn uncertain_kind<T: std::fmt::Debug>(r: Result<T, ProviderCallError>) -> UncertainKind {
    match r {
        Err(ProviderCallError::Uncertain { kind, .. }) => kind,
        other => panic!("expected an uncertain outcome, got {other:?}"),
    }
}

#[tokio::test]
async fn every_failure_is_classified() {
    let (base, seen) = fake_server().await;
    let opts = CallOptions {
        timeout: Some(std::time::Duration::from_millis(200)),
        ..Default::default()
    };
    assert!(client(&base, "ok").capabilities(&opts).await.is_ok());
    let cases = [
        ("hang", UncertainKind::Timeout),
        ("big", UncertainKind::OversizedBody),
        ("big_declared", UncertainKind::OversizedBody),
        ("cut", UncertainKind::ConnectionLost),
        ("garbage", UncertainKind::MalformedBody),
        ("redirect", UncertainKind::Redirect),
        ("html502", UncertainKind::NotProviderAnswer { status: 502 }),
        ("html404", UncertainKind::NotProviderAnswer { status: 404 }),
        (
            "other_json404",
            UncertainKind::NotProviderAnswer { status: 404 },
        ),
        ("plain401", UncertainKind::NotProviderAnswer { status: 401 }),
        (
            "no_such_prefix",
            UncertainKind::NotProviderAnswer { status: 404 },
        ),
        ("unknown500", UncertainKind::UnknownError { status: 500 }),
    ];
    for (mode, kind) in cases {
        let r = client(&base, mode).capabilities(&opts).await;
        if let Err(e) = &r {
            assert_eq!(classify(e), FailureClass::Retry, "{mode}: {e}");
        }
        assert_eq!(uncertain_kind(r), kind, "{mode}");
    }
    assert_eq!(
        seen.redirect_target_hits.load(Ordering::SeqCst),
        0,
        "redirects are not followed"
    );

    let r = client(&base, "recoverable").capabilities(&opts).await;
    assert!(
        matches!(&r, Err(e @ ProviderCallError::Recoverable { status: 503, .. }) if classify(e) == FailureClass::Retry)
    );
    let r = client(&base, "terminal").capabilities(&opts).await;
    assert!(
        matches!(&r, Err(e @ ProviderCallError::Terminal { status: 500, .. }) if classify(e) == FailureClass::Final)
    );
    let r = client(&base, "refused").capabilities(&opts).await;
    assert!(
        matches!(&r, Err(e @ ProviderCallError::Refused { status: 409, .. }) if classify(e) == FailureClass::Refused)
    );
    let r = client(&base, "not_found").inspect("sbx_1", &opts).await;
    assert!(
        matches!(&r, Err(e @ ProviderCallError::Refused { status: 404, error }) if classify(e) == FailureClass::Refused && error.code == "sandbox.not_found"),
        "{r:?}"
    );
    let r = client(&base, "html404").inspect("sbx_1", &opts).await;
    let e = r.unwrap_err();
    assert_eq!(e.to_provider_error().code, "provider.not_a_provider_answer");
    assert!(e.to_string().contains("404 Not Found"), "{e}");

    // A 202 is "ask again later", whatever its body says; its wait is kept within bounds.
    for (mode, ms) in [
        ("accepted_garbage", 1000),
        ("accepted_forever", 60_000),
        ("accepted_eager", 100),
    ] {
        let r = client(&base, mode).capabilities(&opts).await;
        assert!(
            matches!(&r, Err(ProviderCallError::InProgress { retry_after, .. })
                if retry_after.as_millis() == ms),
            "{mode}: {r:?}"
        );
    }

    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let r = ProviderClient::new(&dead, None)
        .unwrap()
        .capabilities(&opts)
        .await;
    assert!(
        matches!(&r, Err(e @ ProviderCallError::Unreachable(_)) if classify(e) == FailureClass::Retry),
        "{r:?}"
    );
}

#[tokio::test]
async fn release_returns_only_consistent_receipts_and_sends_the_headers() {
    let (base, seen) = fake_server().await;
    let handle = sagents::providers::wire::SandboxHandle {
        r#ref: sandbox_ref(),
        state: SandboxState::Ready,
        revision: 1,
        generation: 1,
        grant: None,
    };
    let req = release_req(&handle, D::Detach, "k1");
    let opts = CallOptions {
        request_id: Some("req-123".into()),
        ..Default::default()
    };
    let receipt = client(&base, "consistent")
        .release(&req, &opts)
        .await
        .unwrap();
    assert!(!receipt.compute_released);
    let headers = seen.headers.lock().unwrap().take().unwrap();
    assert_eq!(headers["authorization"], "Bearer tok");
    assert_eq!(headers["x-request-id"], "req-123");
    assert_eq!(headers["x-sagents-fencing-token"], "7");

    let r = client(&base, "inconsistent").release(&req, &opts).await;
    assert_eq!(uncertain_kind(r), UncertainKind::InconsistentReceipt);
    // Asked for terminate, answered detach: it does not answer the request.
    let r = client(&base, "consistent")
        .release(&release_req(&handle, D::Terminate, "k2"), &opts)
        .await;
    assert_eq!(uncertain_kind(r), UncertainKind::InconsistentReceipt);
}

#[tokio::test]
async fn registration_refuses_v2_and_unreachable_providers() {
    let (base, _) = fake_server().await;
    let caps = registry::fetch_capabilities(&format!("{base}/ok"), Some("t"))
        .await
        .unwrap();
    assert_eq!(caps.api_version, "3");
    let e = registry::fetch_capabilities(&format!("{base}/v2"), Some("t"))
        .await
        .unwrap_err();
    assert!(
        matches!(e, RegistryError::ApiVersionUnsupported(_)),
        "{e:?}"
    );
    assert_eq!(
        (e.code(), e.http_status()),
        ("provider.api_version_unsupported", 422)
    );
    let e = registry::fetch_capabilities(&format!("{base}/missing"), Some("t"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "provider.api_version_unsupported");
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let e = registry::fetch_capabilities(&dead, None).await.unwrap_err();
    assert_eq!((e.code(), e.http_status()), ("provider.unreachable", 502));

    let local = Harness::start().await;
    let caps = registry::fetch_capabilities(&local.base_url(), None)
        .await
        .unwrap();
    assert_eq!(caps.supported_release_dispositions.len(), 3);
}

#[tokio::test]
async fn inventory_calls_are_classified_like_every_other_call() {
    let (base, _) = fake_server().await;
    let opts = CallOptions::default();
    let q = sagents::providers::wire::InventoryQuery::default();
    for (mode, class) in [
        ("recoverable", FailureClass::Retry),
        ("terminal", FailureClass::Final),
        ("refused", FailureClass::Refused),
        ("garbage", FailureClass::Retry),
    ] {
        let c = client(&base, mode);
        let listed = c.list_sandboxes(&q, &opts).await.unwrap_err();
        let ckps = c.list_checkpoints(&q, &opts).await.unwrap_err();
        let deleted = c.delete_checkpoint("ckp_1", &opts).await.unwrap_err();
        for err in [&listed, &ckps, &deleted] {
            assert_eq!(classify(err), class, "{mode}: {err}");
        }
    }
    assert_eq!(
        uncertain_kind(client(&base, "garbage").list_sandboxes(&q, &opts).await),
        UncertainKind::MalformedBody
    );
    let ok = client(&base, "deleted")
        .delete_checkpoint("ckp_1", &opts)
        .await
        .unwrap();
    assert!(ok.deleted && ok.checkpoint_id == "ckp_1");
    let r = client(&base, "deleted_other")
        .delete_checkpoint("ckp_1", &opts)
        .await;
    assert_eq!(uncertain_kind(r), UncertainKind::InconsistentReceipt);
    let r = client(&base, "deleted")
        .delete_checkpoint("../v3/sandboxes", &opts)
        .await;
    assert!(matches!(r, Err(ProviderCallError::Config(_))), "{r:?}");
}

#[tokio::test]
async fn inventory_walks_follow_cursors_and_stop_on_a_runaway_provider() {
    let (base, seen) = fake_server().await;
    let opts = CallOptions::default();
    let all = client(&base, "pages").inventory_all(&opts).await.unwrap();
    let ids: Vec<_> = all.iter().map(|i| i.r#ref.sandbox_id.as_str()).collect();
    assert_eq!(ids, ["sbx_0", "sbx_1", "sbx_2"]);

    let r = client(&base, "loop").inventory_all(&opts).await;
    assert_eq!(uncertain_kind(r), UncertainKind::InconsistentPaging);
    assert_eq!(
        seen.pages.load(Ordering::SeqCst),
        2,
        "stopped at the repeat"
    );

    seen.pages.store(0, Ordering::SeqCst);
    let bounded = ProviderClient::with_config(
        &format!("{base}/endless"),
        None,
        ClientConfig {
            max_inventory_pages: 5,
            ..Default::default()
        },
    )
    .unwrap();
    let r = bounded.inventory_all(&opts).await;
    assert_eq!(uncertain_kind(r), UncertainKind::InconsistentPaging);
    assert_eq!(seen.pages.load(Ordering::SeqCst), 5, "stopped at the bound");
}
