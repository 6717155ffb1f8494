//! `GET /v3/checkpoints` and `DELETE /v3/checkpoints/{id}` against the reference provider:
//! listed with their sandbox's labels, deleted once, and unusable after.

use sagents::lifecycle::outcome::{classify, FailureClass};
use sagents::providers::client::UncertainKind;
use sagents::providers::wire::CheckpointRef;
use sagents::providers::wire_spec::ReleaseDisposition as D;

use super::inventory::{provision_for, query};
use super::*;

async fn snapshot_for(h: &Harness, key: &str, run: &str) -> CheckpointRef {
    let sbx = provision_for(h, key, run).await;
    h.sh(&sbx, &format!("echo {run} > who.txt")).await.unwrap();
    h.release(&sbx, D::SnapshotAndTerminate, "snap")
        .await
        .unwrap()
        .checkpoint
        .unwrap()
}

fn archive_of(h: &Harness, c: &CheckpointRef) -> std::path::PathBuf {
    h.root
        .path()
        .join(format!("checkpoints/{}.manifest", c.checkpoint_id))
}

#[tokio::test]
async fn checkpoints_are_listed_with_labels_and_deleted_idempotently() {
    let h = Harness::start().await;
    let mut made = Vec::new();
    for i in 0..3 {
        made.push(snapshot_for(&h, &format!("p{i}"), &format!("run_{i}")).await);
    }
    let first = h
        .client
        .list_checkpoints(&query(None, 2), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(first.items.len(), 2);
    let second = h
        .client
        .list_checkpoints(
            &query(first.next_cursor.clone(), 2),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(second.items.len(), 1);
    assert!(second.next_cursor.is_none());
    let listed: Vec<_> = first.items.iter().chain(&second.items).collect();
    for (i, (item, want)) in listed.iter().zip(&made).enumerate() {
        assert_eq!(&item.checkpoint, want, "as in the receipt, in id order");
        assert_eq!(item.labels.owner_run_id, format!("run_{i}"));
        assert_eq!(item.labels.tenant_id, "acme");
    }

    let gone = &made[1];
    assert!(archive_of(&h, gone).exists());
    let receipt = h
        .client
        .delete_checkpoint(&gone.checkpoint_id, &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (receipt.checkpoint_id.as_str(), receipt.deleted),
        (gone.checkpoint_id.as_str(), true)
    );
    assert!(!archive_of(&h, gone).exists(), "the manifest is deleted");
    let again = h
        .client
        .delete_checkpoint(&gone.checkpoint_id, &CallOptions::default())
        .await
        .unwrap();
    assert!(!again.deleted);
    let never = h
        .client
        .delete_checkpoint(
            "ckp_00000000000000000000000000000000",
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert!(!never.deleted);
    let left: Vec<_> = h
        .client
        .checkpoints_all(&CallOptions::default())
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.checkpoint)
        .collect();
    assert_eq!(left, [made[0].clone(), made[2].clone()]);
    let back = h.restore(&made[2], "r2").await.unwrap();
    assert_eq!(h.sh(&back, "cat who.txt").await.unwrap().stdout, "run_2\n");
}

#[tokio::test]
async fn a_restore_from_a_deleted_checkpoint_fails_clearly_and_makes_nothing() {
    let h = Harness::start().await;
    let ckp = snapshot_for(&h, "p1", "run_1").await;
    assert!(
        h.client
            .delete_checkpoint(&ckp.checkpoint_id, &CallOptions::default())
            .await
            .unwrap()
            .deleted
    );
    let before = h
        .client
        .inventory_all(&CallOptions::default())
        .await
        .unwrap();
    let err = h.restore(&ckp, "r1").await.unwrap_err();
    match &err {
        ProviderCallError::Refused { status, error } => {
            assert_eq!(
                (*status, error.code.as_str()),
                (404, "checkpoint.not_found")
            );
            assert!(!error.retryable);
            assert!(
                error.message.contains(&ckp.checkpoint_id),
                "{}",
                error.message
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(classify(&err), FailureClass::Refused);
    let after = h
        .client
        .inventory_all(&CallOptions::default())
        .await
        .unwrap();
    assert_eq!(after, before, "no sandbox was made");
}

#[tokio::test]
async fn a_lost_delete_answer_is_retried_and_answers_deleted_false() {
    let h = Harness::with_faults("delete_checkpoint=drop:times=1").await;
    let ckp = snapshot_for(&h, "p1", "run_1").await;
    let err = h
        .client
        .delete_checkpoint(&ckp.checkpoint_id, &CallOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ProviderCallError::Uncertain {
                kind: UncertainKind::ConnectionLost,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!archive_of(&h, &ckp).exists(), "the work was done");
    let retry = h
        .client
        .delete_checkpoint(&ckp.checkpoint_id, &CallOptions::default())
        .await
        .unwrap();
    assert!(!retry.deleted);
    assert!(h
        .client
        .checkpoints_all(&CallOptions::default())
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_restored_sandbox_is_listed_for_its_new_run_and_the_original_tenant() {
    let h = Harness::start().await;
    let ckp = snapshot_for(&h, "p1", "run_1").await;
    let req = RestoreRequest {
        checkpoint: ckp.clone(),
        spec: spec(WorkspaceMode::Isolated, None),
        owner_run_id: "run_resumed".into(),
        idempotency_key: "r1".into(),
        context: RequestContext::default(),
    };
    let restored = h
        .client
        .restore(&req, &CallOptions::default())
        .await
        .unwrap();
    let all = h
        .client
        .inventory_all(&CallOptions::default())
        .await
        .unwrap();
    let item = all
        .iter()
        .find(|i| i.r#ref.sandbox_id == restored.r#ref.sandbox_id)
        .unwrap();
    assert_eq!(item.labels.owner_run_id, "run_resumed");
    assert_eq!(item.labels.tenant_id, "acme");
    assert_eq!(
        (item.state, item.generation),
        (SandboxState::Ready, ckp.generation + 1)
    );
}

#[tokio::test]
async fn a_checkpoint_the_previous_build_wrote_as_an_archive_still_restores_and_deletes() {
    let h = Harness::start().await;
    let ckp = snapshot_for(&h, "p1", "run_1").await;
    let root = h.root.path();
    std::fs::remove_file(archive_of(&h, &ckp)).unwrap();
    let files = tempfile::tempdir().unwrap();
    std::fs::create_dir(files.path().join("empty")).unwrap();
    std::fs::write(files.path().join("who.txt"), "from an archive\n").unwrap();
    let archive = root.join(format!("checkpoints/{}.tar.zst", ckp.checkpoint_id));
    let info = local_provider::archive::pack(files.path(), &archive).unwrap();
    let state = root.join(format!("state/checkpoints/{}.json", ckp.checkpoint_id));
    let mut stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    stored.as_object_mut().unwrap().remove("format");
    stored["digest"] = serde_json::json!(info.digest);
    stored["size_bytes"] = serde_json::json!(info.size_bytes);
    std::fs::write(&state, serde_json::to_vec(&stored).unwrap()).unwrap();
    let old = CheckpointRef {
        digest: Some(info.digest),
        size_bytes: info.size_bytes,
        ..ckp
    };
    let back = h.restore(&old, "r1").await.unwrap();
    let out = h
        .sh(&back, "cat who.txt; test -d empty && echo dir")
        .await
        .unwrap();
    assert_eq!(out.stdout, "from an archive\ndir\n");
    let receipt = h
        .client
        .delete_checkpoint(&old.checkpoint_id, &CallOptions::default())
        .await
        .unwrap();
    assert!(receipt.deleted && !archive.exists() && !state.exists());
}
