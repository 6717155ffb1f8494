//! A terminal word forces a terminate; its attempts and an inspect keep the reason.

use super::*;

#[test]
fn a_terminal_error_forces_a_terminate_under_a_new_key_and_loses_the_snapshot() {
    {
        let err = terminal();
        let (mut r, sus, requested) = releasing(ReleaseDisposition::SnapshotAndTerminate);
        r = release_failed(r, &recoverable(), requested, 0.0, Cadence::Release).unwrap();
        let old_key = r.release_idempotency_key.clone();
        let t = requested + Duration::seconds(10);
        let forced = release_failed(r, &err, t, 0.0, Cadence::Release).unwrap();
        assert_eq!(forced.state, ResourceState::ReleaseRequested);
        assert_eq!(forced.disposition, Some(ReleaseDisposition::Terminate));
        assert_eq!(
            forced.release_purpose,
            Some(ReleasePurpose::ForcedTerminate)
        );
        assert_ne!(forced.release_idempotency_key, old_key);
        assert_eq!(
            forced.release_idempotency_key,
            Some(rules::release_idempotency_key(
                &forced.run_id,
                1,
                Some(&sus),
                ReleasePurpose::ForcedTerminate
            ))
        );
        assert!(forced.checkpoint_lost);
        assert_eq!(forced.sandbox_checkpoint, None);
        assert_eq!(forced.retry_count, 0);
        assert_eq!(forced.release_requested_at, Some(requested));
        assert_eq!(forced.error, Some(err.to_provider_error()));

        // The forced terminate then succeeds: released, the error stays for the operator.
        let done = release_answered(
            forced,
            &receipt(ReleaseDisposition::Terminate, true),
            t,
            0.0,
            Cadence::Release,
        )
        .unwrap();
        assert_eq!(done.state, ResourceState::Released);
        assert!(done.checkpoint_lost);
        assert_eq!(done.error, Some(err.to_provider_error()));
    }
}

#[test]
fn a_terminal_error_on_a_terminate_is_retried_not_re_forced() {
    let (r, _, t) = releasing(ReleaseDisposition::Terminate);
    let key = r.release_idempotency_key.clone();
    let r = release_failed(r, &terminal(), t, 0.0, Cadence::Release).unwrap();
    assert_eq!(r.state, ResourceState::ReleaseFailed);
    assert_eq!(r.release_idempotency_key, key);
    assert_eq!(r.retry_count, 1);
    assert!(!r.checkpoint_lost);
}

#[test]
fn a_forced_terminate_that_fails_is_retried_and_the_snapshot_stays_lost() {
    let (r, _, t) = releasing(ReleaseDisposition::SnapshotAndTerminate);
    let forced = release_failed(r, &terminal(), t, 0.0, Cadence::Release).unwrap();
    let again = release_failed(forced, &terminal(), t, 0.0, Cadence::Release).unwrap();
    assert_eq!(again.state, ResourceState::ReleaseFailed);
    assert!(again.checkpoint_lost, "a lost snapshot stays lost");
}

#[test]
fn a_forced_terminate_keeps_the_word_that_forced_it_through_its_failed_attempts() {
    let (r, _, t) = releasing(ReleaseDisposition::SnapshotAndTerminate);
    let forced = release_failed(r, &terminal(), t, 0.0, Cadence::Release).unwrap();
    let lost = ProviderCallError::Uncertain {
        kind: UncertainKind::ConnectionLost,
        message: "connection reset".into(),
    };
    let once = release_failed(forced, &lost, t, 0.0, Cadence::Release).unwrap();
    let twice = release_failed(once, &lost, t, 0.0, Cadence::Release).unwrap();
    let error = twice.error.clone().unwrap();
    assert_eq!(error.code, "sandbox.lost", "{error:?}");
    assert!(!error.retryable);
    assert_eq!(error.message.matches("last attempt failed").count(), 1);
    assert!(error.message.contains(&lost.to_provider_error().code));
    assert_eq!(twice.retry_count, 2);
    let receipt = receipt(ReleaseDisposition::Terminate, true);
    let done = release_answered(twice, &receipt, t, 0.0, Cadence::Release).unwrap();
    assert_eq!(done.state, ResourceState::Released);
    assert!(done.checkpoint_lost);
    assert_eq!(
        done.error.unwrap().code,
        "sandbox.lost",
        "the cause of the loss"
    );
}

#[test]
fn an_inspect_can_confirm_a_terminate_and_keeps_a_forced_one_reason() {
    let (r, _, requested) = releasing(ReleaseDisposition::Terminate);
    let t = requested + Duration::seconds(3);
    let done = release_confirmed_by_inspect(r, "inspect reports it terminated", None, t).unwrap();
    assert_eq!(done.state, ResourceState::Released);
    assert!(!done.compute_released, "no receipt said so");
    assert_eq!(done.released_at, Some(t));
    assert_eq!(done.error.as_ref().unwrap().code, RELEASED_ON_INSPECT);

    let (r, _, requested) = releasing(ReleaseDisposition::SnapshotAndTerminate);
    let forced = release_failed(r, &terminal(), requested, 0.0, Cadence::Release).unwrap();
    let done =
        release_confirmed_by_inspect(forced, "the provider knows it no more", None, t).unwrap();
    let error = done.error.unwrap();
    assert_eq!(
        error.code, "sandbox.lost",
        "the reason of the forced terminate stays"
    );
    assert!(error
        .message
        .ends_with("released on inspect: the provider knows it no more"));
    assert!(done.checkpoint_lost);
    assert!(release_confirmed_by_inspect(record(ResourceState::Active), "x", None, t).is_err());
}
