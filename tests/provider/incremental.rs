//! Checkpoints over shared blobs through the real provider: a suspend after a restore
//! writes what changed, restores stay exact after deletes, a damaged blob is
//! `checkpoint.corrupt` and a vanished one `checkpoint.missing`.

use sagents::providers::wire_spec::ReleaseDisposition as D;

use super::*;

/// 200 files of 8 KiB of source-like text in 10 folders, an empty folder and a link.
const MAKE_TREE: &str = r#"
for d in 0 1 2 3 4 5 6 7 8 9; do
  mkdir -p "src/m$d"
  for f in $(seq 0 19); do
    head -c 4096 /dev/urandom | od -An -tx1 | head -c 8192 > "src/m$d/f$f.rs"
  done
done
mkdir -p empty/inner && ln -s src/m0 link && chmod 640 src/m1/f1.rs
"#;

/// Every entry below the root (whose own mtime is the restore's) with what a checkpoint
/// keeps of it: a link's target, anything else's kind, mode and mtime; then every content.
const LISTING: &str = "find . -mindepth 1 \\( -type l -printf 'l %p %l\\n' \\) -o \\( ! -type l -printf '%y %m %T@ %p\\n' \\) | sort && find . -type f | sort | xargs sha256sum";

async fn snapshot(h: &Harness, sbx: &SandboxHandle, key: &str) -> CheckpointRef {
    h.release(sbx, D::SnapshotAndTerminate, key)
        .await
        .unwrap()
        .checkpoint
        .unwrap()
}

fn error_of(r: Result<SandboxHandle, ProviderCallError>) -> String {
    match r {
        Err(ProviderCallError::Terminal { error, .. }) => error.code,
        other => panic!("expected a terminal failure, got {other:?}"),
    }
}

#[tokio::test]
async fn a_suspend_after_a_restore_writes_only_what_changed_and_every_restore_is_exact() {
    suspends_after_restores(false).await;
}

#[tokio::test]
async fn a_suspend_after_a_warm_restore_writes_only_what_changed_too() {
    suspends_after_restores(true).await;
}

/// Three restore → change 1 % → suspend rounds, restored from kept trees (`warm`) or from
/// the blobs.
async fn suspends_after_restores(warm: bool) {
    let budget = if warm { 1024 } else { 0 };
    let h = Harness::with(move |c| c.warm_cache_mb = budget).await;
    let sbx = h.provision("p1").await;
    h.sh(&sbx, MAKE_TREE).await.unwrap();
    let empty = stored_bytes(&h);
    let first = snapshot(&h, &sbx, "s0").await;
    let first_wrote = stored_bytes(&h) - empty;
    let mut listings = vec![h.sh_listing(&first, "l0").await];
    let mut kept = vec![first.clone()];
    for round in 1..4 {
        let back = h
            .restore(&kept[round - 1], &format!("r{round}"))
            .await
            .unwrap();
        h.sh(
            &back,
            &format!("echo round {round} >> src/m{round}/f{round}.rs; touch src/m0/f0.rs"),
        )
        .await
        .unwrap();
        let before = stored_bytes(&h);
        let next = snapshot(&h, &back, &format!("s{round}")).await;
        let wrote = stored_bytes(&h) - before;
        assert!(
            wrote * 20 <= first_wrote,
            "round {round}: {wrote} B written, the first wrote {first_wrote} B"
        );
        assert!(
            next.size_bytes >= first.size_bytes,
            "the size says what the checkpoint holds, never what the host already had"
        );
        listings.push(h.sh_listing(&next, &format!("l{round}")).await);
        kept.push(next);
    }
    let hits = h.provider.as_ref().unwrap().engine().warm_stats().hits;
    assert_eq!(hits >= 3, warm, "{hits} restores from kept trees");
    assert_ne!(listings[0], listings[1]);
    assert!(
        h.client
            .delete_checkpoint(&kept[1].checkpoint_id, &CallOptions::default())
            .await
            .unwrap()
            .deleted
    );
    for (i, c) in kept.iter().enumerate().filter(|(i, _)| *i != 1) {
        assert_eq!(
            h.sh_listing(c, &format!("after{i}")).await,
            listings[i],
            "checkpoint {i} after another was deleted"
        );
    }
}

#[tokio::test]
async fn a_damaged_blob_is_corrupt_and_a_vanished_one_missing() {
    // No warm tree: every restore reads the blobs.
    let h = Harness::with(|c| c.warm_cache_mb = 0).await;
    let sbx = h.provision("p1").await;
    h.sh(&sbx, MAKE_TREE).await.unwrap();
    let ckp = snapshot(&h, &sbx, "s0").await;
    let blobs: Vec<_> = std::fs::read_dir(h.root.path().join("blobs"))
        .unwrap()
        .flatten()
        .filter(|d| d.file_name() != "tmp")
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten())
        .map(|e| e.path())
        .collect();
    let blob = &blobs[0];
    let good = std::fs::read(blob).unwrap();
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0xff;
    std::fs::write(blob, &bad).unwrap();
    assert_eq!(error_of(h.restore(&ckp, "r1").await), "checkpoint.corrupt");
    std::fs::remove_file(blob).unwrap();
    assert_eq!(error_of(h.restore(&ckp, "r2").await), "checkpoint.missing");
    std::fs::write(blob, &good).unwrap();
    h.restore(&ckp, "r3").await.unwrap();
}

impl Harness {
    /// Restores `c` and lists every path's kind, mode, mtime, target and content hash.
    async fn sh_listing(&self, c: &CheckpointRef, key: &str) -> String {
        let back = self.restore(c, key).await.unwrap();
        let out = self.sh(&back, LISTING).await.unwrap();
        assert_eq!(out.exit_code, Some(0), "{out:?}");
        self.release(&back, D::Terminate, &format!("{key}-end"))
            .await
            .unwrap();
        out.stdout
    }
}

/// The bytes of the provider's checkpoints on disk: blobs and manifests.
fn stored_bytes(h: &Harness) -> u64 {
    fn walk(dir: &std::path::Path) -> u64 {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| match e.metadata() {
                        Ok(m) if m.is_dir() => walk(&e.path()),
                        Ok(m) => m.len(),
                        Err(_) => 0,
                    })
                    .sum()
            })
            .unwrap_or(0)
    }
    ["blobs", "checkpoints"]
        .iter()
        .map(|d| walk(&h.root.path().join(d)))
        .sum()
}
