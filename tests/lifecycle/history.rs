//! Frontends never see execution-resource state: a full cycle leaves no `lifecycle.*` entry in
//! the session's event log, while operators read the run's resource history.

use sagents::store::Backend;

use super::fixture::ax;

crate::on_both_backends!(resource_history_is_for_operators_only);

async fn resource_history_is_for_operators_only(backend: Backend) {
    let ax = ax(backend).await;
    let session = ax.app.create_session().await;
    let (run, claim) = ax.running_isolated(&session).await;
    ax.suspend(&claim, "approval_required").await;
    ax.drain().await;
    ax.approve(&session).await;
    ax.drain().await;
    let resumed = ax.claim().await;
    ax.resumed(&resumed).await;
    ax.complete(&resumed).await;
    ax.drain().await;

    let log = ax
        .app
        .get_ok(&format!("/v1/sessions/{session}/events"), &ax.app.frontend)
        .await;
    let types: Vec<&str> = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert!(types.contains(&"run.completed"), "{types:?}");
    let text = log.to_string();
    for hidden in ["lifecycle.", "provider_id", "generation", "sandbox"] {
        assert!(
            !text.contains(hidden),
            "`{hidden}` in a frontend event: {text}"
        );
    }

    let path = format!("/v1/admin/runs/{run}/execution-resource/events");
    let history = ax.app.get_ok(&path, &ax.app.admin).await;
    let entries = history["events"].as_array().unwrap();
    let states: Vec<&str> = entries
        .iter()
        .map(|e| e["data"]["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        [
            "active",
            "release_requested",
            "released",
            "restore_requested",
            "active",
            "release_requested",
            "released"
        ]
    );
    assert!(entries.iter().all(|e| e["data"]["provider_id"] == "local"));
    let sequences: Vec<i64> = entries
        .iter()
        .map(|e| e["sequence"].as_i64().unwrap())
        .collect();
    assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");
    assert_eq!(history["next_after"], *sequences.last().unwrap());
    let page = ax
        .app
        .get_ok(
            &format!("{path}?after={}&limit=2", sequences[1]),
            &ax.app.admin,
        )
        .await;
    assert_eq!(page["events"].as_array().unwrap().len(), 2);
    assert_eq!(page["events"][0]["sequence"], sequences[2]);

    let refused = ax.app.get(&path, &ax.app.frontend).await;
    assert_eq!(refused.status(), 403, "frontends cannot read it");
    let none = ax
        .app
        .get(
            "/v1/admin/runs/run_00000000000000000000000000/execution-resource/events",
            &ax.app.admin,
        )
        .await;
    assert_eq!(none.status(), 404);
}
