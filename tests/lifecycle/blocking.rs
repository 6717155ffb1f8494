//! What keeps a suspended run's sandbox alive, and what lets it go: a running `continue`
//! job, a child run that still holds compute.

use sagents::domain::sandbox::WorkspaceMode;
use sagents::store::Backend;
use serde_json::json;

use super::fixture::{ax, spec_json, Ax, Claimed};
use super::{assert_gone, running};
use crate::on_both_backends;

on_both_backends!(
    a_continue_job_holds_the_release_until_it_finishes,
    a_child_run_holds_its_parent_until_the_child_is_released,
);

async fn job(ax: &Ax, c: &Claimed, pause: &str, affinity: &str) -> String {
    let job = ax
        .app
        .post_ok(
            &format!("/v1/runs/{}/jobs", c.run_id),
            &ax.app.runtime,
            &json!({
                "fencing_token": c.token,
                "kind": "shell",
                "payload": {"cmd": "make test"},
                "pause_behavior": pause,
                "execution_affinity": affinity,
            }),
            201,
        )
        .await;
    job["id"].as_str().unwrap().to_owned()
}

async fn a_continue_job_holds_the_release_until_it_finishes(backend: Backend) {
    let ax = ax(backend).await;
    let session = ax.app.create_session().await;
    let (run, claim) = ax.running_isolated(&session).await;
    let pid = ax.background(&claim).await;
    let holding = job(&ax, &claim, "continue", "sandbox").await;
    job(&ax, &claim, "continue", "external").await;
    job(&ax, &claim, "cancel", "sandbox").await;
    let (user_view, record) = ax
        .suspend_and_drain(&session, &claim, "approval_required")
        .await;
    assert_eq!(record["state"], "release_blocked");
    assert_eq!(record["blocking_job_ids"], json!([holding]));
    assert_eq!(record["disposition"], "snapshot_and_terminate");
    assert_eq!(record["due_at"], json!(null));
    assert!(running(pid));
    ax.advance(24 * 3600);
    assert_eq!(
        ax.drain().await,
        0,
        "no timer re-evaluates a blocked record"
    );

    ax.patch_job(&run, &holding, "completed").await;
    assert_eq!(
        ax.drain().await,
        1,
        "the finished job made the record due at once"
    );
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "released");
    assert_eq!(record["blocking_job_ids"], json!([]));
    assert_gone(pid, "the process is gone").await;
    assert_eq!(ax.snapshot_bytes(&session).await, user_view);
}

async fn a_child_run_holds_its_parent_until_the_child_is_released(backend: Backend) {
    let ax = ax(backend).await;
    let session = ax.app.create_session().await;
    let spec = spec_json(WorkspaceMode::Isolated, None);
    let parent = ax.run_with(&session, spec.clone(), None).await;
    ax.drain().await;
    let parent_claim = ax.claim().await;
    assert_eq!(parent_claim.run_id, parent);
    let child = ax.run_with(&session, spec, Some(&parent)).await;
    ax.drain().await;
    let child_claim = ax.claim().await;
    assert_eq!(child_claim.run_id, child);
    let parent_pid = ax.background(&parent_claim).await;

    ax.suspend(&parent_claim, "approval_required").await;
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&parent).await;
    assert_eq!(record["state"], "release_blocked");
    assert_eq!(record["blocking_child_run_ids"], json!([child]));
    assert!(running(parent_pid));
    let user_view = ax.snapshot_bytes(&session).await;

    ax.suspend(&child_claim, "input_required").await;
    let user_view_after_child = ax.snapshot_bytes(&session).await;
    assert_ne!(
        user_view_after_child, user_view,
        "the child's suspension is visible"
    );
    assert_eq!(
        ax.drain().await,
        2,
        "the child's release made its parent due at once"
    );
    assert_eq!(ax.record(&child).await["state"], "released");
    let record = ax.record(&parent).await;
    assert_eq!(record["state"], "released");
    assert_eq!(record["blocking_child_run_ids"], json!([]));
    assert_gone(parent_pid, "the process is gone").await;
    assert_eq!(ax.snapshot_bytes(&session).await, user_view_after_child);
}
