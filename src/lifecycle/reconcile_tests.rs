use super::*;
use crate::domain::resource::ReleasePurpose;
use crate::domain::run::RunState;
use crate::domain::sandbox::{CheckpointRef, ResolvedSandboxSpec, SandboxRef, WorkspaceMode};
use crate::domain::RunId;
use crate::lifecycle::rules::{resume_plan, ResumePlan};
use crate::providers::wire::{InventoryLabels, SandboxState};

const TENANT: &str = "acme";

fn sandbox_ref(run: &RunId, id: &str) -> SandboxRef {
    SandboxRef {
        sandbox_id: id.into(),
        provider_id: "local".into(),
        provider_version: "1".into(),
        tenant_id: TENANT.into(),
        owner_run_id: run.to_string(),
        spec_hash: "h".into(),
        policy_hash: "p".into(),
    }
}

fn item(run: &RunId, id: &str, state: SandboxState, age_s: i64) -> InventoryItem {
    InventoryItem {
        r#ref: sandbox_ref(run, id).into(),
        state,
        generation: 1,
        labels: InventoryLabels {
            owner_run_id: run.to_string(),
            tenant_id: TENANT.into(),
        },
        created_at: Some(Utc::now() - Duration::seconds(age_s)),
    }
}

fn record(run: &RunId, state: ResourceState, sandbox: Option<&str>) -> ExecutionResourceRecord {
    let spec = ResolvedSandboxSpec::example("local", WorkspaceMode::Isolated);
    let mut r = ExecutionResourceRecord::provisioning(run.clone(), spec, "h".into(), Utc::now());
    r.state = state;
    r.generation = 1;
    r.sandbox_ref = sandbox.map(|id| sandbox_ref(run, id));
    r
}

fn view(state: RunState, record: Option<ExecutionResourceRecord>) -> RunView {
    RunView {
        state,
        tenant_id: TENANT.into(),
        updated_at: Utc::now() - Duration::hours(30),
        record,
    }
}

fn checkpoint(id: &str, age: Duration) -> CheckpointRef {
    CheckpointRef {
        checkpoint_id: id.into(),
        provider_id: "local".into(),
        sandbox_id: "sbx_1".into(),
        generation: 1,
        size_bytes: 10,
        digest: None,
        created_at: Utc::now() - age,
    }
}

fn ckpt_item(run: &RunId, id: &str, age: Duration) -> CheckpointItem {
    CheckpointItem {
        checkpoint: checkpoint(id, age).into(),
        labels: InventoryLabels {
            owner_run_id: run.to_string(),
            tenant_id: TENANT.into(),
        },
    }
}

#[test]
fn sandboxes_the_records_account_for_are_kept() {
    let run = RunId::new();
    let now = Utc::now();
    let min = Duration::seconds(120);
    let live = view(
        RunState::Running,
        Some(record(&run, ResourceState::Active, Some("sbx_1"))),
    );
    assert_eq!(
        judge(
            &item(&run, "sbx_1", SandboxState::Ready, 900),
            Some(&live),
            now,
            min
        ),
        Verdict::Keep
    );
    let gone = item(&run, "sbx_9", SandboxState::Terminated, 900);
    assert_eq!(
        judge(&gone, None, now, min),
        Verdict::Keep,
        "no compute, nothing to do"
    );
    // A sandbox being bound: the key is written before the provider is called.
    let mut binding = record(&run, ResourceState::RestoreRequested, Some("sbx_1"));
    binding.bind_idempotency_key = Some("k".into());
    let binding = view(RunState::Resuming, Some(binding));
    assert_eq!(
        judge(
            &item(&run, "sbx_2", SandboxState::Ready, 900),
            Some(&binding),
            now,
            min
        ),
        Verdict::Keep
    );
    // Too young to judge while its run exists.
    let other = view(
        RunState::Running,
        Some(record(&run, ResourceState::Active, Some("sbx_1"))),
    );
    assert_eq!(
        judge(
            &item(&run, "sbx_2", SandboxState::Ready, 5),
            Some(&other),
            now,
            min
        ),
        Verdict::Keep
    );
}

#[test]
fn sandboxes_no_record_owns_are_orphans() {
    let run = RunId::new();
    let now = Utc::now();
    let min = Duration::seconds(120);
    let sbx = item(&run, "sbx_1", SandboxState::Ready, 5);
    assert_eq!(
        judge(&sbx, None, now, min),
        Verdict::Orphan("no_run"),
        "no run: at any age"
    );
    let mut other = view(
        RunState::Running,
        Some(record(&run, ResourceState::Active, Some("sbx_1"))),
    );
    other.tenant_id = "globex".into();
    assert_eq!(
        judge(&sbx, Some(&other), now, min),
        Verdict::Orphan("other_tenant")
    );
    let bare = view(RunState::Running, None);
    assert_eq!(
        judge(&sbx, Some(&bare), now, min),
        Verdict::Orphan("no_record")
    );
    let moved = view(
        RunState::Running,
        Some(record(&run, ResourceState::Active, Some("sbx_2"))),
    );
    let old = item(&run, "sbx_1", SandboxState::Suspended, 900);
    assert_eq!(
        judge(&old, Some(&moved), now, min),
        Verdict::Orphan("not_bound")
    );
    // A run that ended binds nothing more: a sandbox it does not hold goes at any age, even
    // one provisioned under a bind key that was never recorded.
    let mut ended = record(&run, ResourceState::Released, Some("sbx_2"));
    ended.bind_idempotency_key = Some("k".into());
    let ended = view(RunState::Completed, Some(ended));
    assert_eq!(
        judge(&sbx, Some(&ended), now, min),
        Verdict::Orphan("run_ended")
    );
}

#[test]
fn a_released_record_whose_sandbox_still_runs_is_falsely_released() {
    let run = RunId::new();
    let now = Utc::now();
    let released = view(
        RunState::Completed,
        Some(record(&run, ResourceState::Released, Some("sbx_1"))),
    );
    assert_eq!(
        judge(
            &item(&run, "sbx_1", SandboxState::Ready, 900),
            Some(&released),
            now,
            Duration::seconds(120)
        ),
        Verdict::FalselyReleased
    );
}

#[test]
fn a_reopened_record_terminates_under_a_reconcile_key_and_keeps_its_checkpoint() {
    let run = RunId::new();
    let now = Utc::now();
    let mut r = record(&run, ResourceState::Released, Some("sbx_1"));
    r.disposition = Some(ReleaseDisposition::SnapshotAndTerminate);
    r.sandbox_checkpoint = Some(checkpoint("ck_1", Duration::minutes(5)));
    r.compute_released = true;
    let r = reopen(r, now).unwrap();
    assert_eq!(r.state, ResourceState::ReleaseRequested);
    assert_eq!(r.disposition, Some(ReleaseDisposition::Terminate));
    assert_eq!(r.release_purpose, Some(ReleasePurpose::Reconcile));
    assert!(r
        .release_idempotency_key
        .as_deref()
        .unwrap()
        .ends_with(":reconcile"));
    assert!(!r.compute_released);
    assert_eq!(r.due_at, Some(now));
    assert_eq!(
        r.sandbox_checkpoint
            .as_ref()
            .map(|c| c.checkpoint_id.as_str()),
        Some("ck_1")
    );
    // Once the terminate is confirmed, a resume still restores from that checkpoint.
    let plan = resume_plan(ResourceState::Released, r.disposition, true, false, false);
    assert_eq!(plan, ResumePlan::Restore);
    assert!(reopen(record(&run, ResourceState::Active, Some("sbx_1")), now).is_err());
}

#[test]
fn checkpoints_are_kept_while_something_can_restore_from_them() {
    let run = RunId::new();
    let now = Utc::now();
    let grace = Duration::hours(24);
    let mut rec = record(&run, ResourceState::Released, Some("sbx_1"));
    rec.sandbox_checkpoint = Some(checkpoint("ck_latest", Duration::hours(48)));
    let live = view(RunState::Suspended, Some(rec));
    assert!(!checkpoint_expired(
        &ckpt_item(&run, "ck_latest", Duration::hours(48)),
        Some(&live),
        now,
        grace
    ));
    assert!(checkpoint_expired(
        &ckpt_item(&run, "ck_old", Duration::hours(48)),
        Some(&live),
        now,
        grace
    ));
    assert!(!checkpoint_expired(
        &ckpt_item(&run, "ck_new", Duration::hours(1)),
        Some(&live),
        now,
        grace
    ));

    let mut ended = view(RunState::Completed, None);
    ended.updated_at = now - Duration::hours(1);
    let young_end = ckpt_item(&run, "ck_1", Duration::hours(72));
    assert!(
        !checkpoint_expired(&young_end, Some(&ended), now, grace),
        "grace runs from the end"
    );
    ended.updated_at = now - Duration::hours(25);
    assert!(checkpoint_expired(&young_end, Some(&ended), now, grace));

    assert!(!checkpoint_expired(
        &ckpt_item(&run, "ck_x", Duration::hours(2)),
        None,
        now,
        grace
    ));
    assert!(checkpoint_expired(
        &ckpt_item(&run, "ck_x", Duration::hours(25)),
        None,
        now,
        grace
    ));
}

#[test]
fn a_checkpoint_is_kept_while_its_runs_release_is_under_way() {
    let run = RunId::new();
    let now = Utc::now();
    let grace = Duration::hours(24);
    // An attempt whose answer was lost took `ck_lost`; the record still names the older one.
    let untaken = ckpt_item(&run, "ck_lost", Duration::hours(48));
    for state in [
        ResourceState::ReleaseRequested,
        ResourceState::ReleaseFailed,
        ResourceState::NeedsAttention,
    ] {
        let mut rec = record(&run, state, Some("sbx_1"));
        rec.sandbox_checkpoint = Some(checkpoint("ck_before", Duration::hours(72)));
        let live = view(RunState::Suspended, Some(rec.clone()));
        assert!(
            !checkpoint_expired(&untaken, Some(&live), now, grace),
            "{state}: a retry may name it"
        );
        let mut ended = view(RunState::Completed, Some(rec));
        ended.updated_at = now - Duration::hours(100);
        assert!(
            !checkpoint_expired(&untaken, Some(&ended), now, grace),
            "{state}"
        );
    }
    for state in [ResourceState::Released, ResourceState::Active] {
        let live = view(
            RunState::Suspended,
            Some(record(&run, state, Some("sbx_1"))),
        );
        assert!(
            checkpoint_expired(&untaken, Some(&live), now, grace),
            "{state}: settled, nothing names it"
        );
    }
}
