//! The recoverable/terminal contract and lost responses, driven by the provider's own
//! deterministic fault injection.

use super::*;
use sagents::lifecycle::outcome::{classify, FailureClass};
use sagents::providers::client::UncertainKind;
use sagents::providers::wire::SandboxState;
use sagents::providers::wire_spec::ReleaseDisposition as D;

async fn background_pid(h: &Harness, sbx: &SandboxHandle) -> i32 {
    let out = h
        .sh(sbx, "sleep 1000 >/dev/null 2>&1 & echo $!")
        .await
        .unwrap();
    host_pid(sbx, out.stdout.trim().parse().unwrap())
}

#[tokio::test]
async fn a_failed_snapshot_is_recoverable_only_once_the_sandbox_runs_again() {
    let h = Harness::with_faults("snapshot=fail:times=1").await;
    let sbx = h.provision("p1").await;
    let pid = background_pid(&h, &sbx).await;
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
        }
        other => panic!("expected a recoverable error, got {other:?}"),
    }
    assert_eq!(classify(&err), FailureClass::Retry);
    assert!(
        running(pid),
        "the sandbox is running again, not stopped: {:?}",
        proc_state(pid)
    );
    let info = h
        .client
        .inspect(&sbx.r#ref.sandbox_id, &Default::default())
        .await
        .unwrap();
    assert_eq!(info.state, SandboxState::Ready);
    assert_eq!(h.sh(&sbx, "echo alive").await.unwrap().stdout, "alive\n");
    // The retry with the same key now succeeds; the error was not recorded as an outcome.
    let receipt = h
        .release(&sbx, D::SnapshotAndTerminate, "rel")
        .await
        .unwrap();
    assert!(!receipt.duplicate && receipt.compute_released && receipt.checkpoint.is_some());
    assert_eq!(proc_state(pid), None);
}

#[tokio::test]
async fn a_snapshot_that_cannot_resume_is_terminal_and_the_sandbox_lost() {
    let h = Harness::with_faults("snapshot=fail:times=1;resume=fail:times=1").await;
    let sbx = h.provision("p1").await;
    let pid = background_pid(&h, &sbx).await;
    let err = h
        .release(&sbx, D::SnapshotAndTerminate, "rel")
        .await
        .unwrap_err();
    match &err {
        ProviderCallError::Terminal { status, error } => {
            assert_eq!((*status, error.code.as_str()), (500, "sandbox.lost"));
            assert!(
                error.message.contains("archiving failed"),
                "{}",
                error.message
            );
            assert!(
                error.message.contains("resuming failed"),
                "{}",
                error.message
            );
            assert!(!error.retryable);
        }
        other => panic!("expected a terminal error, got {other:?}"),
    }
    assert_eq!(classify(&err), FailureClass::Final);
    let info = h
        .client
        .inspect(&sbx.r#ref.sandbox_id, &Default::default())
        .await
        .unwrap();
    assert_eq!(info.state, SandboxState::Lost, "never reported running");
    assert_eq!(
        refused(h.sh(&sbx, "true").await),
        (409, "sandbox.not_running".into())
    );
    assert!(matches!(
        h.release(&sbx, D::SnapshotAndTerminate, "rel").await,
        Err(ProviderCallError::Terminal { .. })
    ));
    // The forced terminate (a new key) releases whatever is left.
    let receipt = h.release(&sbx, D::Terminate, "forced").await.unwrap();
    assert!(receipt.compute_released);
    assert_eq!(proc_state(pid), None);
}

#[tokio::test]
async fn a_dropped_release_answer_is_uncertain_and_the_retry_a_duplicate() {
    let h = Harness::with_faults("release=drop:times=1").await;
    let sbx = h.provision("p1").await;
    let err = h.release(&sbx, D::Terminate, "rel").await.unwrap_err();
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
    assert_eq!(classify(&err), FailureClass::Retry);
    let info = h
        .client
        .inspect(&sbx.r#ref.sandbox_id, &Default::default())
        .await
        .unwrap();
    assert_eq!(info.state, SandboxState::Terminated, "the work was done");
    let receipt = h.release(&sbx, D::Terminate, "rel").await.unwrap();
    assert!(receipt.duplicate && receipt.compute_released);
}

#[tokio::test]
async fn injected_endpoint_errors_follow_the_contract() {
    let h = Harness::with_faults("release=recoverable:times=2;attach=terminal:times=1").await;
    let sbx = h.provision("p1").await;
    for _ in 0..2 {
        let err = h.release(&sbx, D::Detach, "d").await.unwrap_err();
        assert!(
            matches!(err, ProviderCallError::Recoverable { status: 503, .. }),
            "{err:?}"
        );
        let info = h
            .client
            .inspect(&sbx.r#ref.sandbox_id, &Default::default())
            .await
            .unwrap();
        assert_eq!(info.state, SandboxState::Ready);
    }
    assert!(
        !h.release(&sbx, D::Detach, "d")
            .await
            .unwrap()
            .compute_released
    );
    let err = h
        .client
        .attach(
            &sbx.r#ref.sandbox_id,
            &Default::default(),
            &Default::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderCallError::Terminal { status: 500, .. }),
        "{err:?}"
    );
    let info = h
        .client
        .inspect(&sbx.r#ref.sandbox_id, &Default::default())
        .await
        .unwrap();
    assert_eq!(info.state, SandboxState::Lost);
    h.release(&sbx, D::Terminate, "t").await.unwrap();
}

#[tokio::test]
async fn a_slow_provider_makes_the_call_time_out_as_uncertain() {
    let h = Harness::with_faults("inspect=hold:times=1").await;
    let sbx = h.provision("p1").await;
    let opts = CallOptions {
        timeout: Some(std::time::Duration::from_millis(100)),
        ..Default::default()
    };
    let err = h
        .client
        .inspect(&sbx.r#ref.sandbox_id, &opts)
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
    assert!(h.client.inspect(&sbx.r#ref.sandbox_id, &opts).await.is_ok());
}

#[tokio::test]
async fn a_forgotten_sandbox_is_gone_with_its_processes_and_answers_404() {
    let mut h = Harness::with_faults("inspect=forget:times=1").await;
    let lost = h.provision("p1").await;
    let kept = h.provision("p2").await;
    let pid = background_pid(&h, &lost).await;
    let id = lost.r#ref.sandbox_id.clone();
    let dir = h.root.path().join("sandboxes").join(&id);
    let state = h.root.path().join(format!("state/sandboxes/{id}.json"));
    assert!(running(pid) && dir.exists() && state.exists());

    let not_found = (404, "sandbox.not_found".to_string());
    assert_eq!(
        refused(h.client.inspect(&id, &Default::default()).await),
        not_found
    );
    assert_eq!(proc_state(pid), None, "its processes are killed");
    assert!(
        !dir.exists() && !state.exists(),
        "its files and state are gone"
    );
    assert_eq!(
        refused(
            h.client
                .attach(&id, &Default::default(), &Default::default())
                .await
        ),
        not_found
    );
    assert_eq!(
        refused(h.release(&lost, D::Terminate, "t").await),
        not_found
    );
    assert_eq!(refused(h.sh(&lost, "true").await), not_found);
    assert_eq!(
        h.sandbox_state(&kept.r#ref.sandbox_id).await,
        SandboxState::Ready
    );
    let listed = h.client.inventory_all(&Default::default()).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].r#ref.sandbox_id, kept.r#ref.sandbox_id);

    h.restart().await;
    assert_eq!(
        refused(h.client.inspect(&id, &Default::default()).await),
        not_found
    );
    assert_eq!(
        h.client
            .inventory_all(&Default::default())
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn a_release_that_forgets_the_sandbox_answers_404_and_kills_it() {
    let h = Harness::with_faults("release=forget:times=1").await;
    let sbx = h.provision("p1").await;
    let pid = background_pid(&h, &sbx).await;
    assert_eq!(
        refused(h.release(&sbx, D::SnapshotAndTerminate, "s").await),
        (404, "sandbox.not_found".into())
    );
    assert_eq!(proc_state(pid), None);
    assert!(h
        .client
        .checkpoints_all(&Default::default())
        .await
        .unwrap()
        .is_empty());
    assert!(h
        .client
        .inventory_all(&Default::default())
        .await
        .unwrap()
        .is_empty());
}
