use super::*;
use crate::domain::job::{ExecutionAffinity, JobState, PauseBehavior};
use crate::domain::sandbox::CheckpointRef;
use crate::domain::sandbox::{ResolvedSandboxSpec, WorkspaceMode};
use crate::domain::JobId;
use chrono::Utc;

fn record(state: ResourceState, mode: WorkspaceMode) -> ExecutionResourceRecord {
    ExecutionResourceRecord {
        generation: 1,
        state,
        ..ExecutionResourceRecord::provisioning(
            RunId::new(),
            ResolvedSandboxSpec::example("local", mode),
            format!("sha256:{}", "3".repeat(64)),
            Utc::now(),
        )
    }
}

fn checkpoint() -> CheckpointRef {
    CheckpointRef {
        checkpoint_id: "c1".into(),
        provider_id: "local".into(),
        sandbox_id: "s1".into(),
        generation: 1,
        size_bytes: 10,
        digest: None,
        created_at: Utc::now(),
    }
}

fn plan_for(
    run_state: RunState,
    record: &ExecutionResourceRecord,
    jobs: &[Job],
    reason: Option<SuspensionReason>,
) -> Action {
    plan(&PlanInput {
        run_state,
        record,
        jobs,
        descendants: &[],
        suspension_reason: reason,
    })
}

fn running_job(pause: PauseBehavior) -> Job {
    let now = Utc::now();
    Job {
        id: JobId::new(),
        run_id: RunId::new(),
        kind: "tool".into(),
        payload: serde_json::json!({}),
        pause_behavior: pause,
        execution_affinity: ExecutionAffinity::Sandbox,
        state: JobState::Running,
        created_at: now,
        updated_at: now,
    }
}

#[test]
fn provisioning_binds_unless_the_run_ended_before_any_attempt() {
    let mut r = record(ResourceState::Provisioning, WorkspaceMode::Isolated);
    assert_eq!(
        plan_for(RunState::Queued, &r, &[], None),
        Action::Provision {
            fresh_after_release: false
        }
    );
    assert_eq!(
        plan_for(RunState::Cancelled, &r, &[], None),
        Action::Abandon
    );
    r.bind_idempotency_key = Some("k".into());
    // An attempt may have created compute: finish it, then terminate.
    assert_eq!(
        plan_for(RunState::Cancelled, &r, &[], None),
        Action::Provision {
            fresh_after_release: false
        }
    );
}

#[test]
fn a_suspension_releases_by_reason_or_blocks() {
    let r = record(ResourceState::Active, WorkspaceMode::Isolated);
    assert_eq!(
        plan_for(
            RunState::Suspended,
            &r,
            &[],
            Some(SuspensionReason::ApprovalRequired)
        ),
        Action::Release {
            disposition: ReleaseDisposition::SnapshotAndTerminate,
            purpose: ReleasePurpose::Suspend
        }
    );
    let active = record(ResourceState::Active, WorkspaceMode::ActiveWorkspace);
    assert_eq!(
        plan_for(
            RunState::Suspended,
            &active,
            &[],
            Some(SuspensionReason::InputRequired)
        ),
        Action::Release {
            disposition: ReleaseDisposition::Terminate,
            purpose: ReleasePurpose::Suspend
        }
    );
    match plan_for(
        RunState::Suspended,
        &r,
        &[],
        Some(SuspensionReason::PolicyHold),
    ) {
        Action::Block {
            disposition,
            blockers,
        } => {
            assert_eq!(disposition, ReleaseDisposition::Detach);
            assert!(blockers.detach);
        }
        other => panic!("policy hold must keep compute, got {other:?}"),
    }
    let job = running_job(PauseBehavior::Continue);
    match plan_for(
        RunState::Suspended,
        &r,
        std::slice::from_ref(&job),
        Some(SuspensionReason::ApprovalRequired),
    ) {
        Action::Block { blockers, .. } => assert_eq!(blockers.job_ids, vec![job.id.clone()]),
        other => panic!("a running sandbox job must block, got {other:?}"),
    }
    assert!(matches!(
        plan_for(
            RunState::Suspended,
            &r,
            &[running_job(PauseBehavior::Cancel)],
            Some(SuspensionReason::ApprovalRequired)
        ),
        Action::Release { .. }
    ));
}

#[test]
fn a_blocked_record_is_re_evaluated_and_children_hold_the_parent() {
    let r = record(ResourceState::ReleaseBlocked, WorkspaceMode::Isolated);
    let child = RunId::new();
    let held = plan(&PlanInput {
        run_state: RunState::Suspended,
        record: &r,
        jobs: &[],
        descendants: &[(child.clone(), ResourceState::ReleaseFailed)],
        suspension_reason: Some(SuspensionReason::ApprovalRequired),
    });
    assert!(
        matches!(held, Action::Block { ref blockers, .. } if blockers.child_run_ids == vec![child.clone()])
    );
    let freed = plan(&PlanInput {
        run_state: RunState::Suspended,
        record: &r,
        jobs: &[],
        descendants: &[(child, ResourceState::Released)],
        suspension_reason: Some(SuspensionReason::ApprovalRequired),
    });
    assert!(matches!(
        freed,
        Action::Release {
            purpose: ReleasePurpose::Suspend,
            ..
        }
    ));
}

#[test]
fn an_ended_run_never_keeps_compute() {
    for state in [ResourceState::Active, ResourceState::ReleaseBlocked] {
        let r = record(state, WorkspaceMode::Isolated);
        for run_state in [RunState::Completed, RunState::Failed, RunState::Cancelled] {
            assert_eq!(
                plan_for(run_state, &r, &[], Some(SuspensionReason::PolicyHold)),
                Action::Release {
                    disposition: ReleaseDisposition::Terminate,
                    purpose: ReleasePurpose::RunEnded
                }
            );
        }
    }
    assert_eq!(
        plan_for(
            RunState::Completed,
            &record(ResourceState::Released, WorkspaceMode::Isolated),
            &[],
            None
        ),
        Action::Idle
    );
}

#[test]
fn pending_releases_continue_with_their_own_disposition() {
    let mut r = record(ResourceState::ReleaseFailed, WorkspaceMode::Isolated);
    r.disposition = Some(ReleaseDisposition::SnapshotAndTerminate);
    r.release_purpose = Some(ReleasePurpose::Suspend);
    let want = Action::Release {
        disposition: ReleaseDisposition::SnapshotAndTerminate,
        purpose: ReleasePurpose::Suspend,
    };
    assert_eq!(plan_for(RunState::Suspended, &r, &[], None), want);
    // A resume settles a release whose outcome is unknown before restoring...
    r.error = Some(crate::domain::sandbox::ProviderError {
        code: "provider.timeout".into(),
        category: crate::domain::sandbox::ProviderError::UNCERTAIN.into(),
        message: "timed out".into(),
        retryable: true,
    });
    assert_eq!(plan_for(RunState::Resuming, &r, &[], None), want);
    // ...and keeps a sandbox the provider answered for.
    r.error = Some(crate::domain::sandbox::ProviderError {
        code: "sandbox.snapshot_failed".into(),
        category: "internal".into(),
        message: "the snapshot failed; the sandbox runs again".into(),
        retryable: true,
    });
    assert_eq!(
        plan_for(RunState::Resuming, &r, &[], None),
        Action::AbandonRelease
    );
    let forced = ExecutionResourceRecord {
        release_purpose: Some(ReleasePurpose::ForcedTerminate),
        disposition: Some(ReleaseDisposition::Terminate),
        ..r.clone()
    };
    assert!(
        matches!(
            plan_for(RunState::Resuming, &forced, &[], None),
            Action::Release { .. }
        ),
        "a broken sandbox is never kept"
    );
    let now = Utc::now();
    assert_eq!(due_at(&r, &Action::AbandonRelease, now), Some(now));
    let later = now + chrono::Duration::seconds(2);
    r.next_retry_at = Some(later);
    assert_eq!(
        due_at(&r, &Action::AbandonRelease, now),
        Some(later),
        "dropping a release asks the provider first: a failed ask waits its backoff"
    );
    // A release the provider still works on is not dropped: it is finished first.
    r.error = Some(crate::domain::sandbox::ProviderError {
        code: crate::providers::codes::OPERATION_IN_PROGRESS.into(),
        category: "in_progress".into(),
        message: "still archiving".into(),
        retryable: true,
    });
    assert_eq!(plan_for(RunState::Resuming, &r, &[], None), want);
}

#[test]
fn a_forced_terminate_that_lost_the_snapshot_fails_a_resume_at_once() {
    for state in [
        ResourceState::ReleaseRequested,
        ResourceState::ReleaseFailed,
        ResourceState::NeedsAttention,
    ] {
        let mut r = record(state, WorkspaceMode::Isolated);
        r.disposition = Some(ReleaseDisposition::Terminate);
        r.release_purpose = Some(ReleasePurpose::ForcedTerminate);
        r.checkpoint_lost = true;
        assert_eq!(
            plan_for(RunState::Resuming, &r, &[], None),
            Action::FailSnapshotLost,
            "{state}: the human does not wait for the terminate"
        );
        let terminate = Action::Release {
            disposition: ReleaseDisposition::Terminate,
            purpose: ReleasePurpose::ForcedTerminate,
        };
        assert_eq!(
            plan_for(RunState::Failed, &r, &[], None),
            terminate,
            "{state}: the terminate goes on as the end of the run"
        );
        r.checkpoint_lost = false;
        assert_eq!(
            plan_for(RunState::Resuming, &r, &[], None),
            terminate,
            "{state}: without a lost snapshot the terminate is finished first"
        );
    }
}

#[test]
fn a_run_that_ends_mid_release_is_terminated_whatever_was_asked() {
    let end = Action::Release {
        disposition: ReleaseDisposition::Terminate,
        purpose: ReleasePurpose::RunEnded,
    };
    for state in [
        ResourceState::ReleaseRequested,
        ResourceState::ReleaseFailed,
    ] {
        for asked in [
            ReleaseDisposition::SnapshotAndTerminate,
            ReleaseDisposition::Detach,
        ] {
            let mut r = record(state, WorkspaceMode::Isolated);
            r.disposition = Some(asked);
            r.release_purpose = Some(ReleasePurpose::Suspend);
            for ended in [RunState::Cancelled, RunState::Failed, RunState::Completed] {
                assert_eq!(plan_for(ended, &r, &[], None), end, "{state:?} {asked:?}");
            }
        }
        // A terminate under way (forced, or asked for) simply goes on.
        let mut forced = record(state, WorkspaceMode::Isolated);
        forced.disposition = Some(ReleaseDisposition::Terminate);
        forced.release_purpose = Some(ReleasePurpose::ForcedTerminate);
        assert_eq!(
            plan_for(RunState::Cancelled, &forced, &[], None),
            Action::Release {
                disposition: ReleaseDisposition::Terminate,
                purpose: ReleasePurpose::ForcedTerminate,
            }
        );
    }
}

#[test]
fn resume_attaches_restores_reprovisions_or_fails() {
    let blocked = record(ResourceState::ReleaseBlocked, WorkspaceMode::Isolated);
    assert_eq!(
        plan_for(RunState::Resuming, &blocked, &[], None),
        Action::Attach
    );
    let mut released = record(ResourceState::Released, WorkspaceMode::Isolated);
    released.disposition = Some(ReleaseDisposition::SnapshotAndTerminate);
    released.sandbox_checkpoint = Some(checkpoint());
    assert_eq!(
        plan_for(RunState::Resuming, &released, &[], None),
        Action::Restore
    );
    released.checkpoint_lost = true;
    assert_eq!(
        plan_for(RunState::Resuming, &released, &[], None),
        Action::FailSnapshotLost
    );
    let mut terminated = record(ResourceState::Released, WorkspaceMode::ActiveWorkspace);
    terminated.disposition = Some(ReleaseDisposition::Terminate);
    assert_eq!(
        plan_for(RunState::Resuming, &terminated, &[], None),
        Action::Provision {
            fresh_after_release: true
        }
    );
    assert_eq!(
        plan_for(RunState::Suspended, &terminated, &[], None),
        Action::Idle
    );
}

#[test]
fn restores_under_way_continue_or_are_abandoned() {
    let mut r = record(ResourceState::RestoreRequested, WorkspaceMode::Isolated);
    r.sandbox_checkpoint = Some(checkpoint());
    assert_eq!(
        plan_for(RunState::Cancelled, &r, &[], None),
        Action::Abandon
    );
    r.bind_idempotency_key = Some("k".into());
    assert_eq!(
        plan_for(RunState::Cancelled, &r, &[], None),
        Action::Restore
    );
    assert_eq!(plan_for(RunState::Resuming, &r, &[], None), Action::Restore);
    let fresh = record(
        ResourceState::RestoreRequested,
        WorkspaceMode::ActiveWorkspace,
    );
    assert_eq!(
        plan_for(RunState::Resuming, &fresh, &[], None),
        Action::Provision {
            fresh_after_release: true
        }
    );
}

#[test]
fn due_at_follows_the_plan_and_waits_for_a_pending_retry() {
    let now = Utc::now();
    let due = |r: &ExecutionResourceRecord, run: RunState| {
        due_at(
            r,
            &plan_for(run, r, &[], Some(SuspensionReason::ApprovalRequired)),
            now,
        )
    };
    let active = record(ResourceState::Active, WorkspaceMode::Isolated);
    assert_eq!(due(&active, RunState::Running), None, "idle");
    assert_eq!(
        due(&active, RunState::Suspended),
        Some(now),
        "a release to start"
    );
    assert_eq!(
        due(&active, RunState::Resuming),
        None,
        "bound: the runtime's turn"
    );
    let mut attaching = active.clone();
    attaching.bind_idempotency_key = Some("k".into());
    assert_eq!(
        due(&attaching, RunState::Resuming),
        Some(now),
        "an attach under way"
    );
    let mut failed = record(ResourceState::ReleaseFailed, WorkspaceMode::Isolated);
    failed.disposition = Some(ReleaseDisposition::SnapshotAndTerminate);
    failed.next_retry_at = Some(now + chrono::Duration::seconds(4));
    assert_eq!(due(&failed, RunState::Suspended), failed.next_retry_at);
    failed.next_retry_at = Some(now - chrono::Duration::seconds(1));
    assert_eq!(
        due(&failed, RunState::Suspended),
        Some(now),
        "a retry whose time came"
    );
    let mut blocked = record(ResourceState::ReleaseBlocked, WorkspaceMode::Isolated);
    blocked.disposition = Some(ReleaseDisposition::Detach);
    let detach = plan_for(
        RunState::Suspended,
        &blocked,
        &[],
        Some(SuspensionReason::PolicyHold),
    );
    assert!(matches!(detach, Action::Block { .. }));
    assert_eq!(
        due_at(&blocked, &detach, now),
        None,
        "blocked: woken by events"
    );
}
