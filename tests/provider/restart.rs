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

/// Thaws the group when the test ends, passed or not: a start into a frozen group would
/// hold the test process for good.
struct Thaw(std::path::PathBuf, &'static str);

impl Drop for Thaw {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.0, self.1);
    }
}

/// The freezer file of the control group that `pid` runs in, and what freezes it.
fn freezer_of(pid: i64) -> Option<(std::path::PathBuf, &'static str)> {
    let groups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    groups
        .lines()
        .find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let path = path.trim_start_matches('/');
            match controllers {
                "freezer" => Some((
                    std::path::Path::new("/sys/fs/cgroup/freezer")
                        .join(path)
                        .join("freezer.state"),
                    "FROZEN",
                )),
                "" => Some((
                    std::path::Path::new("/sys/fs/cgroup")
                        .join(path)
                        .join("cgroup.freeze"),
                    "1",
                )),
                _ => None,
            }
        })
        .filter(|(file, _)| file.exists())
}

#[tokio::test]
async fn a_restart_thaws_a_ready_sandbox_a_killed_release_had_frozen() {
    let mut h = Harness::start().await;
    let sbx = h.provision("p1").await;
    let state = h
        .root
        .path()
        .join(format!("state/sandboxes/{}.json", sbx.r#ref.sandbox_id));
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let pid = rec["leader"]["pid"].as_i64().expect("a leader");
    let Some((freezer, frozen)) = freezer_of(pid) else {
        // SAFETY: geteuid(2) has no preconditions.
        let euid = unsafe { libc::geteuid() };
        assert_ne!(euid, 0, "as root a sandbox has a freezer");
        return;
    };
    // As a release killed after its freeze, before it saved `suspended`, leaves it.
    std::fs::write(&freezer, frozen).unwrap();
    let _thaw = Thaw(freezer.clone(), if frozen == "1" { "0" } else { "THAWED" });
    h.restart().await;
    let opts = CallOptions {
        timeout: Some(std::time::Duration::from_secs(10)),
        ..Default::default()
    };
    assert_eq!(
        h.client
            .inspect(&sbx.r#ref.sandbox_id, &opts)
            .await
            .unwrap()
            .state,
        SandboxState::Ready
    );
    let out = tokio::time::timeout(std::time::Duration::from_secs(10), h.sh(&sbx, "echo alive"))
        .await
        .expect("the sandbox runs again")
        .unwrap();
    assert_eq!(out.stdout, "alive\n");
    h.release(&sbx, D::Terminate, "t").await.unwrap();
}
