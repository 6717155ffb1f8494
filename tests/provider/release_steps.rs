//! Every step of a `snapshot_and_terminate` release keeps the contract: a recoverable failure
//! (the provider's own state not saved, as on a full disk) thaws the sandbox before
//! answering; a kill that fails after the archive is saved still answers the checkpoint; a
//! terminal failure is answered again for its key.

use sagents::providers::wire::InventoryQuery;
use sagents::providers::wire_spec::ReleaseDisposition as D;

use super::*;

async fn background_pid(h: &Harness, sbx: &SandboxHandle) -> i32 {
    let out = h
        .sh(sbx, "sleep 1000 >/dev/null 2>&1 & echo $!")
        .await
        .unwrap();
    host_pid(sbx, out.stdout.trim().parse().unwrap())
}

/// Starts the provider again on the same root with `faults` (sandboxes keep running).
async fn restart_with(h: &mut Harness, faults: &str) {
    h.config.fault_injection = Some(faults.into());
    h.restart().await;
}

#[tokio::test]
async fn a_state_save_that_fails_mid_release_thaws_the_sandbox_and_the_retry_succeeds() {
    let mut h = Harness::start().await;
    let sbx = h.provision("p1").await;
    let pid = background_pid(&h, &sbx).await;
    restart_with(&mut h, "state_save=fail:times=1").await;
    let err = h
        .release(&sbx, D::SnapshotAndTerminate, "rel")
        .await
        .unwrap_err();
    match &err {
        ProviderCallError::Recoverable { status, error } => {
            assert_eq!(
                (*status, error.code.as_str()),
                (503, "sandbox.snapshot_failed")
            );
            assert!(error.retryable);
            assert!(error.message.contains("no space left"), "{}", error.message);
        }
        other => panic!("expected a recoverable error, got {other:?}"),
    }
    assert_eq!(
        h.sandbox_state(&sbx.r#ref.sandbox_id).await,
        SandboxState::Ready
    );
    assert!(running(pid), "running again: {:?}", proc_state(pid));
    assert_eq!(h.sh(&sbx, "echo alive").await.unwrap().stdout, "alive\n");
    let receipt = h
        .release(&sbx, D::SnapshotAndTerminate, "rel")
        .await
        .unwrap();
    assert!(!receipt.duplicate && receipt.compute_released && receipt.checkpoint.is_some());
    assert_eq!(proc_state(pid), None);
}

#[tokio::test]
async fn a_kill_that_fails_after_the_archive_still_answers_the_checkpoint_and_the_retry_kills() {
    let mut h = Harness::with_faults("kill=fail:times=1").await;
    let sbx = h.provision("p1").await;
    let pid = background_pid(&h, &sbx).await;
    let first = h
        .release(&sbx, D::SnapshotAndTerminate, "rel")
        .await
        .unwrap();
    assert!(!first.compute_released);
    assert_eq!(first.state, SandboxState::Suspended);
    let checkpoint = first
        .checkpoint
        .clone()
        .expect("the receipt names the saved checkpoint");
    let listed = h
        .client
        .list_checkpoints(&InventoryQuery::default(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(
        h.sandbox_state(&sbx.r#ref.sandbox_id).await,
        SandboxState::Suspended
    );
    assert!(proc_state(pid).is_some(), "its processes are still there");
    restart_with(&mut h, "").await;
    assert_eq!(
        h.sandbox_state(&sbx.r#ref.sandbox_id).await,
        SandboxState::Suspended,
        "a start leaves it frozen for the retry to kill"
    );
    let again = h
        .release(&sbx, D::SnapshotAndTerminate, "rel")
        .await
        .unwrap();
    assert!(again.duplicate && again.compute_released);
    assert_eq!(again.state, SandboxState::Terminated);
    assert_eq!(again.checkpoint, Some(checkpoint.clone()));
    assert_eq!(proc_state(pid), None);
    let restored = h.restore(&checkpoint, "res").await.unwrap();
    assert_eq!(restored.state, SandboxState::Ready);
}

#[tokio::test]
async fn a_terminal_failure_is_answered_again_for_its_key() {
    let h = Harness::with_faults("snapshot=fail:times=1;resume=fail:times=1").await;
    let sbx = h.provision("p1").await;
    let first = h.release(&sbx, D::SnapshotAndTerminate, "rel").await;
    let again = h.release(&sbx, D::SnapshotAndTerminate, "rel").await;
    match (first, again) {
        (
            Err(ProviderCallError::Terminal { error: a, .. }),
            Err(ProviderCallError::Terminal { error: b, .. }),
        ) => {
            assert_eq!(a, b);
            assert!(
                a.message.contains("archiving failed") && a.message.contains("resuming failed")
            );
        }
        other => panic!("expected the same terminal error twice, got {other:?}"),
    }
    assert_eq!(
        refused(h.release(&sbx, D::Terminate, "rel").await),
        (409, "idempotency.key_reused".into())
    );
}
