//! A handle is checked before it is bound: a provider that answers with another run's sandbox
//! fails the run with `sandbox.handle_mismatch`, and that sandbox is quarantined (recorded for
//! operators, counted), never bound to the run and never terminated by it.

use sagents::store::Backend;

use super::fixture::ax_with_faults;

crate::on_both_backends!(a_handle_naming_another_run_fails_the_run_and_is_quarantined);

async fn a_handle_naming_another_run_fails_the_run_and_is_quarantined(backend: Backend) {
    let ax = ax_with_faults(backend, "provision=foreign:times=1").await;
    let session = ax.app.create_session().await;
    let run = ax.isolated_run(&session).await;
    ax.drain().await;

    let failed = ax.run(&run).await;
    assert_eq!(failed.state.as_str(), "failed");
    let error = failed.error.expect("the run's error");
    assert_eq!(error["code"], "sandbox.handle_mismatch", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("owner_run_id"), "{error}");
    assert!(message.contains("run_foreign"), "{error}");

    let record = ax.record(&run).await;
    assert_eq!(record["state"], "released", "{record}");
    assert_eq!(record["compute_released"], false, "{record}");
    assert_eq!(
        record["sandbox_ref"],
        serde_json::Value::Null,
        "the foreign sandbox is never bound to the run: {record}"
    );
    assert_eq!(record["error"]["code"], "sandbox.handle_mismatch");
    let noted = record["error"]["message"].as_str().unwrap();
    assert!(noted.contains("quarantined"), "{record}");
    let sandbox = noted
        .split('`')
        .nth(1)
        .expect("the foreign sandbox's id")
        .to_owned();
    assert_eq!(
        ax.provider.sandbox_state(&sandbox).await.as_str(),
        "ready",
        "a sandbox that names another owner is not this run's to terminate"
    );
    assert_eq!(
        ax.app
            .store()
            .metrics()
            .lifecycle
            .handle_mismatches("provision"),
        1
    );
    assert!(ax
        .prometheus()
        .await
        .contains("sagents_lifecycle_handle_mismatches_total{operation=\"provision\"} 1"));
    ax.drain().await;
    ax.claim_none().await;
}
