use serde_json::json;

use super::*;
use crate::domain::decide::fixtures::{hash, now, run};
use crate::domain::{CheckpointId, RunId};

fn conflict(code: &'static str, message: &str) -> Refusal {
    Refusal::conflict(code, message)
}

#[test]
fn a_run_not_yet_ended_is_cancelled() {
    for &state in RunState::ALL {
        let decided = cancel(&run(state));
        if state.is_terminal() {
            let message = format!("the run is already {state}");
            assert_eq!(decided, Err(conflict("run.terminal", &message)));
        } else {
            assert_eq!(decided, Ok(RunState::Cancelled));
        }
    }
}

#[test]
fn only_a_suspended_run_resumes_explicitly() {
    assert_eq!(resume(&run(RunState::Suspended)), Ok(RunState::Resuming));
    assert_eq!(
        resume(&run(RunState::SuspendRequested)),
        Ok(RunState::Resuming)
    );
    assert_eq!(
        resume(&run(RunState::Running)),
        Err(conflict(
            "run.not_suspended",
            "only a suspended run can be resumed; this run is running"
        ))
    );
}

#[test]
fn a_run_waiting_for_a_pending_interaction_is_resumed_by_a_reply() {
    assert_eq!(resume_waiting_for(None), Ok(()));
    let id = InteractionId::new();
    let message = format!("the run waits for interaction {id}: reply to it instead");
    assert_eq!(
        resume_waiting_for(Some(&id)),
        Err(conflict("interaction.pending", &message))
    );
}

#[test]
fn expected_hashes_come_from_the_run_and_its_spec() {
    let plain = expected_hashes(&run(RunState::Resuming));
    assert_eq!(plain.resolved_spec_hash, hash('a'));
    assert_eq!((plain.spec_hash, plain.policy_hash), (None, None));
    let mut with_spec = run(RunState::Resuming);
    with_spec.sandbox_spec = Some(json!({"spec_hash": hash('s'), "policy_hash": hash('p')}));
    let expected = expected_hashes(&with_spec);
    assert_eq!(expected.spec_hash, Some(hash('s')));
    assert_eq!(expected.policy_hash, Some(hash('p')));
}

#[test]
fn only_a_resuming_run_is_confirmed() {
    assert_eq!(
        confirm_resumed(&run(RunState::Resuming)),
        Ok(RunState::Running)
    );
    let refused = confirm_resumed(&run(RunState::Suspended));
    assert!(matches!(refused, Err(Refusal::InvalidState(e)) if e.from == RunState::Suspended));
}

fn checkpoint(resolved_spec_hash: String) -> Checkpoint {
    Checkpoint {
        id: CheckpointId::new(),
        run_id: RunId::new(),
        sequence: 1,
        codec_version: "v1".into(),
        state: json!({}),
        resolved_spec_hash,
        created_at: now(),
    }
}

fn confirmation(resolved: char, spec: Option<char>, policy: Option<char>) -> ConfirmResumed {
    ConfirmResumed {
        fencing_token: 7,
        resolved_spec_hash: hash(resolved),
        spec_hash: spec.map(hash),
        policy_hash: policy.map(hash),
    }
}

fn stale(message: &str) -> Confirmation {
    let message = format!("the run was failed because its policy is stale: {message}");
    let error = json!({ "code": "sandbox.policy_stale", "message": message });
    Confirmation::PolicyStale { message, error }
}

#[test]
fn matching_hashes_resume_the_run() {
    let plain = run(RunState::Resuming);
    let ok = confirmation('a', None, None);
    assert_eq!(check_hashes(&plain, None, &ok), Confirmation::Resumed);
    let c = checkpoint(hash('a'));
    assert_eq!(check_hashes(&plain, Some(&c), &ok), Confirmation::Resumed);
    // Hashes the run's spec does not name are not checked.
    let extra = confirmation('a', Some('s'), Some('p'));
    assert_eq!(
        check_hashes(&plain, Some(&c), &extra),
        Confirmation::Resumed
    );
}

#[test]
fn every_mismatch_is_named_in_order() {
    let mut r = run(RunState::Resuming);
    r.sandbox_spec = Some(json!({"spec_hash": hash('s'), "policy_hash": hash('p')}));
    let c = checkpoint(hash('a'));
    assert_eq!(
        check_hashes(&r, Some(&c), &confirmation('a', Some('s'), Some('p'))),
        Confirmation::Resumed
    );
    assert_eq!(
        check_hashes(&r, Some(&c), &confirmation('b', None, Some('x'))),
        stale(
            "resolved_spec_hash differs from the run's; \
             resolved_spec_hash differs from the checkpoint's; \
             spec_hash is missing or differs from the sandbox spec's; \
             policy_hash is missing or differs from the sandbox spec's"
        )
    );
    let other = checkpoint(hash('c'));
    assert_eq!(
        check_hashes(&r, Some(&other), &confirmation('a', Some('s'), Some('p'))),
        stale("resolved_spec_hash differs from the checkpoint's")
    );
    assert_eq!(
        check_hashes(&r, None, &confirmation('a', Some('s'), None)),
        stale("policy_hash is missing or differs from the sandbox spec's")
    );
}
