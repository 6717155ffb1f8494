//! The warm restore cache with real sandboxes: a restore from a kept tree gives exactly the
//! files an archive restore gives, anything changed in a kept tree falls back to the archive,
//! the budget evicts the oldest, a deleted checkpoint takes its tree along, and
//! `--warm-cache-mb 0` keeps the files of no released sandbox.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sagents::providers::wire_spec::ReleaseDisposition as D;
use sagents_local_provider::WarmStats;

use super::*;

/// Files, folders (empty ones too), modes, symlinks, set-id-free, at several depths.
const MAKE_FILES: &str = "set -e
mkdir -p src/deep/er empty ro
printf 'fn main() {}\\n' > src/main.rs
head -c 400000 /dev/urandom > src/deep/er/blob.bin
printf '#!/bin/sh\\necho hi\\n' > run.sh && chmod 755 run.sh
echo secret > private && chmod 600 private
echo r > ro/inside && chmod 555 ro
ln -s src/main.rs rel-link && ln -s /etc/hostname abs-link && ln -s missing dangling
: > empty-file";

#[derive(Debug, PartialEq, Eq)]
enum Node {
    Dir(u32),
    File(u32, Vec<u8>),
    Link(PathBuf),
}

/// Everything below `dir` (the folder itself left out, as an archive leaves it out).
fn tree(dir: &Path) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let (p, meta) = (e.path(), e.path().symlink_metadata().unwrap());
            let mode = meta.permissions().mode() & 0o7777;
            let node = if meta.file_type().is_symlink() {
                Node::Link(std::fs::read_link(&p).unwrap())
            } else if meta.is_dir() {
                todo.push(p.clone());
                Node::Dir(mode)
            } else {
                Node::File(mode, std::fs::read(&p).unwrap())
            };
            out.insert(p.strip_prefix(dir).unwrap().to_path_buf(), node);
        }
    }
    out
}

fn stats(h: &Harness) -> WarmStats {
    h.provider.as_ref().unwrap().engine().warm_stats()
}

fn sandbox_dir(h: &Harness, sbx: &SandboxHandle) -> PathBuf {
    h.root.path().join("sandboxes").join(&sbx.r#ref.sandbox_id)
}

fn kept(h: &Harness, c: &CheckpointRef) -> PathBuf {
    h.root.path().join("warm").join(&c.checkpoint_id)
}

/// A sandbox with the files of [`MAKE_FILES`], released with a snapshot: its checkpoint and
/// its files as they were.
async fn snapshot(h: &Harness, key: &str) -> (CheckpointRef, BTreeMap<PathBuf, Node>) {
    let sbx = h.provision(key).await;
    let made = h.sh(&sbx, MAKE_FILES).await.unwrap();
    assert_eq!(made.exit_code, Some(0), "{made:?}");
    let before = tree(&sandbox_dir(h, &sbx));
    let receipt = h
        .release(&sbx, D::SnapshotAndTerminate, "snap")
        .await
        .unwrap();
    assert!(receipt.compute_released, "no process survives");
    assert!(!sandbox_dir(h, &sbx).exists());
    (receipt.checkpoint.unwrap(), before)
}

async fn restored_tree(h: &Harness, c: &CheckpointRef, key: &str) -> BTreeMap<PathBuf, Node> {
    let back = h.restore(c, key).await.unwrap();
    let out = h.sh(&back, "cat src/main.rs && ./run.sh").await.unwrap();
    assert_eq!(out.stdout, "fn main() {}\nhi\n", "{out:?}");
    tree(&sandbox_dir(h, &back))
}

#[tokio::test]
async fn a_warm_restore_gives_exactly_what_the_archive_gives() {
    let h = Harness::start().await;
    let (ckp, original) = snapshot(&h, "p1").await;
    assert!(kept(&h, &ckp).join("tree/src/main.rs").exists());
    assert_eq!(stats(&h).entries, 1);
    let warm = restored_tree(&h, &ckp, "r1").await;
    let s = stats(&h);
    assert_eq!((s.hits, s.misses, s.entries, s.bytes), (1, 0, 0, 0));
    assert!(!kept(&h, &ckp).exists(), "the kept tree is used once");
    let unpacked = restored_tree(&h, &ckp, "r2").await;
    assert_eq!((stats(&h).hits, stats(&h).misses), (1, 1));
    assert_eq!(warm, original);
    assert_eq!(unpacked, original);
    // A replay of the first restore's key answers the same sandbox.
    let again = h.restore(&ckp, "r1").await.unwrap();
    assert_eq!(stats(&h).hits + stats(&h).misses, 2, "{again:?}");
}

/// The owner and ctime of `path` (a chown moves the ctime, even to the same owner).
fn owner_and_ctime(path: &Path) -> (u32, u32, i64, i64) {
    let m = std::fs::symlink_metadata(path).unwrap();
    (m.uid(), m.gid(), m.ctime(), m.ctime_nsec())
}

#[tokio::test]
async fn a_warm_restore_runs_as_its_predecessors_uid_and_hands_no_file_over() {
    let h = Harness::start().await;
    let (ckp, _) = snapshot(&h, "p1").await;
    let file = kept(&h, &ckp).join("tree/src/deep/er/blob.bin");
    let as_kept = owner_and_ctime(&file);
    assert_ne!(as_kept.0, 0, "a sandbox's files are its own uid's");
    let back = h.restore(&ckp, "r1").await.unwrap();
    assert_eq!(stats(&h).hits, 1);
    let dir = sandbox_dir(&h, &back);
    assert_eq!(
        owner_and_ctime(&dir.join("src/deep/er/blob.bin")),
        as_kept,
        "the same owner, and no chown since the tree was kept"
    );
    let out = h.sh(&back, "echo new > made-now").await.unwrap();
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(owner_and_ctime(&dir.join("made-now")).0, as_kept.0);
    // An unpacked restore of the same checkpoint still gets every file handed to its uid.
    let cold = h.restore(&ckp, "r2").await.unwrap();
    let cold_dir = sandbox_dir(&h, &cold);
    let owner = owner_and_ctime(&cold_dir).0;
    assert_ne!(owner, as_kept.0, "two live sandboxes never share a uid");
    for f in ["src/main.rs", "ro/inside", "private"] {
        assert_eq!(owner_and_ctime(&cold_dir.join(f)).0, owner, "{f}");
    }
}

#[tokio::test]
async fn a_changed_kept_tree_falls_back_to_the_archive_and_restores_exactly() {
    type Tamper = fn(&Path);
    let cases: [(&str, Tamper); 6] = [
        ("a file modified", |t| {
            std::fs::write(t.join("tree/src/main.rs"), "fn main() { evil() }\n").unwrap()
        }),
        ("a file added", |t| {
            std::fs::write(t.join("tree/src/deep/planted"), "x").unwrap()
        }),
        ("a file removed", |t| {
            std::fs::remove_file(t.join("tree/private")).unwrap()
        }),
        ("an empty folder removed", |t| {
            std::fs::remove_dir(t.join("tree/empty")).unwrap()
        }),
        ("a file given to another owner", |t| {
            std::os::unix::fs::lchown(t.join("tree/src/main.rs"), Some(0), Some(0)).unwrap()
        }),
        ("the manifest broken", |t| {
            std::fs::write(t.join("manifest.json"), b"{\"entries\": [").unwrap()
        }),
    ];
    let h = Harness::start().await;
    for (i, (what, tamper)) in cases.iter().enumerate() {
        let (ckp, original) = snapshot(&h, &format!("p{i}")).await;
        tamper(&kept(&h, &ckp));
        let back = restored_tree(&h, &ckp, &format!("r{i}")).await;
        assert_eq!(back, original, "{what}");
        let s = stats(&h);
        assert_eq!((s.hits, s.fallbacks), (0, i as u64 + 1), "{what}");
        assert!(!kept(&h, &ckp).exists(), "{what}: dropped");
    }
}

#[tokio::test]
async fn the_oldest_kept_trees_are_evicted_to_stay_within_the_budget() {
    let h = Harness::with(|c| c.warm_cache_mb = 1).await;
    let mut made = Vec::new();
    for i in 0..3 {
        made.push(snapshot(&h, &format!("p{i}")).await);
    }
    let s = stats(&h);
    assert!(s.bytes <= 1024 * 1024 && s.evictions >= 1, "{s:?}");
    assert!(!kept(&h, &made[0].0).exists(), "the oldest went first");
    assert!(kept(&h, &made[2].0).exists(), "the newest stays");
    assert_eq!(restored_tree(&h, &made[0].0, "r0").await, made[0].1);
    assert_eq!(restored_tree(&h, &made[2].0, "r2").await, made[2].1);
    let s = stats(&h);
    assert_eq!((s.misses, s.hits), (1, 1));
}

#[tokio::test]
async fn a_deleted_checkpoint_drops_its_kept_tree() {
    let h = Harness::start().await;
    let (ckp, _) = snapshot(&h, "p1").await;
    assert!(kept(&h, &ckp).exists());
    let receipt = h
        .client
        .delete_checkpoint(&ckp.checkpoint_id, &CallOptions::default())
        .await
        .unwrap();
    assert!(receipt.deleted);
    assert!(!kept(&h, &ckp).exists());
    assert_eq!((stats(&h).entries, stats(&h).bytes), (0, 0));
    assert_eq!(
        refused(h.restore(&ckp, "r1").await),
        (404, "checkpoint.not_found".into())
    );
}

#[tokio::test]
async fn a_kept_tree_outlives_a_provider_restart() {
    let mut h = Harness::start().await;
    let (ckp, original) = snapshot(&h, "p1").await;
    h.restart().await;
    assert_eq!(stats(&h).entries, 1, "rebuilt from what is on disk");
    assert_eq!(restored_tree(&h, &ckp, "r1").await, original);
    assert_eq!(stats(&h).hits, 1);
}

#[tokio::test]
async fn without_a_budget_nothing_is_kept() {
    let h = Harness::with(|c| c.warm_cache_mb = 0).await;
    let (ckp, original) = snapshot(&h, "p1").await;
    assert!(!kept(&h, &ckp).exists());
    assert_eq!(restored_tree(&h, &ckp, "r1").await, original);
    assert_eq!(stats(&h), WarmStats::default());
}
