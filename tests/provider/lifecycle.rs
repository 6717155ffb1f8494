//! Exec, snapshot, restore, terminate, detach and active workspaces against the real local
//! provider; idempotency across a provider restart.

use super::*;
use sagents::providers::grant;
use sagents::providers::wire::SandboxState;
use sagents::providers::wire_spec::ReleaseDisposition as D;

#[tokio::test]
async fn snapshot_then_restore_brings_the_files_back_in_a_new_generation() {
    let h = Harness::start().await;
    let sbx = h.provision("p1").await;
    assert_eq!(sbx.state, SandboxState::Ready);
    assert_eq!(sbx.generation, 1);
    let out = h
        .sh(
            &sbx,
            "mkdir -p sub && printf one > a.txt && printf two > sub/b.txt && echo done",
        )
        .await
        .unwrap();
    assert_eq!((out.exit_code, out.stdout.as_str()), (Some(0), "done\n"));

    let receipt = h
        .release(&sbx, D::SnapshotAndTerminate, "rel-1")
        .await
        .unwrap();
    assert!(receipt.compute_released);
    assert_eq!(receipt.state, SandboxState::Terminated);
    assert!(!receipt.duplicate);
    let checkpoint = receipt
        .checkpoint
        .clone()
        .expect("a snapshot has a checkpoint");
    assert!(checkpoint.size_bytes > 0);
    let info = h
        .client
        .inspect(&sbx.r#ref.sandbox_id, &Default::default())
        .await
        .unwrap();
    assert_eq!(info.state, SandboxState::Terminated);

    let restored = h.restore(&checkpoint, "restore-1").await.unwrap();
    assert_eq!(restored.state, SandboxState::Ready);
    assert_ne!(restored.r#ref.sandbox_id, sbx.r#ref.sandbox_id);
    assert_eq!(restored.generation, 2);
    assert_eq!(restored.r#ref.tenant_id, "acme");
    let out = h.sh(&restored, "cat a.txt sub/b.txt").await.unwrap();
    assert_eq!(out.stdout, "onetwo");

    // The terminated sandbox's grant is refused; it does not open the new sandbox either.
    let old = sbx.grant.as_ref().unwrap().token.clone();
    assert_eq!(
        refused(h.exec(&sbx, &old, exec_req("true")).await),
        (403, "grant.refused".into())
    );
    assert_eq!(
        refused(h.exec(&restored, &old, exec_req("true")).await),
        (403, "grant.invalid".into())
    );
}

#[tokio::test]
async fn terminate_kills_everything_the_sandbox_started() {
    let h = Harness::start().await;
    let sbx = h.provision("p1").await;
    let out = h
        .sh(&sbx, "sleep 1000 >/dev/null 2>&1 & echo $!")
        .await
        .unwrap();
    let pid = host_pid(&sbx, out.stdout.trim().parse().unwrap());
    assert!(proc_state(pid).is_some(), "the background process runs");
    let receipt = h.release(&sbx, D::Terminate, "t1").await.unwrap();
    assert!(receipt.compute_released && receipt.checkpoint.is_none());
    assert_eq!(
        proc_state(pid),
        None,
        "terminate killed the background process"
    );
    assert!(!h
        .root
        .path()
        .join("sandboxes")
        .join(&sbx.r#ref.sandbox_id)
        .exists());
    // Terminating again with a new key is a truthful no-op; detaching is impossible.
    let again = h.release(&sbx, D::Terminate, "t2").await.unwrap();
    assert!(again.compute_released && !again.duplicate);
    assert_eq!(
        refused(h.release(&sbx, D::Detach, "d1").await),
        (409, "sandbox.terminated".into())
    );
}

#[tokio::test]
async fn detach_leaves_the_sandbox_running_and_reattachable() {
    let h = Harness::start().await;
    let sbx = h.provision("p1").await;
    let attached = h
        .client
        .attach(
            &sbx.r#ref.sandbox_id,
            &Default::default(),
            &Default::default(),
        )
        .await
        .unwrap();
    assert!(attached.revision > sbx.revision);
    let out = h
        .sh(&sbx, "sleep 1000 >/dev/null 2>&1 & echo $!")
        .await
        .unwrap();
    let pid = host_pid(&sbx, out.stdout.trim().parse().unwrap());
    let receipt = h.release(&sbx, D::Detach, "d1").await.unwrap();
    assert!(!receipt.compute_released);
    assert_eq!(receipt.state, SandboxState::Ready);
    assert!(receipt.checkpoint.is_none());
    assert!(
        running(pid),
        "detach does not stop or kill anything: {:?}",
        proc_state(pid)
    );
    let info = h
        .client
        .inspect(&sbx.r#ref.sandbox_id, &Default::default())
        .await
        .unwrap();
    assert_eq!(
        (info.state, info.attached_clients),
        (SandboxState::Ready, 0)
    );
    assert_eq!(h.sh(&sbx, "echo still").await.unwrap().stdout, "still\n");
    h.release(&sbx, D::Terminate, "t1").await.unwrap();
}

#[tokio::test]
async fn an_active_workspace_keeps_its_files_for_a_fresh_provision() {
    let h = Harness::start().await;
    let active = spec(WorkspaceMode::ActiveWorkspace, Some("proj"));
    let sbx = h.provision_spec("a1", active.clone()).await.unwrap();
    h.sh(&sbx, "printf kept > notes.md").await.unwrap();
    assert_eq!(
        refused(h.provision_spec("a2", active.clone()).await),
        (409, "sandbox.workspace_in_use".into())
    );
    assert_eq!(
        refused(h.release(&sbx, D::SnapshotAndTerminate, "s1").await),
        (422, "release.disposition_unsupported".into())
    );
    let receipt = h.release(&sbx, D::Terminate, "t1").await.unwrap();
    assert!(receipt.compute_released);
    let host_file = h.root.path().join("workspaces/acme/proj/notes.md");
    assert_eq!(std::fs::read_to_string(&host_file).unwrap(), "kept");
    let again = h.provision_spec("a3", active).await.unwrap();
    assert_eq!(h.sh(&again, "cat notes.md").await.unwrap().stdout, "kept");
}

#[tokio::test]
async fn an_active_workspace_outside_the_workspace_root_is_refused() {
    let h = Harness::start().await;
    // Another tenant's folder, by absolute path or through a symlink, is outside too.
    let ws = h.root.path().join("workspaces");
    std::fs::create_dir_all(ws.join("other/theirs")).unwrap();
    std::fs::create_dir_all(ws.join("acme")).unwrap();
    std::os::unix::fs::symlink(ws.join("other"), ws.join("acme/hop")).unwrap();
    let theirs = ws.join("other/theirs").canonicalize().unwrap();
    let theirs = theirs.to_str().unwrap();
    for host in [
        "/etc",
        "../escape",
        "/tmp",
        "../other/theirs",
        theirs,
        "hop/theirs",
        "hop/new",
    ] {
        let r = h
            .provision_spec(host, spec(WorkspaceMode::ActiveWorkspace, Some(host)))
            .await;
        assert_eq!(
            refused(r),
            (422, "sandbox.workspace_outside_root".into()),
            "{host}"
        );
    }
    let mut v2 = spec(WorkspaceMode::Isolated, None);
    v2.spec_version = "sagents.sandbox-spec/v2".into();
    assert_eq!(
        refused(h.provision_spec("v2", v2).await),
        (422, "sandbox.spec_unsupported".into())
    );
}

#[tokio::test]
async fn releases_provisions_and_restores_are_idempotent_across_a_restart() {
    let mut h = Harness::start().await;
    let sbx = h.provision("p1").await;
    h.sh(&sbx, "printf x > f").await.unwrap();
    let first = h
        .release(&sbx, D::SnapshotAndTerminate, "rel")
        .await
        .unwrap();
    let checkpoint = first.checkpoint.clone().unwrap();
    let restored = h.restore(&checkpoint, "res").await.unwrap();

    h.restart().await;

    let again = h
        .release(&sbx, D::SnapshotAndTerminate, "rel")
        .await
        .unwrap();
    assert!(again.duplicate);
    assert_eq!(again.checkpoint, first.checkpoint);
    assert_eq!(again.released_at, first.released_at);
    assert_eq!(again.compute_released, first.compute_released);
    let replay = h.provision("p1").await;
    assert_eq!(replay.r#ref, sbx.r#ref);
    let replay = h.restore(&checkpoint, "res").await.unwrap();
    assert_eq!(replay.r#ref, restored.r#ref);
    // Same key, different request: refused, nothing done.
    assert_eq!(
        refused(h.release(&sbx, D::Terminate, "rel").await),
        (409, "idempotency.key_reused".into())
    );
    let other = spec(WorkspaceMode::ActiveWorkspace, Some("w"));
    assert_eq!(
        refused(h.provision_spec("p1", other).await),
        (409, "idempotency.key_reused".into())
    );
    // The restored sandbox survived the restart and still holds the files.
    let info = h
        .client
        .inspect(&restored.r#ref.sandbox_id, &Default::default())
        .await
        .unwrap();
    assert_eq!(info.state, SandboxState::Ready);
    assert_eq!(h.sh(&replay, "cat f").await.unwrap().stdout, "x");
}

#[tokio::test]
async fn a_restart_reports_sandboxes_whose_processes_vanished_as_lost() {
    let mut h = Harness::start().await;
    let gone = h.provision("p1").await;
    let alive = h.provision("p2").await;
    h.provider.take().unwrap().stop().await;
    let state_file = h
        .root
        .path()
        .join(format!("state/sandboxes/{}.json", gone.r#ref.sandbox_id));
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state_file).unwrap()).unwrap();
    let pid = rec["leader"]["pid"].as_i64().unwrap() as i32;
    // SAFETY: kill takes plain integers and touches no memory of ours.
    assert_eq!(unsafe { libc::kill(-pid, libc::SIGKILL) }, 0);
    for _ in 0..1000 {
        if proc_state(pid).is_none() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    h.restart().await;
    let info = h
        .client
        .inspect(&gone.r#ref.sandbox_id, &Default::default())
        .await
        .unwrap();
    assert_eq!(info.state, SandboxState::Lost);
    let info = h
        .client
        .inspect(&alive.r#ref.sandbox_id, &Default::default())
        .await
        .unwrap();
    assert_eq!(info.state, SandboxState::Ready);
    assert_eq!(
        refused(
            h.client
                .attach(
                    &gone.r#ref.sandbox_id,
                    &Default::default(),
                    &Default::default()
                )
                .await
        ),
        (409, "sandbox.not_running".into())
    );
    let receipt = h.release(&gone, D::Terminate, "t").await.unwrap();
    assert!(receipt.compute_released);
    assert_eq!(receipt.state, SandboxState::Terminated);
}

#[tokio::test]
async fn grants_minted_with_the_shared_secret_are_checked() {
    let h = Harness::start().await;
    let sbx = h.provision("p1").await;
    let id = sbx.r#ref.sandbox_id.clone();
    let now = chrono::Utc::now();
    let minted = grant::mint(
        GRANT_SECRET.as_bytes(),
        "local",
        &id,
        1,
        now + chrono::Duration::minutes(5),
    );
    assert_eq!(
        h.exec(&sbx, &minted.token, exec_req("echo ok"))
            .await
            .unwrap()
            .stdout,
        "ok\n"
    );
    let cases = [
        grant::mint(
            b"wrong-secret",
            "local",
            &id,
            1,
            now + chrono::Duration::minutes(5),
        )
        .token,
        grant::mint(
            GRANT_SECRET.as_bytes(),
            "local",
            &id,
            2,
            now + chrono::Duration::minutes(5),
        )
        .token,
        grant::mint(
            GRANT_SECRET.as_bytes(),
            "local",
            &id,
            1,
            now - chrono::Duration::seconds(1),
        )
        .token,
        grant::mint(
            GRANT_SECRET.as_bytes(),
            "local",
            "sbx_other",
            1,
            now + chrono::Duration::minutes(5),
        )
        .token,
        "garbage".to_string(),
    ];
    for token in cases {
        assert_eq!(
            refused(h.exec(&sbx, &token, exec_req("echo no")).await),
            (403, "grant.invalid".into())
        );
    }
}

#[tokio::test]
async fn a_provider_token_is_required_when_configured() {
    let h = Harness::with(|c| c.token = Some("provider-token-0123456789abcdef0123".into())).await;
    assert!(h.client.capabilities(&Default::default()).await.is_ok());
    let anonymous = ProviderClient::new(&h.base_url(), None).unwrap();
    assert_eq!(
        refused(anonymous.capabilities(&Default::default()).await),
        (401, "auth.unauthorized".into())
    );
    let wrong = ProviderClient::new(&h.base_url(), Some("nope")).unwrap();
    assert_eq!(
        refused(wrong.inspect("sbx_x", &Default::default()).await).0,
        401
    );
}

#[tokio::test]
async fn bad_requests_get_provider_errors_that_name_the_problem() {
    let h = Harness::start().await;
    let http = reqwest::Client::new();
    let url = format!("{}/v3/sandboxes", h.base_url());
    let resp = http
        .post(&url)
        .body("{not json")
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["retryable"], false);
    let resp = http
        .post(&url)
        .json(&serde_json::json!({"spec": {}, "owner_run_id": "r", "tenant_id": "t", "idempotency_key": "k", "bogus": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 422);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["code"], "validation.failed");
    let resp = http
        .get(format!("{}/v3/sandboxes/sbx_missing", h.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let sbx = h.provision("p1").await;
    let mut mismatched = release_req(&sbx, D::Terminate, "k");
    mismatched.request.r#ref.sandbox_id = "sbx_other".into();
    let resp = http
        .post(format!(
            "{}/v3/sandboxes/{}/release",
            h.base_url(),
            sbx.r#ref.sandbox_id
        ))
        .json(&mismatched)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 422);
}
