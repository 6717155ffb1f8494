//! A restart over many terminated sandboxes: a start reads only the sandboxes that may still
//! run; the terminated ones are still listed and still answer duplicate releases.

use sagents::providers::wire::{InventoryItem, InventoryQuery};
use sagents::providers::wire_spec::ReleaseDisposition as D;

use super::*;

async fn all_items(h: &Harness) -> Vec<InventoryItem> {
    let (mut items, mut cursor) = (Vec::new(), None);
    loop {
        let q = InventoryQuery {
            cursor,
            limit: Some(7),
        };
        let page = h
            .client
            .list_sandboxes(&q, &CallOptions::default())
            .await
            .unwrap();
        items.extend(page.items);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return items,
        }
    }
}

async fn terminated(h: &Harness, n: usize) -> Vec<(SandboxHandle, SandboxReleaseReceipt)> {
    let mut out = Vec::new();
    for i in 0..n {
        let sbx = h.provision(&format!("p{i}")).await;
        let receipt = h.release(&sbx, D::Terminate, "t").await.unwrap();
        out.push((sbx, receipt));
    }
    out
}

fn resident(h: &Harness) -> usize {
    h.provider.as_ref().unwrap().engine().resident_sandboxes()
}

async fn assert_answers(h: &Harness, done: &[(SandboxHandle, SandboxReleaseReceipt)]) {
    let items = all_items(h).await;
    for (sbx, _) in done {
        let item = items
            .iter()
            .find(|i| i.r#ref.sandbox_id == sbx.r#ref.sandbox_id)
            .expect("a terminated sandbox is still listed");
        assert_eq!(item.state, SandboxState::Terminated);
    }
    for (sbx, first) in done.iter().take(3) {
        let again = h.release(sbx, D::Terminate, "t").await.unwrap();
        assert!(again.duplicate && again.compute_released);
        assert_eq!(again.released_at, first.released_at);
    }
    assert_eq!(
        h.sandbox_state(&done[3].0.r#ref.sandbox_id).await,
        SandboxState::Terminated
    );
}

#[tokio::test]
async fn a_start_reads_only_live_sandboxes_and_the_terminated_ones_still_answer() {
    let mut h = Harness::start().await;
    let live = h.provision("live").await;
    let done = terminated(&h, 30).await;
    h.restart().await;
    assert_eq!(resident(&h), 1, "only the live sandbox is read at start");
    assert_eq!(all_items(&h).await.len(), 31);
    assert_eq!(
        resident(&h),
        1,
        "a listing reads terminated sandboxes without keeping them"
    );
    assert_answers(&h, &done).await;
    assert_eq!(
        resident(&h),
        5,
        "duplicate releases and inspect read what they need"
    );
    assert_eq!(
        h.sandbox_state(&live.r#ref.sandbox_id).await,
        SandboxState::Ready
    );
}

#[tokio::test]
async fn a_root_with_terminated_sandboxes_among_the_live_ones_still_loads() {
    let mut h = Harness::start().await;
    h.provision("live").await;
    let done = terminated(&h, 6).await;
    h.provider.take().unwrap().stop().await;
    let (state, apart) = (
        h.root.path().join("state/sandboxes"),
        h.root.path().join("state/terminated"),
    );
    for e in std::fs::read_dir(&apart).unwrap().flatten() {
        std::fs::rename(e.path(), state.join(e.file_name())).unwrap();
    }
    h.restart().await;
    assert_eq!(resident(&h), 1);
    assert_eq!(std::fs::read_dir(&apart).unwrap().count(), 6, "moved apart");
    assert_answers(&h, &done).await;
    h.restart().await;
    assert_eq!(resident(&h), 1);
    assert_answers(&h, &done).await;
}

/// The on-disk state a provider killed mid-release leaves once the checkpoint is recorded and
/// the processes killed, before the receipt is saved: the sandbox `suspended` (saved with the
/// freeze) under the release's key, its processes gone, the checkpoint on disk.
fn killed_before_the_receipt(root: &std::path::Path, sandbox_id: &str, key: &str) {
    let state = root.join("state");
    let terminated = state.join("terminated").join(format!("{sandbox_id}.json"));
    let mut rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&terminated).unwrap()).unwrap();
    rec["state"] = "suspended".into();
    rec["generation"] = (rec["generation"].as_u64().unwrap() - 1).into();
    rec["releases"].as_object_mut().unwrap().remove(key);
    rec["releasing"] = key.into();
    let live = state.join("sandboxes").join(format!("{sandbox_id}.json"));
    std::fs::write(&live, serde_json::to_vec(&rec).unwrap()).unwrap();
    std::fs::remove_file(&terminated).unwrap();
}

#[tokio::test]
async fn a_restart_finishes_a_snapshot_whose_checkpoint_was_recorded_under_its_key() {
    let mut h = Harness::start().await;
    let sbx = h.provision("snap").await;
    let first = h
        .release(&sbx, D::SnapshotAndTerminate, "k1")
        .await
        .unwrap();
    let checkpoint = first.checkpoint.clone().unwrap();
    h.provider.take().unwrap().stop().await;
    killed_before_the_receipt(h.root.path(), &sbx.r#ref.sandbox_id, "k1");
    h.restart().await;

    let again = h
        .release(&sbx, D::SnapshotAndTerminate, "k1")
        .await
        .expect("the key's outcome, not a sandbox called lost");
    assert!(again.compute_released);
    assert_eq!(
        again.checkpoint.unwrap().checkpoint_id,
        checkpoint.checkpoint_id
    );
    assert_eq!(
        h.sandbox_state(&sbx.r#ref.sandbox_id).await,
        SandboxState::Terminated
    );
}

#[tokio::test]
async fn a_restart_calls_a_frozen_sandbox_lost_when_no_checkpoint_was_recorded() {
    let mut h = Harness::start().await;
    let sbx = h.provision("snap").await;
    let first = h
        .release(&sbx, D::SnapshotAndTerminate, "k1")
        .await
        .unwrap();
    h.provider.take().unwrap().stop().await;
    killed_before_the_receipt(h.root.path(), &sbx.r#ref.sandbox_id, "k1");
    let ckp = first.checkpoint.unwrap().checkpoint_id;
    std::fs::remove_file(
        h.root
            .path()
            .join("state/checkpoints")
            .join(format!("{ckp}.json")),
    )
    .unwrap();
    h.restart().await;

    assert_eq!(
        h.sandbox_state(&sbx.r#ref.sandbox_id).await,
        SandboxState::Lost
    );
}
