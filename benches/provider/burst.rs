//! A burst of restores at once: archive unpacks one per core, all at once, and warm.

use super::*;

/// Restores started at once: each one's latency from the start, sorted.
pub const BURST: usize = 32;
pub const BURST_MIB: usize = 10;

/// `BURST` checkpoints of a `BURST_MIB` workspace restored all at once by a provider started
/// with `flags`: the sorted latencies of the restores.
pub async fn burst(work: &Path, name: &str, flags: &[&str]) -> Vec<f64> {
    let tree = work.join(format!("burst-tree-{name}"));
    make_tree(&tree, BURST_MIB * MIB);
    let root = work.join(format!("burst-{name}"));
    let provider = Provider::start_with(&root, flags);
    let client = ProviderClient::new(&provider.base_url, Some(TOKEN)).unwrap();
    let mut checkpoints = Vec::new();
    for i in 0..BURST {
        let h = provision(&client, &format!("burst-{i}")).await;
        let dir = root.join("sandboxes").join(&h.r#ref.sandbox_id);
        sh(
            &format!("cp -a {}/. {}", tree.display(), dir.display()),
            &tree,
        );
        let snap = release(&h, ReleaseDisposition::SnapshotAndTerminate, "snap");
        let receipt = client
            .release(&snap, &CallOptions::default())
            .await
            .unwrap();
        checkpoints.push(receipt.checkpoint.unwrap());
    }
    settle(&root);
    let t = Instant::now();
    let calls = checkpoints.into_iter().enumerate().map(|(i, checkpoint)| {
        let client = client.clone();
        async move {
            let req = RestoreRequest {
                checkpoint,
                spec: spec(),
                owner_run_id: "run_bench".into(),
                idempotency_key: format!("burst-restore-{i}"),
                context: RequestContext::default(),
            };
            client.restore(&req, &CallOptions::default()).await.unwrap();
            ms(t.elapsed())
        }
    });
    let mut done = futures::future::join_all(calls).await;
    done.sort_by(|a, b| a.partial_cmp(b).unwrap());
    drop(provider);
    kill_leaders(&root);
    std::fs::remove_dir_all(&tree).unwrap();
    done
}
