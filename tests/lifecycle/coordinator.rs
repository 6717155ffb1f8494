//! The coordinator driven directly against the store and the real local provider.

use sagents::domain::claim::ClaimKind;
use sagents::domain::commands::{CompleteRun, ConfirmResumed};
use sagents::domain::interaction::SuspensionReason;
use sagents::domain::resource::ResourceState;
use sagents::domain::run::RunState;
use sagents::domain::sandbox::ReleaseDisposition;
use sagents::providers::client::CallOptions;
use sagents::providers::grant;
use sagents::providers::wire::SandboxState;
use sagents::store::Backend;

use super::*;
use crate::on_both_backends;
use crate::provider::{exec_req, proc_state, GRANT_SECRET};

on_both_backends!(
    an_isolated_run_is_released_on_suspend_and_restored_on_resume,
    a_release_finished_for_a_reply_goes_on_to_the_restore_in_the_same_work
);

/// Runs `script` in the claimed sandbox with a grant for its generation.
async fn sh(lx: &Lx, claim: &Claim, script: &str) -> String {
    let sandbox = claim.sandbox.as_ref().expect("a sandbox-backed claim");
    let sandbox_id = sandbox.r#ref.sandbox_id.as_str();
    let token = grant::mint(
        GRANT_SECRET.as_bytes(),
        "local",
        sandbox_id,
        sandbox.generation as u64,
        Utc::now() + Duration::minutes(5),
    )
    .token;
    let out = lx
        .provider
        .client
        .exec(
            sandbox_id,
            &token,
            &exec_req(script),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(0), "stderr: {}", out.stderr);
    out.stdout
}

fn sandbox_id(record: &ExecutionResourceRecord) -> String {
    record.sandbox_ref.as_ref().unwrap().sandbox_id.clone()
}

async fn an_isolated_run_is_released_on_suspend_and_restored_on_resume(backend: Backend) {
    let lx = lx(backend).await;
    let s = lx.session().await;
    let run = lx.isolated_run(&s).await;
    let record = lx.record(&run.id).await;
    assert_eq!(record.state, ResourceState::Provisioning);
    assert!(record.due_at.is_some());
    lx.claim_none().await;

    assert_eq!(lx.drain().await, 1);
    let record = lx.record(&run.id).await;
    assert_eq!(record.state, ResourceState::Active);
    assert_eq!(record.generation, 1);
    assert_eq!(record.due_at, None);
    let first = sandbox_id(&record);
    assert_eq!(lx.provider.sandbox_state(&first).await, SandboxState::Ready);

    let claim = lx.claim_one().await;
    assert_eq!(claim.kind, ClaimKind::Start);
    let sandbox = claim.sandbox.clone().unwrap();
    assert_eq!(sandbox.generation, 1);
    assert_eq!(sandbox.r#ref.sandbox_id, first.as_str());
    let nspid = sh(
        &lx,
        &claim,
        "printf kept > notes.txt && sleep 1000 >/dev/null 2>&1 & echo $!",
    )
    .await
    .trim()
    .parse()
    .unwrap();
    let pid = sagents_local_provider::process::host_pid(first.as_str(), nspid).unwrap();
    assert!(proc_state(pid).is_some());

    lx.suspend(&claim, SuspensionReason::ApprovalRequired, 1)
        .await;
    let before = lx.store().snapshot(Some(TENANT), &s.id).await.unwrap();
    assert_eq!(lx.drain().await, 1);
    let record = lx.record(&run.id).await;
    assert_eq!(record.state, ResourceState::Released);
    assert!(record.compute_released);
    assert_eq!(
        record.disposition,
        Some(ReleaseDisposition::SnapshotAndTerminate)
    );
    assert!(record.sandbox_checkpoint.is_some());
    assert!(record.released_at.is_some());
    assert_gone(pid, "no process outlives the release").await;
    assert_eq!(
        lx.provider.sandbox_state(&first).await,
        SandboxState::Terminated
    );
    let after = lx.store().snapshot(Some(TENANT), &s.id).await.unwrap();
    assert_eq!(
        serde_json::to_vec(&before).unwrap(),
        serde_json::to_vec(&after).unwrap(),
        "releasing compute changes nothing a user sees"
    );
    lx.claim_none().await;

    let pending = &after.pending_interactions[0];
    lx.store()
        .reply_interaction(Some(TENANT), &s.id, &pending.id, &super::approve(), "alice")
        .await
        .unwrap();
    let resuming = lx.store().snapshot(Some(TENANT), &s.id).await.unwrap();
    lx.claim_none().await;
    assert_eq!(lx.drain().await, 1);
    let record = lx.record(&run.id).await;
    assert_eq!(record.state, ResourceState::Active);
    assert_eq!(record.generation, 2);
    let second = sandbox_id(&record);
    assert_ne!(second, first);
    assert_eq!(
        serde_json::to_vec(&resuming).unwrap(),
        serde_json::to_vec(&lx.store().snapshot(Some(TENANT), &s.id).await.unwrap()).unwrap(),
        "restoring compute changes nothing a user sees"
    );

    let claim = lx.claim_one().await;
    assert_eq!(claim.kind, ClaimKind::Resume);
    assert_eq!(claim.sandbox.as_ref().unwrap().generation, 2);
    assert_eq!(sh(&lx, &claim, "cat notes.txt").await, "kept");
    let token = claim.lease.fencing_token;
    lx.store()
        .confirm_resumed(
            Some(TENANT),
            &run.id,
            &ConfirmResumed {
                fencing_token: token,
                resolved_spec_hash: hash('c'),
                spec_hash: Some(hash('a')),
                policy_hash: Some(hash('b')),
            },
        )
        .await
        .unwrap();
    let nspid = sh(&lx, &claim, "sleep 1000 >/dev/null 2>&1 & echo $!")
        .await
        .trim()
        .parse()
        .unwrap();
    let sandbox_id = &claim.sandbox.as_ref().unwrap().r#ref.sandbox_id;
    let pid = sagents_local_provider::process::host_pid(sandbox_id, nspid).unwrap();
    let done = lx
        .store()
        .complete_run(
            Some(TENANT),
            &run.id,
            &CompleteRun {
                fencing_token: token,
                output: json!({ "ok": true }),
            },
        )
        .await
        .unwrap();
    assert_eq!(done.state, RunState::Completed);
    assert_eq!(lx.drain().await, 1);
    let record = lx.record(&run.id).await;
    assert_eq!(record.state, ResourceState::Released);
    assert_eq!(record.disposition, Some(ReleaseDisposition::Terminate));
    assert_gone(pid, "no sandbox outlives its run").await;
    assert_eq!(
        lx.provider.sandbox_state(&second).await,
        SandboxState::Terminated
    );
    assert_eq!(lx.drain().await, 0);
}

async fn a_release_finished_for_a_reply_goes_on_to_the_restore_in_the_same_work(backend: Backend) {
    // The provider snapshots and terminates, then the answer is lost.
    let lx = lx_ticking(backend, "release=drop:times=1").await;
    let s = lx.session().await;
    let run = lx.awaiting_approval(&s).await;
    assert_eq!(lx.drain().await, 1);
    assert_eq!(lx.record(&run.id).await.state, ResourceState::ReleaseFailed);

    let snapshot = lx.store().snapshot(Some(TENANT), &s.id).await.unwrap();
    let pending = &snapshot.pending_interactions[0];
    lx.store()
        .reply_interaction(Some(TENANT), &s.id, &pending.id, &super::approve(), "alice")
        .await
        .unwrap();
    assert_eq!(lx.main.pool.run_once().await, 1);
    let record = lx.record(&run.id).await;
    assert_eq!(
        record.state,
        ResourceState::Active,
        "the release's retry and the restore in one claim: {record:?}"
    );
    assert_eq!(record.generation, 2);
}
