//! A provider that lost a sandbox's state (its state folder gone) answers 404 for it: the
//! release is settled by an inspect that finds nothing, and the resume goes on from what is
//! left: a fresh sandbox over the host's files, or a clear failure when the files went with
//! the sandbox. Nothing waits, and nothing is counted as released by a receipt.

use sagents::domain::run::RunState;
use sagents::domain::sandbox::WorkspaceMode;
use sagents::providers::wire::SandboxState;
use sagents::store::Backend;

use super::assert_gone;
use super::fixture::{ax_with_faults, spec_json};

crate::on_both_backends!(
    a_lost_snapshot_sandbox_fails_its_resume_clearly,
    a_lost_active_workspace_sandbox_is_provisioned_fresh_on_resume,
);

async fn a_lost_snapshot_sandbox_fails_its_resume_clearly(backend: Backend) {
    let ax = ax_with_faults(backend, "release=forget:times=1").await;
    let (session, run, _claim, pid) = ax.suspended_with_work().await;
    assert_eq!(ax.drain().await, 1, "settled in one step, without a retry");
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "released", "{record}");
    assert_eq!(record["disposition"], "snapshot_and_terminate");
    assert_eq!(record["compute_released"], false, "no receipt said so");
    assert_eq!(record["checkpoint_lost"], true);
    assert_eq!(record["error"]["code"], "release.confirmed_by_inspect");
    let message = record["error"]["message"].as_str().unwrap();
    assert!(message.contains("knows no sandbox"), "{message}");
    assert_gone(pid, "the lost sandbox's processes are gone").await;

    ax.approve(&session).await;
    ax.drain().await;
    let run = ax.run(&run).await;
    assert_eq!(run.state, RunState::Failed);
    assert_eq!(
        run.error.as_ref().unwrap()["code"],
        "sandbox.snapshot_lost",
        "{run:?}"
    );
}

async fn a_lost_active_workspace_sandbox_is_provisioned_fresh_on_resume(backend: Backend) {
    let ax = ax_with_faults(backend, "release=forget:times=1").await;
    let session = ax.app.create_session().await;
    let spec = spec_json(WorkspaceMode::ActiveWorkspace, Some("proj"));
    let run = ax.run_with(&session, spec, None).await;
    assert_eq!(ax.drain().await, 1);
    let claim = ax.claim().await;
    ax.sh(&claim, "printf draft > plan.md").await;
    let (_, record) = ax
        .suspend_and_drain(&session, &claim, "input_required")
        .await;
    assert_eq!(record["state"], "released", "{record}");
    assert_eq!(record["error"]["code"], "release.confirmed_by_inspect");

    ax.approve(&session).await;
    let record = ax.drain_to_active(&run, 2).await;
    let fresh = record["sandbox_ref"]["sandbox_id"].as_str().unwrap();
    assert_ne!(fresh, claim.sandbox_id);
    assert_eq!(ax.provider.sandbox_state(fresh).await, SandboxState::Ready);
    let resumed = ax.claim().await;
    assert_eq!(ax.sh(&resumed, "cat plan.md").await, "draft");
}
