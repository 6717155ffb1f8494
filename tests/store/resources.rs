//! Execution-resource records: creation with the run, lifecycle claims under the per-run
//! lease, fenced compare-and-set writes, the hooks that make records due, the snapshot
//! invariant and the operator's metrics.

use chrono::{DateTime, Utc};
use sagents::domain::claim::Claim;
use sagents::domain::resource::ExecutionResourceRecord;
use sagents::domain::resource::ResourceState;
use sagents::domain::resource::{LifecycleWork, RunEffect};
use sagents::domain::run::Run;
use sagents::domain::sandbox::SandboxRef;
use sagents::domain::sandbox::{
    LifecyclePolicy, ResolvedSandboxSpec, Resources, WorkspaceMode, SPEC_VERSION_V3,
};
use sagents::domain::session::Session;
use sagents::domain::RunId;
use serde_json::json;

use super::{hash, run_cmd, suspend_cmd, ttl, Fx};

mod claims;
mod groups;
mod hooks;
mod metrics;
mod writes;

pub const PROVIDER: &str = "local";
pub const COORDINATOR: &str = "coordinator-1";

pub fn spec() -> ResolvedSandboxSpec {
    ResolvedSandboxSpec {
        spec_version: SPEC_VERSION_V3.into(),
        provider_id: PROVIDER.into(),
        spec_hash: hash('1'),
        policy_hash: hash('2'),
        workspace_mode: WorkspaceMode::Isolated,
        host_workspace: None,
        lifecycle: LifecyclePolicy::default(),
        resources: Resources::default(),
        metadata: json!({ "image": "python:3.12" }),
    }
}

pub async fn register(f: &Fx) {
    f.store
        .upsert_provider(
            PROVIDER,
            "http://127.0.0.1:9/",
            "provider-secret",
            &json!({ "api_version": "3", "capability": "execution.sandbox" }),
            "u",
        )
        .await
        .unwrap();
}

/// A run with a sandbox spec (its provider must be registered).
pub async fn sandbox_run(f: &Fx, s: &Session, parent: Option<RunId>) -> Run {
    let mut cmd = run_cmd(parent);
    cmd.sandbox_spec = Some(spec());
    f.store.create_run(&s.tenant_id, &s.id, &cmd).await.unwrap()
}

pub fn sandbox_ref(run: &RunId) -> SandboxRef {
    SandboxRef {
        sandbox_id: format!("sbx-{run}"),
        provider_id: PROVIDER.into(),
        provider_version: "1.0.0".into(),
        tenant_id: "acme".into(),
        owner_run_id: run.to_string(),
        spec_hash: hash('1'),
        policy_hash: hash('2'),
    }
}

/// Every due record's run, leased to the coordinator.
pub async fn due_work(f: &Fx) -> Vec<LifecycleWork> {
    f.store
        .claim_lifecycle_work(COORDINATOR, 100, ttl())
        .await
        .unwrap()
}

/// `n` new sandbox runs in `s`, claimed together: the lifecycle work of each, oldest first.
pub async fn due_sandbox_runs(f: &Fx, s: &Session, n: usize) -> Vec<LifecycleWork> {
    for _ in 0..n {
        sandbox_run(f, s, None).await;
    }
    let work = due_work(f).await;
    assert_eq!(work.len(), n, "every new run is due");
    work
}

/// The lifecycle work of `run`, which must be the only due record.
pub async fn work_for(f: &Fx, run: &RunId) -> LifecycleWork {
    let mut work = due_work(f).await;
    let ids: Vec<_> = work.iter().map(|w| w.run.id.clone()).collect();
    assert_eq!(ids, vec![run.clone()], "exactly this run is due");
    work.remove(0)
}

/// Writes `change` of the leased record under the lease, then hands the lease back.
pub async fn save_and_release(
    f: &Fx,
    work: &LifecycleWork,
    change: impl FnOnce(&mut ExecutionResourceRecord),
) -> ExecutionResourceRecord {
    let mut record = work.record.clone();
    change(&mut record);
    let saved = f
        .store
        .save_resource(
            &work.run.id,
            work.lease.fencing_token,
            &record,
            RunEffect::None,
        )
        .await
        .unwrap();
    f.store
        .release_lease(&work.run.id, &work.lease)
        .await
        .unwrap();
    saved
}

/// A bound, ready sandbox with nothing left to do (the provider counts its own generations).
pub fn activate(r: &mut ExecutionResourceRecord) {
    r.state = ResourceState::Active;
    r.generation += 1;
    r.provider_generation = Some(7);
    r.sandbox_ref = Some(sandbox_ref(&r.run_id));
    r.bind_idempotency_key = None;
    r.retry_count = 0;
    r.next_retry_at = None;
    r.error = None;
    r.due_at = None;
}

/// Nothing to do until something changes.
pub fn settle(r: &mut ExecutionResourceRecord) {
    r.due_at = None;
}

/// Released compute (the receipt was consistent), nothing to do.
pub fn release(r: &mut ExecutionResourceRecord, now: DateTime<Utc>) {
    r.state = ResourceState::Released;
    r.compute_released = true;
    r.release_requested_at = Some(now);
    r.released_at = Some(now);
    r.due_at = None;
}

/// A sandbox-backed run whose compute is ready, claimed by a runtime.
pub async fn running(f: &Fx, s: &Session) -> (Run, Claim) {
    let run = sandbox_run(f, s, None).await;
    let work = work_for(f, &run.id).await;
    save_and_release(f, &work, activate).await;
    let claim = f.claim_one(&s.tenant_id).await;
    assert_eq!(claim.run.id, run.id);
    (run, claim)
}

/// A run as `running` makes it, then suspended (with a pending approval if `interaction`).
pub async fn suspended_sandbox(f: &Fx, s: &Session, interaction: bool) -> (Run, Claim) {
    let (run, claim) = running(f, s).await;
    let cmd = suspend_cmd(claim.lease.fencing_token, 1, interaction);
    f.store.suspend_run(None, &run.id, &cmd).await.unwrap();
    (run, claim)
}

/// Leases the record of `run` (the only one due) and settles it.
pub async fn settle_due(f: &Fx, run: &RunId) -> ExecutionResourceRecord {
    let work = work_for(f, run).await;
    save_and_release(f, &work, settle).await
}
