//! A provider killed in the middle of a provision or restore (the `crash` fault: it stops
//! right after a step, leaving files and processes as they are), then started again on the
//! same root: the retry with the same key gets one sandbox, under the id the interrupted
//! attempt chose, and nothing else runs.

use std::path::{Path, PathBuf};

use sagents::providers::wire::InventoryQuery;
use sagents::providers::wire_spec::ReleaseDisposition as D;

use super::*;

const STEPS: [&str; 5] = [
    "create_intent",
    "create_files",
    "create_leader",
    "create_state",
    "create_record",
];

/// The processes whose working directory lies under `root`: the sandboxes of one harness.
fn processes_under(root: &Path) -> Vec<(i32, PathBuf)> {
    let root = root.canonicalize().unwrap();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if proc_state(pid).is_none() {
            continue;
        }
        if let Ok(cwd) = std::fs::read_link(e.path().join("cwd")) {
            if cwd.starts_with(&root) {
                out.push((pid, cwd));
            }
        }
    }
    out
}

/// The isolated sandbox folders under the harness root.
fn sandbox_dirs(h: &Harness) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(h.root.path().join("sandboxes"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

async fn listed(h: &Harness) -> Vec<(String, SandboxState)> {
    let page = h
        .client
        .list_sandboxes(&InventoryQuery::default(), &CallOptions::default())
        .await
        .unwrap();
    page.items
        .into_iter()
        .map(|i| (i.r#ref.sandbox_id, i.state))
        .collect()
}

/// Whether a provision under `key` got no answer.
async fn crashed(h: &Harness, key: &str) -> bool {
    h.provision_spec(key, spec(WorkspaceMode::Isolated, None))
        .await
        .is_err()
}

/// Starts the provider again on the same root, without faults.
async fn restart_clean(h: &mut Harness) {
    h.config.fault_injection = None;
    h.restart().await;
}

async fn crash_then_retry_provision(
    step: &str,
    s: ResolvedSandboxSpec,
) -> (Harness, SandboxHandle) {
    let mut h = Harness::with_faults(&format!("{step}=crash:times=1")).await;
    assert!(
        h.provision_spec("run:g1:provision", s.clone())
            .await
            .is_err(),
        "{step}: the crashed call gets no answer"
    );
    let ran = processes_under(h.root.path()).len();
    let expected = usize::from(STEPS.iter().position(|s| *s == step).unwrap() >= 2);
    assert_eq!(ran, expected, "{step}: what the crash left running");
    restart_clean(&mut h).await;
    let after_start = listed(&h).await;
    if step == "create_record" {
        assert_eq!(after_start.len(), 1, "{step}: the answered sandbox is kept");
    } else {
        assert_eq!(
            after_start,
            vec![],
            "{step}: no key names the half-made sandbox"
        );
        assert_eq!(processes_under(h.root.path()), vec![], "{step}");
    }
    let sbx = h
        .provision_spec("run:g1:provision", s)
        .await
        .unwrap_or_else(|e| panic!("{step}: the retry fails: {e:?}"));
    (h, sbx)
}

#[tokio::test]
async fn a_provision_interrupted_at_any_step_is_retried_into_exactly_one_sandbox() {
    for step in STEPS {
        let (h, sbx) = crash_then_retry_provision(step, spec(WorkspaceMode::Isolated, None)).await;
        let id = sbx.r#ref.sandbox_id.clone();
        assert_eq!(sbx.state, SandboxState::Ready, "{step}");
        assert_eq!(
            listed(&h).await,
            vec![(id.clone(), SandboxState::Ready)],
            "{step}"
        );
        assert_eq!(
            sandbox_dirs(&h),
            vec![id.clone()],
            "{step}: one sandbox folder"
        );
        let running = processes_under(h.root.path());
        assert_eq!(running.len(), 1, "{step}: one leader runs: {running:?}");
        assert!(running[0].1.ends_with(&id), "{step}: {running:?}");
        let out = h.sh(&sbx, "echo ok").await.unwrap();
        assert_eq!(out.stdout, "ok\n", "{step}");

        let again = h.provision("run:g1:provision").await;
        assert_eq!(again.r#ref.sandbox_id, id, "{step}: a replay");
        h.release(&sbx, D::Terminate, "t").await.unwrap();
        assert_eq!(processes_under(h.root.path()), vec![], "{step}");
    }
}

#[tokio::test]
async fn the_retry_reuses_the_sandbox_id_the_interrupted_attempt_chose() {
    let mut h = Harness::with_faults("create_state=crash:times=1").await;
    assert!(crashed(&h, "k").await);
    let chosen = sandbox_dirs(&h);
    assert_eq!(chosen.len(), 1);
    restart_clean(&mut h).await;
    assert_eq!(
        sandbox_dirs(&h),
        Vec::<String>::new(),
        "the half-made folder is gone"
    );
    let sbx = h.provision("k").await;
    assert_eq!(vec![sbx.r#ref.sandbox_id.clone()], chosen);
}

#[tokio::test]
async fn a_retry_without_a_restart_removes_the_half_made_sandbox_first() {
    let h = Harness::with_faults("create_leader=crash:times=1").await;
    assert!(crashed(&h, "k").await);
    assert_eq!(processes_under(h.root.path()).len(), 1);
    let sbx = h.provision("k").await;
    let running = processes_under(h.root.path());
    assert_eq!(running.len(), 1, "{running:?}");
    assert!(running[0].1.ends_with(&sbx.r#ref.sandbox_id));
    assert_eq!(listed(&h).await.len(), 1);
}

#[tokio::test]
async fn another_request_under_an_interrupted_key_is_a_conflict() {
    let mut h = Harness::with_faults("create_leader=crash:times=1").await;
    assert!(crashed(&h, "k").await);
    restart_clean(&mut h).await;
    let req = ProvisionRequest {
        spec: spec(WorkspaceMode::Isolated, None),
        owner_run_id: "run_other".into(),
        tenant_id: "acme".into(),
        idempotency_key: "k".into(),
        context: RequestContext::default(),
    };
    assert_eq!(
        refused(h.client.provision(&req, &CallOptions::default()).await),
        (409, "idempotency.key_reused".into())
    );
    assert_eq!(listed(&h).await, vec![]);
}

#[tokio::test]
async fn an_interrupted_active_workspace_provision_frees_the_workspace() {
    for step in ["create_leader", "create_state", "create_record"] {
        let s = spec(WorkspaceMode::ActiveWorkspace, Some("proj"));
        let (h, sbx) = crash_then_retry_provision(step, s).await;
        let ws = h.root.path().join("workspaces/acme/proj");
        let out = h.sh(&sbx, "echo kept > note.txt").await.unwrap();
        assert_eq!(out.exit_code, Some(0), "{step}");
        assert_eq!(processes_under(&ws).len(), 1, "{step}");
        h.release(&sbx, D::Terminate, "t").await.unwrap();
        assert_eq!(
            std::fs::read_to_string(ws.join("note.txt")).unwrap(),
            "kept\n"
        );
        assert_eq!(processes_under(h.root.path()), vec![], "{step}");
    }
}

#[tokio::test]
async fn an_interrupted_restore_is_retried_into_exactly_one_sandbox() {
    for step in [
        "create_intent",
        "create_files",
        "create_leader",
        "create_state",
    ] {
        let mut h = Harness::start().await;
        let sbx = h.provision("p").await;
        h.sh(&sbx, "printf one > a.txt").await.unwrap();
        let receipt = h.release(&sbx, D::SnapshotAndTerminate, "s").await.unwrap();
        let checkpoint = receipt.checkpoint.unwrap();
        h.config.fault_injection = Some(format!("{step}=crash:times=1"));
        h.restart().await;
        assert!(h.restore(&checkpoint, "r").await.is_err(), "{step}");
        restart_clean(&mut h).await;
        assert_eq!(processes_under(h.root.path()), vec![], "{step}");
        let restored = h.restore(&checkpoint, "r").await.unwrap();
        let id = restored.r#ref.sandbox_id.clone();
        assert_eq!(sandbox_dirs(&h), vec![id.clone()], "{step}");
        let running = processes_under(h.root.path());
        assert_eq!(running.len(), 1, "{step}: {running:?}");
        assert_eq!(h.sh(&restored, "cat a.txt").await.unwrap().stdout, "one");
        let ids: Vec<_> = listed(&h).await.into_iter().map(|(i, _)| i).collect();
        assert_eq!(
            ids.len(),
            2,
            "{step}: the snapshotted sandbox and one restore"
        );
        assert!(ids.contains(&id), "{step}");
    }
}
