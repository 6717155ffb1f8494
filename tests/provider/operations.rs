//! Releases and restores outlive the request that asked for them: a caller cut off, a repeat
//! of the key, a caller that waits longer than the provider's bound, a provider restarted
//! mid-release. Slow archives come from the provider's own `snapshot=delay_ms=N` fault.

use std::time::{Duration, Instant};

use sagents::providers::client::UncertainKind;
use sagents::providers::wire::{InventoryQuery, OperationPending};
use sagents::providers::wire_spec::ReleaseDisposition as D;

use super::*;

async fn background_pid(h: &Harness, sbx: &SandboxHandle) -> i32 {
    let out = h
        .sh(sbx, "sleep 1000 >/dev/null 2>&1 & echo $!")
        .await
        .unwrap();
    host_pid(sbx, out.stdout.trim().parse().unwrap())
}

async fn checkpoints(h: &Harness) -> Vec<String> {
    let page = h
        .client
        .list_checkpoints(&InventoryQuery::default(), &CallOptions::default())
        .await
        .unwrap();
    page.items
        .into_iter()
        .map(|c| c.checkpoint.checkpoint_id)
        .collect()
}

/// Waits (bounded) until the provider runs no release or restore.
async fn operations_done(h: &Harness) {
    let engine = h.provider.as_ref().unwrap().engine().clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    while engine.running_operations() > 0 {
        assert!(Instant::now() < deadline, "the operation never ended");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Asks again with the same key while the provider answers `202`.
async fn release_until_done(
    h: &Harness,
    sbx: &SandboxHandle,
    key: &str,
) -> Result<SandboxReleaseReceipt, ProviderCallError> {
    for _ in 0..200 {
        match h.release(sbx, D::SnapshotAndTerminate, key).await {
            Err(ProviderCallError::InProgress { .. }) => continue,
            done => return done,
        }
    }
    panic!("the release never finished");
}

#[tokio::test]
async fn a_release_whose_caller_is_cut_off_still_archives_and_the_key_answers_it() {
    let h = Harness::with_faults("snapshot=delay_ms=1500").await;
    let sbx = h.provision("p1").await;
    h.sh(&sbx, "echo kept > work.txt").await.unwrap();
    let cut = CallOptions {
        timeout: Some(Duration::from_millis(300)),
        ..Default::default()
    };
    let err = h
        .client
        .release(&release_req(&sbx, D::SnapshotAndTerminate, "rel"), &cut)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ProviderCallError::Uncertain {
                kind: UncertainKind::Timeout,
                ..
            }
        ),
        "{err:?}"
    );
    operations_done(&h).await;
    assert_eq!(
        h.sandbox_state(&sbx.r#ref.sandbox_id).await,
        SandboxState::Terminated,
        "the archive went on without its caller"
    );
    let receipt = h
        .release(&sbx, D::SnapshotAndTerminate, "rel")
        .await
        .unwrap();
    assert!(receipt.duplicate && receipt.compute_released);
    let checkpoint = receipt
        .checkpoint
        .expect("the receipt names the checkpoint");
    assert_eq!(
        checkpoints(&h).await,
        vec![checkpoint.checkpoint_id.clone()]
    );
    let restored = h.restore(&checkpoint, "res").await.unwrap();
    assert_eq!(
        h.sh(&restored, "cat work.txt").await.unwrap().stdout,
        "kept\n"
    );
}

#[tokio::test]
async fn a_repeat_of_the_key_joins_the_running_release_and_one_archive_is_made() {
    let h = Harness::with_faults("snapshot=delay_ms=800").await;
    let sbx = h.provision("p1").await;
    let (a, b) = tokio::join!(
        h.release(&sbx, D::SnapshotAndTerminate, "rel"),
        h.release(&sbx, D::SnapshotAndTerminate, "rel"),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(
        a.duplicate != b.duplicate,
        "one call started it, one joined"
    );
    let id = |r: &SandboxReleaseReceipt| r.checkpoint.as_ref().unwrap().checkpoint_id.clone();
    assert_eq!(id(&a), id(&b));
    assert_eq!(checkpoints(&h).await, vec![id(&a)]);
    let other = h.release(&sbx, D::Terminate, "rel").await;
    assert_eq!(refused(other), (409, "idempotency.key_reused".into()));
}

#[tokio::test]
async fn a_caller_that_would_wait_longer_than_the_bound_gets_202_and_asks_again() {
    let h = Harness::with(|c| {
        c.fault_injection = Some("snapshot=delay_ms=1500".into());
        c.operation_wait = Duration::from_millis(200);
    })
    .await;
    let sbx = h.provision("p1").await;
    let started = Instant::now();
    let resp = reqwest::Client::new()
        .post(format!(
            "{}/v3/sandboxes/{}/release",
            h.base_url(),
            sbx.r#ref.sandbox_id
        ))
        .json(&release_req(&sbx, D::SnapshotAndTerminate, "rel"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    assert!(started.elapsed() < Duration::from_millis(1500));
    assert_eq!(resp.headers()["retry-after"], "1");
    let pending: OperationPending = resp.json().await.unwrap();
    assert_eq!(
        pending,
        OperationPending {
            code: "operation.in_progress".into(),
            operation: "release".into(),
            idempotency_key: "rel".into(),
            retry_after_ms: 1000,
        }
    );
    match h.release(&sbx, D::SnapshotAndTerminate, "rel").await {
        Err(ProviderCallError::InProgress {
            operation,
            retry_after,
        }) => assert_eq!((operation.as_str(), retry_after.as_secs()), ("release", 1)),
        other => panic!("expected 202, got {other:?}"),
    }
    let receipt = release_until_done(&h, &sbx, "rel").await.unwrap();
    assert!(receipt.compute_released && receipt.checkpoint.is_some());
    let checkpoint = receipt.checkpoint.unwrap();
    let restored = loop {
        match h.restore(&checkpoint, "res").await {
            Err(ProviderCallError::InProgress { operation, .. }) => {
                assert_eq!(operation, "restore")
            }
            done => break done.unwrap(),
        }
    };
    assert_eq!(restored.state, SandboxState::Ready);
    assert_eq!(checkpoints(&h).await.len(), 1, "one archive for the key");
}

#[tokio::test]
async fn a_provider_restarted_mid_release_thaws_the_sandbox_and_the_retry_archives_it() {
    let mut h = Harness::with_faults("snapshot=hold:times=1").await;
    let sbx = h.provision("p1").await;
    let pid = background_pid(&h, &sbx).await;
    let call = release_held_at_archive(&h, &sbx).await;
    let state = std::fs::read_to_string(
        h.root
            .path()
            .join(format!("state/sandboxes/{}.json", sbx.r#ref.sandbox_id)),
    )
    .unwrap();
    assert!(state.contains("\"suspended\""), "frozen while archived");
    h.config.fault_injection = None;
    h.restart().await;
    assert!(
        call.await.unwrap().is_err(),
        "the abandoned call got no receipt"
    );
    assert_eq!(
        h.sandbox_state(&sbx.r#ref.sandbox_id).await,
        SandboxState::Ready,
        "never lost while it can run"
    );
    assert!(running(pid), "{:?}", proc_state(pid));
    assert_eq!(h.sh(&sbx, "echo alive").await.unwrap().stdout, "alive\n");
    assert!(checkpoints(&h).await.is_empty());
    let receipt = h
        .release(&sbx, D::SnapshotAndTerminate, "rel")
        .await
        .unwrap();
    assert!(!receipt.duplicate && receipt.compute_released && receipt.checkpoint.is_some());
    assert_eq!(proc_state(pid), None);
    let archives: Vec<_> = std::fs::read_dir(h.root.path().join("checkpoints"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        archives.len(),
        1,
        "nothing half-written is left: {archives:?}"
    );
}

#[tokio::test]
async fn an_inspect_during_a_long_archive_answers_at_once_that_the_sandbox_is_suspended() {
    let h = Harness::with_faults("snapshot=hold:times=1").await;
    let sbx = h.provision("p1").await;
    let call = release_held_at_archive(&h, &sbx).await;
    let opts = CallOptions {
        timeout: Some(Duration::from_secs(3)),
        ..Default::default()
    };
    let info = h.client.inspect(&sbx.r#ref.sandbox_id, &opts).await;
    assert_eq!(
        info.expect("answered while the archive runs").state,
        SandboxState::Suspended
    );
    h.open_held_calls();
    let receipt = call.await.unwrap().unwrap();
    assert!(receipt.compute_released && receipt.checkpoint.is_some());
    assert_eq!(
        h.sandbox_state(&sbx.r#ref.sandbox_id).await,
        SandboxState::Terminated
    );
}

#[tokio::test]
async fn an_active_workspace_is_provisioned_while_another_sandbox_archives() {
    let h = Harness::with_faults("snapshot=hold:times=1").await;
    let sbx = h.provision("p1").await;
    let call = release_held_at_archive(&h, &sbx).await;
    let active = spec(WorkspaceMode::ActiveWorkspace, Some("proj"));
    let made = tokio::time::timeout(Duration::from_secs(10), h.provision_spec("a1", active))
        .await
        .expect("the provision waited for another sandbox's archive")
        .unwrap();
    assert_eq!(
        h.provider.as_ref().unwrap().engine().faults().held_calls(),
        1,
        "the archive is still held"
    );
    h.open_held_calls();
    assert!(call.await.unwrap().unwrap().compute_released);
    h.release(&made, D::Terminate, "t1").await.unwrap();
}

/// A snapshot release of `sbx` sent in the background, once a `snapshot=hold` rule holds it
/// at its archive step.
async fn release_held_at_archive(
    h: &Harness,
    sbx: &SandboxHandle,
) -> tokio::task::JoinHandle<Result<SandboxReleaseReceipt, ProviderCallError>> {
    let engine = h.provider.as_ref().unwrap().engine().clone();
    let call = tokio::spawn({
        let (client, req) = (
            h.client.clone(),
            release_req(sbx, D::SnapshotAndTerminate, "rel"),
        );
        async move { client.release(&req, &CallOptions::default()).await }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while engine.faults().held_calls() == 0 {
        assert!(
            Instant::now() < deadline,
            "the archive step was never reached"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    call
}
