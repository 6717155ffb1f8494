//! `GET /v3/sandboxes` against the reference provider over HTTP: every sandbox once, in
//! pages, with its labels and state; refused queries; what a restart keeps and what a lost
//! state folder forgets.

use std::collections::HashSet;

use sagents::providers::wire::{InventoryItem, InventoryQuery, ProviderError};
use sagents::providers::wire_spec::ReleaseDisposition as D;

use super::*;

pub fn query(cursor: Option<String>, limit: u32) -> InventoryQuery {
    InventoryQuery {
        cursor,
        limit: Some(limit),
    }
}

pub async fn provision_for(h: &Harness, key: &str, run: &str) -> SandboxHandle {
    let req = ProvisionRequest {
        spec: spec(WorkspaceMode::Isolated, None),
        owner_run_id: run.into(),
        tenant_id: "acme".into(),
        idempotency_key: key.into(),
        context: RequestContext::default(),
    };
    h.client
        .provision(&req, &CallOptions::default())
        .await
        .unwrap()
}

/// Walks with `limit`, asserting the page sizes; returns the items and the page count.
async fn walk(h: &Harness, limit: u32) -> (Vec<InventoryItem>, usize) {
    let (mut items, mut cursor) = (Vec::new(), None);
    for pages in 1..=100 {
        let page = h
            .client
            .list_sandboxes(&query(cursor, limit), &CallOptions::default())
            .await
            .unwrap();
        assert!(page.items.len() <= limit as usize, "{page:?}");
        items.extend(page.items);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return (items, pages),
        }
    }
    panic!("the listing does not end");
}

fn ids(items: &[InventoryItem]) -> Vec<String> {
    items.iter().map(|i| i.r#ref.sandbox_id.clone()).collect()
}

#[tokio::test]
async fn every_sandbox_is_listed_once_in_pages_with_its_labels_and_state() {
    let h = Harness::start().await;
    let caps = h
        .client
        .capabilities(&CallOptions::default())
        .await
        .unwrap();
    assert!(caps.supports_inventory && caps.supports_checkpoint_delete);
    let mut handles = Vec::new();
    for i in 0..5 {
        handles.push(provision_for(&h, &format!("p{i}"), &format!("run_{i}")).await);
    }
    h.release(&handles[1], D::Terminate, "t").await.unwrap();
    h.release(&handles[2], D::SnapshotAndTerminate, "s")
        .await
        .unwrap();
    h.release(&handles[3], D::Detach, "d").await.unwrap();

    let (items, pages) = walk(&h, 2).await;
    assert_eq!(pages, 3, "2 + 2 + 1, and no cursor on the last page");
    let listed = ids(&items);
    let unique: HashSet<_> = listed.iter().cloned().collect();
    assert_eq!(unique.len(), listed.len(), "repeated: {listed:?}");
    let mut provisioned: Vec<_> = handles.iter().map(|h| h.r#ref.sandbox_id.clone()).collect();
    provisioned.sort();
    assert_eq!(listed, provisioned, "every sandbox, in id order");
    for (i, hd) in handles.iter().enumerate() {
        let item = items
            .iter()
            .find(|it| it.r#ref.sandbox_id == hd.r#ref.sandbox_id)
            .unwrap();
        assert_eq!(item.r#ref, hd.r#ref);
        assert_eq!(item.labels.owner_run_id, format!("run_{i}"));
        assert_eq!(item.labels.tenant_id, "acme");
        assert!(item.created_at.is_some());
        let (state, generation) = match i {
            1 | 2 => (SandboxState::Terminated, 2),
            _ => (SandboxState::Ready, 1),
        };
        assert_eq!((item.state, item.generation), (state, generation), "{i}");
    }
    let all = h
        .client
        .inventory_all(&CallOptions::default())
        .await
        .unwrap();
    assert_eq!(all, items);
    let (one_by_one, pages) = walk(&h, 1).await;
    assert_eq!((ids(&one_by_one), pages), (listed, 5));
}

async fn raw_get(h: &Harness, path_and_query: &str) -> (u16, serde_json::Value) {
    let resp = reqwest::Client::new()
        .get(format!("{}{path_and_query}", h.base_url()))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or_default())
}

#[tokio::test]
async fn bad_queries_are_refused_with_a_400_and_the_provider_error_body() {
    let h = Harness::start().await;
    for _ in 0..3 {
        h.provision(&uuid::Uuid::now_v7().to_string()).await;
    }
    let sandbox_cursor = h
        .client
        .list_sandboxes(&query(None, 1), &CallOptions::default())
        .await
        .unwrap()
        .next_cursor
        .unwrap();
    for listing in ["/v3/sandboxes", "/v3/checkpoints"] {
        for (qs, code) in [
            ("limit=0", "validation.failed"),
            ("limit=501", "validation.failed"),
            ("limit=ten", "validation.failed"),
            ("limit=-1", "validation.failed"),
            ("limit=1&limit=2", "request.malformed"),
            ("state=ready", "request.malformed"),
            ("cursor=%00%ff", "inventory.cursor_invalid"),
            ("cursor=not-a-cursor", "inventory.cursor_invalid"),
            ("cursor=6869", "inventory.cursor_invalid"),
        ] {
            let (status, body) = raw_get(&h, &format!("{listing}?{qs}")).await;
            let err: ProviderError = serde_json::from_value(body.clone())
                .unwrap_or_else(|e| panic!("{listing}?{qs}: {body} is no error body: {e}"));
            assert_eq!((status, err.code.as_str()), (400, code), "{listing}?{qs}");
            assert!(!err.retryable);
        }
    }
    // A sandbox cursor means nothing to the checkpoint listing.
    let (status, _) = raw_get(&h, &format!("/v3/checkpoints?cursor={sandbox_cursor}")).await;
    assert_eq!(status, 400);
    let (status, body) = raw_get(&h, "/v3/sandboxes?cursor=&limit=").await;
    assert_eq!((status, body["items"].as_array().unwrap().len()), (200, 3));
    assert_eq!(
        refused(
            h.client
                .list_sandboxes(&query(None, 0), &CallOptions::default())
                .await
        ),
        (400, "validation.failed".into())
    );
}

#[tokio::test]
async fn listing_and_deleting_need_the_service_token() {
    let h = Harness::with(|c| c.token = Some("inventory-provider-token-0123456789ab".into())).await;
    h.provision("p1").await;
    for (method, path) in [
        (reqwest::Method::GET, "/v3/sandboxes"),
        (reqwest::Method::GET, "/v3/checkpoints"),
        (reqwest::Method::DELETE, "/v3/checkpoints/ckp_0"),
    ] {
        let resp = reqwest::Client::new()
            .request(method.clone(), format!("{}{path}", h.base_url()))
            .bearer_auth("wrong")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 401, "{method} {path}");
    }
    assert_eq!(
        h.client
            .inventory_all(&CallOptions::default())
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn a_restarted_provider_lists_the_same_sandboxes() {
    let mut h = Harness::start().await;
    let live = h.provision("live").await;
    let ended = h.provision("ended").await;
    h.release(&ended, D::Terminate, "t").await.unwrap();
    let before = h
        .client
        .inventory_all(&CallOptions::default())
        .await
        .unwrap();
    assert_eq!(before.len(), 2);
    h.restart().await;
    let after = h
        .client
        .inventory_all(&CallOptions::default())
        .await
        .unwrap();
    assert_eq!(after, before);
    assert_eq!(h.sh(&live, "echo still").await.unwrap().stdout, "still\n");
}

#[tokio::test]
async fn a_provider_whose_state_folder_was_deleted_starts_empty() {
    let mut h = Harness::start().await;
    let old = h.provision("p1").await;
    let snap = h.provision("p2").await;
    let ckp = h
        .release(&snap, D::SnapshotAndTerminate, "s")
        .await
        .unwrap()
        .checkpoint
        .unwrap();
    let running = h.provider.take().unwrap();
    let _old = KillOnDrop(running.engine().clone());
    running.stop().await;
    std::fs::remove_dir_all(h.root.path().join("state")).unwrap();
    h.restart().await;

    let page = h
        .client
        .list_sandboxes(&InventoryQuery::default(), &CallOptions::default())
        .await
        .unwrap();
    assert!(
        page.items.is_empty() && page.next_cursor.is_none(),
        "{page:?}"
    );
    let checkpoints = h
        .client
        .checkpoints_all(&CallOptions::default())
        .await
        .unwrap();
    assert!(checkpoints.is_empty(), "{checkpoints:?}");
    assert_eq!(
        refused(
            h.client
                .inspect(&old.r#ref.sandbox_id, &CallOptions::default())
                .await
        ),
        (404, "sandbox.not_found".into())
    );
    assert_eq!(
        refused(h.restore(&ckp, "r").await),
        (404, "checkpoint.not_found".into())
    );
    let fresh = h.provision("p1").await;
    assert_ne!(fresh.r#ref.sandbox_id, old.r#ref.sandbox_id);
    let listed = h
        .client
        .inventory_all(&CallOptions::default())
        .await
        .unwrap();
    assert_eq!(ids(&listed), vec![fresh.r#ref.sandbox_id]);
}

/// Kills the sandboxes of a provider that was stopped, whose successor no longer knows them.
struct KillOnDrop(std::sync::Arc<local_provider::Engine>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.0.kill_all_now();
    }
}
