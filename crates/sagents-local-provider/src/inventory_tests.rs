use std::collections::HashSet;
use std::path::Path;

use axum::extract::FromRequestParts;
use axum::http::StatusCode;

use super::*;
use crate::engine::EngineConfig;
use crate::faults::FaultPlan;
use crate::state::Layout;
use sagents_plugin_api::spec::{ReleaseDisposition, ResolvedSandboxSpec, WorkspaceMode};
use sagents_plugin_api::wire::{
    CheckpointRef, ExecRequest, ProvisionRequest, ReleaseRequest, ReleaseSpec, RequestContext,
    RestoreRequest, SandboxHandle, SandboxState,
};

/// An engine whose sandboxes are killed when the test ends, passed or not.
struct TestEngine(Engine);

impl std::ops::Deref for TestEngine {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        &self.0
    }
}

impl Drop for TestEngine {
    fn drop(&mut self) {
        self.0.kill_all_now();
    }
}

fn engine(root: &Path) -> TestEngine {
    let cfg = EngineConfig::for_tests(root);
    TestEngine(Engine::load(cfg, Layout::new(root).unwrap(), FaultPlan::default()).unwrap())
}

fn spec() -> ResolvedSandboxSpec {
    ResolvedSandboxSpec::example("local", WorkspaceMode::Isolated)
}

async fn provision(e: &Engine, key: &str) -> SandboxHandle {
    let req = ProvisionRequest {
        spec: spec(),
        owner_run_id: format!("run_{key}"),
        tenant_id: "acme".into(),
        idempotency_key: key.into(),
        context: RequestContext::default(),
    };
    e.provision(&req).await.unwrap().0
}

fn release_req(h: &SandboxHandle, d: ReleaseDisposition, key: &str) -> ReleaseRequest {
    ReleaseRequest {
        request: ReleaseSpec {
            r#ref: h.r#ref.clone(),
            disposition: d,
            reason: "test".into(),
            expected_revision: None,
            idempotency_key: key.into(),
        },
        context: RequestContext::default(),
    }
}

async fn snapshot(e: &Engine, key: &str) -> CheckpointRef {
    let h = provision(e, key).await;
    let req = release_req(&h, ReleaseDisposition::SnapshotAndTerminate, "snap");
    let receipt = e.release(&h.r#ref.sandbox_id, &req).await.unwrap();
    receipt.checkpoint.unwrap()
}

fn query(cursor: Option<&str>, limit: Option<u32>) -> InventoryQuery {
    InventoryQuery {
        cursor: cursor.map(str::to_owned),
        limit,
    }
}

fn status_and_code<T: std::fmt::Debug>(r: Result<T, ApiError>) -> (StatusCode, String) {
    match r {
        Err(e) => (e.status, e.body.code),
        Ok(v) => panic!("expected an error, got {v:?}"),
    }
}

/// A process that exists and is not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        let state = s[s.rfind(')').unwrap() + 1..].trim_start().chars().next();
        !matches!(state, Some('Z' | 'X'))
    })
}

#[test]
fn cursors_round_trip_and_anything_else_is_a_400() {
    let c = cursor(Listing::Sandboxes, "sbx_0190abc");
    let page = Page::of(&query(Some(&c), Some(7)), Listing::Sandboxes).unwrap();
    assert_eq!(
        page,
        Page {
            after: Some("sbx_0190abc".into()),
            limit: 7
        }
    );
    let start = Page::of(&query(None, None), Listing::Checkpoints).unwrap();
    assert_eq!((start.after, start.limit), (None, 100));
    assert_eq!(
        Page::of(&query(Some(""), Some(500)), Listing::Sandboxes)
            .unwrap()
            .limit,
        500
    );
    let garbage = [
        "zz".to_string(),
        "0".to_string(),
        hex::encode("v1:checkpoints:ckp_1"),
        hex::encode("v1:sandboxes:../../etc"),
        hex::encode("v1:sandboxes:sbx_"),
        hex::encode("v2:sandboxes:sbx_1"),
        hex::encode("v1:sandboxes"),
        hex::encode([0xff, 0xfe, 0x3a]),
        hex::encode(format!("v1:sandboxes:sbx_{}", "a".repeat(200))),
    ];
    for raw in garbage {
        assert_eq!(
            status_and_code(Page::of(&query(Some(&raw), None), Listing::Sandboxes)),
            (StatusCode::BAD_REQUEST, "inventory.cursor_invalid".into()),
            "{raw}"
        );
    }
    for limit in [0, 501, u32::MAX] {
        assert_eq!(
            status_and_code(Page::of(&query(None, Some(limit)), Listing::Sandboxes)),
            (StatusCode::BAD_REQUEST, "validation.failed".into()),
            "{limit}"
        );
    }
}

async fn params(uri: &str) -> Result<InventoryQuery, ApiError> {
    let (mut parts, ()) = axum::http::Request::builder()
        .uri(uri)
        .body(())
        .unwrap()
        .into_parts();
    InventoryParams::from_request_parts(&mut parts, &())
        .await
        .map(|p| p.0)
}

#[tokio::test]
async fn query_strings_parse_or_are_refused_with_a_400() {
    assert_eq!(
        params("/v3/sandboxes?cursor=ab&limit=5").await.unwrap(),
        query(Some("ab"), Some(5))
    );
    assert_eq!(
        params("/v3/sandboxes?cursor=&limit=").await.unwrap(),
        query(None, None)
    );
    assert_eq!(params("/v3/sandboxes").await.unwrap(), query(None, None));
    for bad in [
        "/v3/sandboxes?limit=x",
        "/v3/sandboxes?limit=-1",
        "/v3/sandboxes?limit=99999999999",
        "/v3/sandboxes?limit=1&limit=2",
        "/v3/sandboxes?cursor=a&cursor=b",
        "/v3/sandboxes?state=ready",
        "/v3/sandboxes?state=",
    ] {
        let (status, _) = status_and_code(params(bad).await);
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    }
}

#[tokio::test]
async fn paging_never_skips_or_repeats_while_sandboxes_come_and_go() {
    let root = tempfile::tempdir().unwrap();
    let e = engine(root.path());
    let mut originals = Vec::new();
    for i in 0..7 {
        originals.push(provision(&e, &format!("p{i}")).await.r#ref.sandbox_id);
    }
    let ended = provision(&e, "ended").await;
    let term = release_req(&ended, ReleaseDisposition::Terminate, "t");
    e.release(&ended.r#ref.sandbox_id, &term).await.unwrap();
    originals.push(ended.r#ref.sandbox_id.clone());

    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let page = e
            .list_sandboxes(&query(cursor.as_deref(), Some(3)))
            .await
            .unwrap();
        assert!(page.items.len() <= 3);
        seen.extend(page.items.iter().map(|i| i.r#ref.sandbox_id.clone()));
        pages += 1;
        if pages == 1 {
            // An offset-based page would now skip an item; a keyset cursor does not.
            assert!(e.forget(&seen[0]).await);
            provision(&e, "late").await;
        }
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
        assert!(pages < 10, "the walk does not end");
    }
    let unique: HashSet<_> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "an item was repeated: {seen:?}");
    for id in &originals {
        assert!(unique.contains(id), "{id} was skipped");
    }
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(sorted, seen, "a stable order: by id");

    let all = e.list_sandboxes(&query(None, None)).await.unwrap();
    assert!(all.next_cursor.is_none());
    let item = all
        .items
        .iter()
        .find(|i| i.r#ref.sandbox_id == ended.r#ref.sandbox_id)
        .unwrap();
    assert_eq!(item.state, SandboxState::Terminated);
    assert_eq!(item.generation, 2);
    assert_eq!(
        (
            item.labels.owner_run_id.as_str(),
            item.labels.tenant_id.as_str()
        ),
        ("run_ended", "acme")
    );
    assert!(!all.items.iter().any(|i| i.r#ref.sandbox_id == seen[0]));
}

#[tokio::test]
async fn checkpoints_are_listed_with_labels_and_deleted_once() {
    let root = tempfile::tempdir().unwrap();
    let e = engine(root.path());
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(snapshot(&e, &format!("s{i}")).await.checkpoint_id);
    }
    let first = e.list_checkpoints(&query(None, Some(2))).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let second = e
        .list_checkpoints(&query(first.next_cursor.as_deref(), Some(2)))
        .await
        .unwrap();
    assert!(second.next_cursor.is_none());
    let listed: Vec<_> = first
        .items
        .iter()
        .chain(&second.items)
        .map(|i| i.checkpoint.checkpoint_id.clone())
        .collect();
    assert_eq!(listed, ids);
    assert_eq!(first.items[1].labels.owner_run_id, "run_s1");
    assert_eq!(first.items[1].labels.tenant_id, "acme");
    let sandbox_cursor = cursor(Listing::Sandboxes, "sbx_1");
    assert_eq!(
        status_and_code(
            e.list_checkpoints(&query(Some(&sandbox_cursor), None))
                .await
        )
        .0,
        StatusCode::BAD_REQUEST
    );

    let gone = &ids[1];
    let archive = root.path().join(format!("checkpoints/{gone}.manifest"));
    assert!(archive.exists());
    assert!(e.delete_checkpoint(gone).await.unwrap().deleted);
    assert!(!archive.exists());
    assert!(!e.delete_checkpoint(gone).await.unwrap().deleted);
    assert!(!e.delete_checkpoint("ckp_never").await.unwrap().deleted);
    assert_eq!(
        status_and_code(e.delete_checkpoint("ckp_../../state").await),
        (StatusCode::BAD_REQUEST, "validation.failed".into())
    );
    let left = e.list_checkpoints(&query(None, None)).await.unwrap();
    let left: Vec<_> = left
        .items
        .iter()
        .map(|i| &i.checkpoint.checkpoint_id)
        .collect();
    assert_eq!(left, [&ids[0], &ids[2]]);
}

#[tokio::test]
async fn a_forgotten_sandbox_answers_404_everywhere_and_stays_gone() {
    let root = tempfile::tempdir().unwrap();
    let e = engine(root.path());
    let lost = provision(&e, "lost").await;
    let kept = provision(&e, "kept").await;
    let id = lost.r#ref.sandbox_id.clone();
    let grant = lost.grant.clone().unwrap().token;
    let exec = |script: &str| ExecRequest {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: None,
        env: None,
        stdin: None,
        timeout_seconds: 10,
    };
    let out = e
        .exec(&id, &grant, &exec("sleep 1000 >/dev/null 2>&1 & echo $!"))
        .await
        .unwrap();
    let pid: i32 = out.stdout.trim().parse().unwrap();
    assert!(alive(pid));
    let dir = root.path().join("sandboxes").join(&id);
    let state = root.path().join(format!("state/sandboxes/{id}.json"));
    assert!(dir.exists() && state.exists());

    assert!(e.forget(&id).await);
    assert!(!e.forget(&id).await);
    assert!(!alive(pid), "its processes are killed");
    assert!(!dir.exists() && !state.exists());
    let not_found = (StatusCode::NOT_FOUND, "sandbox.not_found".to_string());
    assert_eq!(status_and_code(e.inspect(&id).await), not_found);
    assert_eq!(
        status_and_code(e.attach(&id, &Default::default()).await),
        not_found
    );
    let rel = release_req(&lost, ReleaseDisposition::Terminate, "t");
    assert_eq!(status_and_code(e.release(&id, &rel).await), not_found);
    assert_eq!(
        status_and_code(e.exec(&id, &grant, &exec("true")).await),
        not_found
    );
    // The provision key no longer names it: the same request makes a new sandbox.
    let again = provision(&e, "lost").await;
    assert_ne!(again.r#ref.sandbox_id, id);
    assert_eq!(
        e.inspect(&kept.r#ref.sandbox_id).await.unwrap().state,
        SandboxState::Ready
    );

    let reloaded = engine(root.path());
    assert_eq!(
        status_and_code(reloaded.inspect(&id).await).0,
        StatusCode::NOT_FOUND
    );
    let listed = reloaded.list_sandboxes(&query(None, None)).await.unwrap();
    let listed: HashSet<_> = listed
        .items
        .into_iter()
        .map(|i| i.r#ref.sandbox_id)
        .collect();
    assert_eq!(
        listed,
        HashSet::from([
            kept.r#ref.sandbox_id.clone(),
            again.r#ref.sandbox_id.clone()
        ])
    );
}

#[tokio::test]
async fn a_restore_from_a_deleted_checkpoint_is_not_found_and_not_retryable() {
    let root = tempfile::tempdir().unwrap();
    let e = engine(root.path());
    let ckp = snapshot(&e, "s").await;
    assert!(
        e.delete_checkpoint(&ckp.checkpoint_id)
            .await
            .unwrap()
            .deleted
    );
    let req = RestoreRequest {
        checkpoint: ckp,
        spec: spec(),
        owner_run_id: "run_s".into(),
        idempotency_key: "r".into(),
        context: RequestContext::default(),
    };
    let err = e.restore(&req).await.unwrap_err();
    assert_eq!(
        (err.status, err.body.code.as_str(), err.body.retryable),
        (StatusCode::NOT_FOUND, "checkpoint.not_found", false)
    );
}
