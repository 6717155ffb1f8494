//! The whole cycle over HTTP: provision, claim with a grant, suspend, release, resume,
//! restore, complete, terminate; for an isolated sandbox, an active workspace and a policy
//! hold.

use sagents::domain::sandbox::WorkspaceMode;
use sagents::providers::wire::SandboxState;
use sagents::store::Backend;
use serde_json::json;

use super::fixture::{ax, spec_json};
use super::{assert_gone, running};
use crate::common::app::expect_problem;
use crate::on_both_backends;
use crate::provider::proc_state;

on_both_backends!(
    an_isolated_sandbox_is_snapshotted_away_and_restored_with_its_files,
    an_active_workspace_is_terminated_and_provisioned_fresh_over_its_host_files,
    a_policy_hold_keeps_the_sandbox_and_never_counts_it_released,
    the_operator_routes_explain_a_run_without_changing_it,
);

async fn an_isolated_sandbox_is_snapshotted_away_and_restored_with_its_files(backend: Backend) {
    let ax = ax(backend).await;
    let session = ax.app.create_session().await;
    let run = ax.isolated_run(&session).await;
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "provisioning");
    ax.claim_none().await;

    let record = ax.drain_to_active(&run, 1).await;
    let claim = ax.claim().await;
    assert_eq!(claim.kind, "start");
    assert_eq!(claim.generation, 1);
    assert_eq!(claim.sandbox_id, record["sandbox_ref"]["sandbox_id"]);
    assert!(!claim.grant.is_empty());
    ax.sh(
        &claim,
        "mkdir -p src && printf 'fn main() {}' > src/main.rs",
    )
    .await;
    let pid = ax.background(&claim).await;
    assert!(proc_state(pid).is_some());

    let (suspended, record) = ax
        .suspend_and_drain(&session, &claim, "approval_required")
        .await;
    assert_eq!(record["state"], "released");
    assert_eq!(record["disposition"], "snapshot_and_terminate");
    assert_eq!(record["compute_released"], true);
    assert!(record["sandbox_checkpoint"]["checkpoint_id"].is_string());
    assert_gone(pid, "no process of a released sandbox runs").await;
    assert_eq!(
        ax.provider.sandbox_state(&claim.sandbox_id).await,
        SandboxState::Terminated
    );
    assert!(
        ax.exec(&claim, "true").await.is_err(),
        "the old grant opens nothing"
    );
    assert_eq!(
        ax.snapshot_bytes(&session).await,
        suspended,
        "releasing compute changes neither the snapshot's bytes nor its ETag"
    );
    ax.claim_none().await;

    ax.approve(&session).await;
    let resuming = ax.snapshot_bytes(&session).await;
    ax.claim_none().await;
    let record = ax.drain_to_active(&run, 2).await;
    assert_ne!(
        record["sandbox_ref"]["sandbox_id"],
        claim.sandbox_id.as_str()
    );
    assert_eq!(ax.snapshot_bytes(&session).await, resuming);

    let resumed = ax.claim().await;
    assert_eq!(resumed.kind, "resume");
    assert_eq!(resumed.generation, 2);
    assert_eq!(resumed.sandbox_id, record["sandbox_ref"]["sandbox_id"]);
    assert_eq!(ax.sh(&resumed, "cat src/main.rs").await, "fn main() {}");
    ax.resumed(&resumed).await;
    let pid = ax.background(&resumed).await;
    ax.complete(&resumed).await;
    assert_eq!(ax.drain().await, 1);
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "released");
    assert_eq!(record["disposition"], "terminate");
    assert_eq!(record["release_purpose"], "run_ended");
    assert_gone(pid, "no sandbox outlives its run").await;
    assert_eq!(
        ax.provider.sandbox_state(&resumed.sandbox_id).await,
        SandboxState::Terminated
    );
    assert_eq!(ax.drain().await, 0, "nothing is left to do");
}

async fn an_active_workspace_is_terminated_and_provisioned_fresh_over_its_host_files(
    backend: Backend,
) {
    let ax = ax(backend).await;
    let session = ax.app.create_session().await;
    let spec = spec_json(WorkspaceMode::ActiveWorkspace, Some("proj"));
    let run = ax.run_with(&session, spec, None).await;
    assert_eq!(ax.drain().await, 1);
    let claim = ax.claim().await;
    ax.sh(&claim, "printf draft > plan.md").await;
    let pid = ax.background(&claim).await;
    // An active workspace lies in its tenant's folder of the workspace root.
    let tenants: Vec<_> = std::fs::read_dir(ax.provider.root.path().join("workspaces"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(tenants.len(), 1, "{tenants:?}");
    let host = tenants[0].join("proj");
    assert_eq!(
        std::fs::read_to_string(host.join("plan.md")).unwrap(),
        "draft"
    );

    let (suspended, record) = ax
        .suspend_and_drain(&session, &claim, "input_required")
        .await;
    assert_eq!(record["state"], "released");
    assert_eq!(record["disposition"], "terminate");
    assert_eq!(record["sandbox_checkpoint"], json!(null));
    assert_gone(pid, "the process is gone").await;
    assert_eq!(
        std::fs::read_to_string(host.join("plan.md")).unwrap(),
        "draft",
        "the host keeps the workspace's files"
    );
    assert_eq!(ax.snapshot_bytes(&session).await, suspended);

    ax.approve(&session).await;
    let record = ax.drain_to_active(&run, 2).await;
    let fresh = record["sandbox_ref"]["sandbox_id"].as_str().unwrap();
    assert_ne!(fresh, claim.sandbox_id);
    assert_eq!(ax.provider.sandbox_state(fresh).await, SandboxState::Ready);
    let resumed = ax.claim().await;
    assert_eq!((resumed.kind.as_str(), resumed.generation), ("resume", 2));
    assert_eq!(resumed.sandbox_id, fresh);
    assert_eq!(
        ax.sh(&resumed, "cat plan.md").await,
        "draft",
        "the fresh sandbox mounts the same workspace, and the claim's grant opens it"
    );
    ax.resumed(&resumed).await;
    ax.complete(&resumed).await;
    assert_eq!(ax.drain().await, 1);
    assert_eq!(ax.record(&run).await["state"], "released");
    assert_eq!(
        ax.provider.sandbox_state(fresh).await,
        SandboxState::Terminated
    );
    assert_eq!(
        std::fs::read_to_string(host.join("plan.md")).unwrap(),
        "draft"
    );
}

async fn a_policy_hold_keeps_the_sandbox_and_never_counts_it_released(backend: Backend) {
    let ax = ax(backend).await;
    let session = ax.app.create_session().await;
    let (run, claim) = ax.running_isolated(&session).await;
    let (pid, nspid) = ax.background_pids(&claim).await;
    let (suspended, record) = ax.suspend_and_drain(&session, &claim, "policy_hold").await;
    assert_eq!(record["state"], "release_blocked");
    assert_eq!(record["disposition"], "detach");
    assert_eq!(record["compute_released"], false);
    assert_eq!(record["released_at"], json!(null));
    assert_eq!(record["due_at"], json!(null));
    assert!(running(pid), "the held sandbox keeps running");
    assert_eq!(
        ax.provider.sandbox_state(&claim.sandbox_id).await,
        SandboxState::Ready
    );
    let m = ax.metrics().await;
    assert_eq!(m["retained_sandboxes"], 1);
    assert_eq!(m["pending_releases"], 1);
    assert_eq!(m["active_sandboxes"], 0);
    assert_eq!(m["records_by_state"]["released"], 0);
    let counters = &ax.app.state.metrics.lifecycle;
    assert_eq!(
        counters.provider_calls("release", "ok"),
        0,
        "detach is never sent"
    );
    ax.advance(3600);
    assert_eq!(ax.drain().await, 0, "a held sandbox is not polled");
    assert_eq!(ax.snapshot_bytes(&session).await, suspended);

    ax.approve(&session).await;
    let record = ax.drain_to_active(&run, 2).await;
    assert_eq!(
        record["sandbox_ref"]["sandbox_id"],
        claim.sandbox_id.as_str()
    );
    let resumed = ax.claim().await;
    assert_eq!(
        resumed.sandbox_id, claim.sandbox_id,
        "the same sandbox, re-attached"
    );
    assert!(running(pid));
    assert_eq!(
        ax.sh(&resumed, &format!("kill -0 {nspid} && echo alive"))
            .await,
        "alive\n",
        "the re-attached sandbox opens with the resume claim's grant"
    );
    ax.resumed(&resumed).await;
    ax.complete(&resumed).await;
    assert_eq!(ax.drain().await, 1);
    assert_eq!(ax.record(&run).await["state"], "released");
    assert_gone(pid, "the run's end terminates even a held sandbox").await;
}

async fn the_operator_routes_explain_a_run_without_changing_it(backend: Backend) {
    let ax = ax(backend).await;
    let session = ax.app.create_session().await;
    let run = ax.isolated_run(&session).await;
    let plain = ax.app.create_run(&session).await;
    let before = ax.snapshot_bytes(&session).await;
    let record = ax.record(&run).await;
    assert_eq!(record["run_id"], run.as_str());
    assert_eq!(record["provider_id"], "local");
    assert_eq!(ax.metrics().await["records_by_state"]["provisioning"], 1);
    assert_eq!(ax.snapshot_bytes(&session).await, before);

    for (path, code) in [
        (
            format!("/v1/admin/runs/{plain}/execution-resource"),
            "execution_resource.not_found",
        ),
        (
            "/v1/admin/runs/run_0123456789abcdef0123456789abcdef/execution-resource".into(),
            "execution_resource.not_found",
        ),
        (
            "/v1/admin/runs/nope/execution-resource".into(),
            "run.not_found",
        ),
    ] {
        let res = ax.app.get(&path, &ax.app.admin).await;
        expect_problem(res, 404, code, None).await;
    }
    for path in [
        format!("/v1/admin/runs/{run}/execution-resource"),
        "/v1/admin/lifecycle/metrics".into(),
    ] {
        let res = ax.app.get(&path, &ax.app.frontend).await;
        assert_eq!(res.status(), 403, "operators only: {path}");
    }

    ax.drain().await;
    let text = ax.prometheus().await;
    assert!(
        text.contains("sagents_lifecycle_active_sandboxes 1\n"),
        "{text}"
    );
    assert!(text.contains("sagents_provider_calls_total{endpoint=\"provision\",status=\"ok\"} 1\n"));
}
