//! What keeps a suspended run's sandbox alive, and what lets it go: a running `continue`
//! job, a child run that still holds compute.

use sagents::domain::sandbox::WorkspaceMode;
use sagents::store::Backend;
use serde_json::json;

use super::fixture::{ax, ax_with_faults, spec_json, Ax, Claimed};
use super::{assert_gone, running};
use crate::on_both_backends;

on_both_backends!(
    a_continue_job_holds_the_release_until_it_finishes,
    a_child_run_holds_its_parent_until_the_child_is_released,
    a_run_in_a_child_session_holds_its_parents_release,
    a_child_created_after_a_failed_release_keeps_the_parents_sandbox,
    a_parent_that_ends_is_terminated_whatever_its_children_hold,
    a_parent_run_of_an_unrelated_session_is_refused,
);

/// A session under `parent` (a sub-agent's).
async fn child_session(ax: &Ax, parent: &str) -> String {
    let s = ax
        .app
        .post_ok(
            "/v1/sessions",
            &ax.app.frontend,
            &json!({"title": "sub-agent", "parent_session_id": parent}),
            201,
        )
        .await;
    s["id"].as_str().unwrap().to_owned()
}

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

async fn a_run_in_a_child_session_holds_its_parents_release(backend: Backend) {
    let ax = ax(backend).await;
    let session = ax.app.create_session().await;
    let sub = child_session(&ax, &session).await;
    let spec = spec_json(WorkspaceMode::Isolated, None);
    let parent = ax.run_with(&session, spec.clone(), None).await;
    ax.drain().await;
    let parent_claim = ax.claim().await;
    let child = ax.run_with(&sub, spec, Some(&parent)).await;
    ax.drain().await;
    let child_claim = ax.claim().await;
    assert_eq!(child_claim.run_id, child);
    let parent_pid = ax.background(&parent_claim).await;

    ax.suspend(&parent_claim, "approval_required").await;
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&parent).await;
    assert_eq!(record["state"], "release_blocked", "{record}");
    assert_eq!(record["blocking_child_run_ids"], json!([child]));
    assert!(running(parent_pid));

    ax.complete(&child_claim).await;
    assert_eq!(
        ax.drain().await,
        2,
        "the child's release in its own session made the parent due at once"
    );
    assert_eq!(ax.record(&child).await["state"], "released");
    assert_eq!(ax.record(&parent).await["state"], "released");
    assert_gone(parent_pid, "the parent's sandbox is released").await;
}

async fn a_child_created_after_a_failed_release_keeps_the_parents_sandbox(backend: Backend) {
    let ax = ax_with_faults(backend, "release=recoverable:times=1").await;
    let session = ax.app.create_session().await;
    let sub = child_session(&ax, &session).await;
    let spec = spec_json(WorkspaceMode::Isolated, None);
    let (parent, parent_claim) = ax.running_isolated(&session).await;
    let parent_pid = ax.background(&parent_claim).await;
    ax.suspend(&parent_claim, "approval_required").await;
    ax.drain().await;
    let record = ax.record(&parent).await;
    assert_eq!(record["state"], "release_failed", "{record}");

    let child = ax.run_with(&sub, spec, Some(&parent)).await;
    ax.drain().await;
    let record = ax.record(&parent).await;
    assert_eq!(
        record["state"], "release_blocked",
        "the new child's sandbox holds the parent's: {record}"
    );
    assert_eq!(record["blocking_child_run_ids"], json!([child]));
    assert!(running(parent_pid));
    ax.advance(3600);
    ax.drain().await;
    assert_eq!(ax.record(&parent).await["state"], "release_blocked");
    assert!(running(parent_pid), "no retry released it meanwhile");

    let child_claim = ax.claim().await;
    assert_eq!(child_claim.run_id, child);
    ax.complete(&child_claim).await;
    ax.drain().await;
    assert_eq!(ax.record(&child).await["state"], "released");
    assert_eq!(ax.record(&parent).await["state"], "released");
    assert_gone(parent_pid, "released once the child was").await;
}

/// Children hold a suspended parent's sandbox, not a finished one: the end of a run releases
/// its compute whatever holds it, and the child keeps its own.
async fn a_parent_that_ends_is_terminated_whatever_its_children_hold(backend: Backend) {
    let ax = ax(backend).await;
    let session = ax.app.create_session().await;
    let sub = child_session(&ax, &session).await;
    let spec = spec_json(WorkspaceMode::Isolated, None);
    let (parent, parent_claim) = ax.running_isolated(&session).await;
    let child = ax.run_with(&sub, spec, Some(&parent)).await;
    ax.drain().await;
    let child_claim = ax.claim().await;
    assert_eq!(child_claim.run_id, child);
    let parent_pid = ax.background(&parent_claim).await;
    let child_pid = ax.background(&child_claim).await;
    ax.suspend(&parent_claim, "approval_required").await;
    assert_eq!(ax.drain().await, 1);
    assert_eq!(ax.record(&parent).await["state"], "release_blocked");

    ax.app
        .post_ok(
            &format!("/v1/sessions/{session}/runs/{parent}/cancel"),
            &ax.app.frontend,
            &json!({}),
            200,
        )
        .await;
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&parent).await;
    assert_eq!(record["state"], "released", "{record}");
    assert_eq!(record["release_purpose"], "run_ended");
    assert_gone(parent_pid, "the ended parent's sandbox is terminated").await;
    assert_eq!(ax.record(&child).await["state"], "active");
    assert!(running(child_pid), "the child keeps its own sandbox");
}

async fn a_parent_run_of_an_unrelated_session_is_refused(backend: Backend) {
    let ax = ax(backend).await;
    let session = ax.app.create_session().await;
    let unrelated = ax.app.create_session().await;
    let sub = child_session(&ax, &session).await;
    let parent = ax.isolated_run(&unrelated).await;
    let problem = ax
        .app
        .post_ok(
            &format!("/v1/sessions/{sub}/runs"),
            &ax.app.runtime,
            &json!({
                "sandbox_spec": spec_json(WorkspaceMode::Isolated, None),
                "resolved_spec_hash": crate::common::app::hash('c'),
                "input": {},
                "parent_run_id": parent,
            }),
            422,
        )
        .await;
    assert!(problem.to_string().contains("parent_run_id"), "{problem}");
    // A run of the session's parent session is a valid parent (a sub-agent's).
    let own = ax.isolated_run(&session).await;
    ax.run_with(&sub, spec_json(WorkspaceMode::Isolated, None), Some(&own))
        .await;
}
