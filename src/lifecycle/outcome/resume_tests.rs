//! A resuming run's retries: the resume cadence, an operation still in progress, a sandbox
//! that could not be inspected, and a bind that needs an operator.

use super::*;
use crate::lifecycle::attention::{
    self, AttentionPolicy, BIND_IN_PROGRESS_ATTENTION_AFTER, BIND_NEEDS_ATTENTION,
    IN_PROGRESS_ATTENTION_AFTER,
};
use crate::lifecycle::rules::{Cadence, RESUME_BACKOFF_CAP};

fn in_progress_call(secs: u64) -> ProviderCallError {
    ProviderCallError::InProgress {
        operation: "release".into(),
        retry_after: std::time::Duration::from_secs(secs),
    }
}

#[test]
fn a_resuming_release_retries_on_the_resume_cadence_whatever_it_counted_before() {
    let (mut r, _, t) = releasing(ReleaseDisposition::SnapshotAndTerminate);
    r = release_failed(r, &recoverable(), t, 0.0, Cadence::Release).unwrap();
    r.retry_count = 9;
    let since = t + Duration::seconds(100);
    let resume = Cadence::Resume { since };
    let failed = release_failed(r.clone(), &recoverable(), since, 0.0, resume).unwrap();
    assert_eq!(failed.retry_count, 10, "an attempt is an attempt");
    assert_eq!(
        failed.next_retry_at,
        Some(since + Duration::milliseconds(250)),
        "not the 256 s the tenth attempt would wait"
    );
    let later = since + Duration::seconds(60);
    let capped = release_failed(r, &recoverable(), later, 1.0, resume).unwrap();
    assert_eq!(capped.next_retry_at, Some(later + Duration::seconds(5)));
}

#[test]
fn a_call_that_timed_out_while_a_human_waits_is_asked_again_after_the_first_wait() {
    let timeout = ProviderCallError::Uncertain {
        kind: UncertainKind::Timeout,
        message: "slow".into(),
    };
    let (mut r, _, t) = releasing(ReleaseDisposition::SnapshotAndTerminate);
    r.retry_count = 5;
    let resume = Cadence::Resume {
        since: t - Duration::seconds(8),
    };
    let streak = release_failed(r.clone(), &recoverable(), t, 0.0, resume).unwrap();
    assert_eq!(streak.next_retry_at, Some(t + Duration::seconds(5)));
    let failed = release_failed(r.clone(), &timeout, t, 0.0, resume).unwrap();
    assert_eq!(failed.retry_count, 6, "an attempt is an attempt");
    assert_eq!(failed.next_retry_at, Some(t + Duration::milliseconds(250)));
    let mut restore = record(ResourceState::RestoreRequested);
    restore.retry_count = 5;
    let bound = bind_failed(restore, BindKind::Restore, &timeout, t, 0.0, resume).unwrap();
    assert_eq!(
        bound.record.next_retry_at,
        Some(t + Duration::milliseconds(250))
    );
    let nobody = release_failed(r, &timeout, t, 0.0, Cadence::Release).unwrap();
    assert_eq!(
        nobody.next_retry_at,
        Some(t + Duration::seconds(32)),
        "nobody waits: the release backoff"
    );
}

#[test]
fn a_provider_error_named_like_a_timeout_keeps_the_backoff() {
    let named = ProviderCallError::Recoverable {
        status: 503,
        error: WireError {
            code: crate::providers::client::TIMED_OUT.into(),
            ..provider_error(true)
        },
    };
    let (mut r, _, t) = releasing(ReleaseDisposition::SnapshotAndTerminate);
    r.retry_count = 5;
    let resume = Cadence::Resume {
        since: t - Duration::seconds(8),
    };
    let failed = release_failed(r, &named, t, 0.0, resume).unwrap();
    assert_eq!(failed.next_retry_at, Some(t + Duration::seconds(5)));
}

#[test]
fn a_release_in_progress_keeps_its_state_and_counts_no_attempt() {
    let (r, _, t) = releasing(ReleaseDisposition::SnapshotAndTerminate);
    let waiting =
        release_failed(r.clone(), &in_progress_call(30), t, 0.0, Cadence::Release).unwrap();
    assert_eq!(waiting.state, ResourceState::ReleaseRequested);
    assert_eq!(waiting.retry_count, 0);
    assert_eq!(waiting.release_idempotency_key, r.release_idempotency_key);
    assert_eq!(waiting.next_retry_at, Some(t + Duration::seconds(30)));
    assert!(!waiting.checkpoint_lost);
    assert!(in_progress(&waiting));
    assert_eq!(
        waiting.error.as_ref().map(|e| e.code.as_str()),
        Some(OPERATION_IN_PROGRESS)
    );

    let failed = release_failed(r, &recoverable(), t, 0.0, Cadence::Release).unwrap();
    let resume = Cadence::Resume { since: t };
    let still = release_failed(failed.clone(), &in_progress_call(30), t, 0.0, resume).unwrap();
    assert_eq!(still.state, ResourceState::ReleaseFailed);
    assert_eq!(still.retry_count, failed.retry_count);
    assert_eq!(
        still.next_retry_at,
        Some(t + Duration::from_std(RESUME_BACKOFF_CAP).unwrap()),
        "a human waiting is asked for again within the resume cap"
    );
    let policy = AttentionPolicy {
        attempt_budget: 1,
        ..AttentionPolicy::default()
    };
    let late = t + Duration::minutes(29);
    let kept = attention::escalate(still.clone(), policy, late, 0.0, Cadence::Release).unwrap();
    assert_eq!(kept, still, "no failure: no closer to an operator");
}

#[test]
fn a_release_in_progress_for_half_an_hour_needs_an_operator_and_keeps_the_providers_wait() {
    let (r, _, t) = releasing(ReleaseDisposition::SnapshotAndTerminate);
    let started = r.release_requested_at.unwrap();
    for state in [
        ResourceState::ReleaseRequested,
        ResourceState::ReleaseFailed,
    ] {
        let mut r = r.clone();
        r.state = state;
        let waiting = release_failed(r, &in_progress_call(30), t, 0.0, Cadence::Release).unwrap();
        let policy = AttentionPolicy::default();
        let early = started + IN_PROGRESS_ATTENTION_AFTER - Duration::seconds(1);
        let kept = attention::escalate(waiting.clone(), policy, early, 0.0, Cadence::Release);
        assert_eq!(kept.unwrap().state, waiting.state);
        let late = started + IN_PROGRESS_ATTENTION_AFTER;
        let flagged = attention::escalate(waiting.clone(), policy, late, 0.0, Cadence::Release);
        let flagged = flagged.unwrap();
        assert_eq!(
            flagged.state,
            ResourceState::NeedsAttention,
            "from {state:?}"
        );
        assert_eq!(
            flagged.next_retry_at, waiting.next_retry_at,
            "asked on its wait"
        );
        assert!(in_progress(&flagged));
    }
}

#[test]
fn a_bind_in_progress_ten_minutes_after_the_reply_needs_an_operator() {
    let t = now();
    let resume = Cadence::Resume { since: t };
    let policy = AttentionPolicy::default();
    let r = record(ResourceState::RestoreRequested);
    let call = in_progress_call(2);
    let at = t + BIND_IN_PROGRESS_ATTENTION_AFTER - Duration::seconds(1);
    let next = bind_failed(r.clone(), BindKind::Restore, &call, at, 0.0, resume).unwrap();
    let early = attention::escalate_bind(next.record, BindKind::Restore, policy, at, resume);
    assert!(!attention::bind_needs_attention(&early));
    let at = t + BIND_IN_PROGRESS_ATTENTION_AFTER;
    let next = bind_failed(r, BindKind::Restore, &call, at, 0.0, resume).unwrap();
    let late = attention::escalate_bind(next.record, BindKind::Restore, policy, at, resume);
    assert!(attention::bind_needs_attention(&late));
    assert_eq!(late.retry_count, 0, "no attempt failed");
    let message = &late.error.as_ref().unwrap().message;
    assert!(message.contains("still in progress"), "{message}");
}

#[test]
fn a_bind_in_progress_keeps_its_state_and_counts_no_attempt() {
    let mut r = record(ResourceState::RestoreRequested);
    r.retry_count = 2;
    let t = now();
    let resume = Cadence::Resume { since: t };
    let next = bind_failed(
        r.clone(),
        BindKind::Restore,
        &in_progress_call(2),
        t,
        0.0,
        resume,
    )
    .unwrap();
    assert_eq!(next.effect, RunEffect::None);
    assert_eq!(next.record.state, ResourceState::RestoreRequested);
    assert_eq!(next.record.retry_count, 2);
    assert_eq!(next.record.next_retry_at, Some(t + Duration::seconds(2)));
}

#[test]
fn a_sandbox_not_inspected_waits_without_unsettling_the_release() {
    let (r, _, t) = releasing(ReleaseDisposition::SnapshotAndTerminate);
    let failed = release_failed(r, &recoverable(), t, 0.0, Cadence::Release).unwrap();
    let since = t + Duration::seconds(10);
    let down = ProviderCallError::Unreachable("connection refused".into());
    let waited = inspect_failed(failed.clone(), &down, since, 0.0, Cadence::Resume { since });
    assert_eq!(waited.state, ResourceState::ReleaseFailed);
    assert_eq!(waited.retry_count, failed.retry_count + 1);
    assert_eq!(
        waited.next_retry_at,
        Some(since + Duration::milliseconds(250))
    );
    let error = waited.error.as_ref().unwrap();
    assert_eq!(error.code, INSPECT_FAILED);
    assert!(
        !error.outcome_unknown(),
        "a failed read says nothing of the release"
    );

    let unsettled = release_unsettled(waited.clone());
    assert!(unsettled.error.as_ref().unwrap().outcome_unknown());
    assert_eq!(
        unsettled.next_retry_at, None,
        "the provider answered: the release is finished next"
    );
}

#[test]
fn a_bind_failing_past_its_budget_needs_an_operator_and_keeps_the_resume_cadence() {
    let policy = AttentionPolicy::default();
    let t = now();
    let resume = Cadence::Resume { since: t };
    let mut r = record(ResourceState::RestoreRequested);
    let mut at = t;
    for attempt in 1..=12 {
        let next = bind_failed(r, BindKind::Restore, &recoverable(), at, 0.0, resume).unwrap();
        assert_eq!(next.effect, RunEffect::None);
        r = attention::escalate_bind(next.record, BindKind::Restore, policy, at, resume);
        assert_eq!(r.retry_count, attempt);
        let wait = r.next_retry_at.unwrap() - at;
        assert!(
            wait <= Duration::seconds(5),
            "attempt {attempt} waits {wait}"
        );
        let flagged = attention::bind_needs_attention(&r);
        assert_eq!(flagged, attempt >= 10 && at - t >= Duration::minutes(2));
        at += Duration::seconds(20);
    }
    assert!(attention::bind_needs_attention(&r));
    let error = r.error.as_ref().unwrap();
    assert_eq!(error.code, BIND_NEEDS_ATTENTION);
    assert!(
        error.message.contains("restore failed 12 times"),
        "{error:?}"
    );
    assert!(
        error.message.contains("sandbox.snapshot_failed"),
        "{error:?}"
    );
    assert_eq!(r.state, ResourceState::RestoreRequested, "still retried");

    let suspended = attention::escalate_bind(
        bind_failed(
            r.clone(),
            BindKind::Restore,
            &recoverable(),
            at,
            0.0,
            Cadence::Release,
        )
        .unwrap()
        .record,
        BindKind::Restore,
        policy,
        at,
        Cadence::Release,
    );
    assert!(
        !attention::bind_needs_attention(&suspended),
        "no human waits"
    );
}

#[test]
fn a_refused_bind_waits_for_an_operator_while_a_human_waits_unless_its_source_is_gone() {
    let t = now();
    let resume = Cadence::Resume { since: t };
    let mut released = record(ResourceState::Released);
    released.sandbox_checkpoint = Some(checkpoint());
    let r = begin_bind(released, BindKind::Restore).unwrap();
    let next = bind_failed(r.clone(), BindKind::Restore, &refused(), t, 0.0, resume).unwrap();
    assert_eq!(next.effect, RunEffect::None, "retried, not failed");
    assert_eq!(next.record.retry_count, 1);
    assert!(next.record.next_retry_at.is_some());

    let gone = ProviderCallError::Refused {
        status: 404,
        error: WireError {
            code: "checkpoint.not_found".into(),
            ..provider_error(false)
        },
    };
    let next = bind_failed(r.clone(), BindKind::Restore, &gone, t, 0.0, resume).unwrap();
    assert!(
        matches!(next.effect, RunEffect::Fail { ref code, .. } if code == "sandbox.restore_failed")
    );
    let next = bind_failed(r, BindKind::Restore, &refused(), t, 0.0, Cadence::Release).unwrap();
    assert!(
        matches!(next.effect, RunEffect::Fail { .. }),
        "a run nobody waits on is told at once"
    );
    let not_found = ProviderCallError::Refused {
        status: 404,
        error: WireError {
            code: "sandbox.not_found".into(),
            ..provider_error(false)
        },
    };
    let blocked = record(ResourceState::ReleaseBlocked);
    let next = bind_failed(blocked, BindKind::Attach, &not_found, t, 0.0, resume).unwrap();
    assert!(
        matches!(next.effect, RunEffect::Fail { ref code, .. } if code == "sandbox.attach_failed"),
        "the sandbox to attach to is gone"
    );
}

#[test]
fn a_provider_that_answers_in_progress_forever_is_not_polled_ever_faster() {
    let (r, _, t) = releasing(ReleaseDisposition::SnapshotAndTerminate);
    let eager = ProviderCallError::InProgress {
        operation: "release".into(),
        retry_after: std::time::Duration::from_millis(100),
    };
    let soon = release_failed(r.clone(), &eager, t, 0.0, Cadence::Release).unwrap();
    assert_eq!(
        soon.next_retry_at,
        Some(t + Duration::seconds(1)),
        "the cadence's first wait"
    );
    let hour = t + Duration::hours(1);
    let later = release_failed(r.clone(), &eager, hour, 0.0, Cadence::Release).unwrap();
    assert_eq!(
        later.next_retry_at,
        Some(hour + Duration::seconds(300)),
        "the cap"
    );
    assert_eq!(later.retry_count, 0, "still no failure");
    let resume = Cadence::Resume { since: hour };
    let waiting = release_failed(r, &eager, hour, 0.0, resume).unwrap();
    assert_eq!(
        waiting.next_retry_at,
        Some(hour + Duration::seconds(5)),
        "a human waits: the resume cap"
    );
}
