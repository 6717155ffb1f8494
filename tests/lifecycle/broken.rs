//! A resuming run whose sandbox the provider cannot terminate (it answers `sandbox.kill_failed`
//! and then reports the sandbox lost) is told so after a few attempts instead of waiting on
//! the terminate forever; the terminate goes on as the end of the run.

use sagents::domain::run::RunState;
use sagents::domain::sandbox::WorkspaceMode;
use sagents::providers::wire::SandboxState;
use sagents::store::Backend;

use super::fixture::{ax_with_faults, spec_json};

crate::on_both_backends!(
    a_sandbox_that_cannot_be_terminated_fails_the_approved_run_with_the_providers_word
);

async fn a_sandbox_that_cannot_be_terminated_fails_the_approved_run_with_the_providers_word(
    backend: Backend,
) {
    let ax = ax_with_faults(backend, "kill=fail").await;
    let session = ax.app.create_session().await;
    let spec = spec_json(WorkspaceMode::ActiveWorkspace, Some("proj"));
    let run = ax.run_with(&session, spec, None).await;
    assert_eq!(ax.drain().await, 1);
    let claim = ax.claim().await;
    ax.suspend(&claim, "approval_required").await;
    ax.drain().await;
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "release_failed", "{record}");
    assert_eq!(record["error"]["code"], "sandbox.kill_failed");
    assert_eq!(
        ax.provider.sandbox_state(&claim.sandbox_id).await,
        SandboxState::Lost
    );

    ax.approve(&session).await;
    for _ in 0..30 {
        ax.drain().await;
        if ax.run(&run).await.state == RunState::Failed {
            break;
        }
        ax.advance(1);
    }
    let failed = ax.run(&run).await;
    assert_eq!(failed.state, RunState::Failed, "told, not left waiting");
    let error = failed.error.expect("the run says why");
    assert_eq!(error["code"], "sandbox.kill_failed", "{error}");
    let record = ax.record(&run).await;
    assert!(record["retry_count"].as_i64().unwrap() >= 3, "{record}");
    assert_ne!(
        record["state"], "released",
        "no release is claimed: {record}"
    );
}
