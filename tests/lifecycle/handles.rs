//! A handle is checked before it is bound: a provider that answers with another run's sandbox
//! fails the run with `sandbox.handle_mismatch`, and that compute is terminated, not kept.

use sagents::store::Backend;

use super::fixture::ax_with_faults;

crate::on_both_backends!(a_handle_naming_another_run_fails_the_run_and_is_terminated);

async fn a_handle_naming_another_run_fails_the_run_and_is_terminated(backend: Backend) {
    let ax = ax_with_faults(backend, "provision=foreign:times=1").await;
    let session = ax.app.create_session().await;
    let run = ax.isolated_run(&session).await;
    ax.drain().await;

    let failed = ax.run(&run).await;
    assert_eq!(failed.state.as_str(), "failed");
    let error = failed.error.expect("the run's error");
    assert_eq!(error["code"], "sandbox.handle_mismatch", "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("owner_run_id"),
        "{error}"
    );
    let record = ax.record(&run).await;
    assert_eq!(record["state"], "released", "{record}");
    assert_eq!(record["disposition"], "terminate");
    assert_eq!(record["release_purpose"], "run_ended");
    let sandbox = record["sandbox_ref"]["sandbox_id"].as_str().unwrap();
    assert_eq!(
        ax.provider.sandbox_state(sandbox).await.as_str(),
        "terminated",
        "the compute bound by mistake is gone"
    );
    ax.claim_none().await;
}
