use super::*;
use crate::spec::{LifecyclePolicy, Resources, WorkspaceMode, SPEC_VERSION_V3};
use serde::de::DeserializeOwned;

fn now_ms() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(Utc::now().timestamp_millis()).unwrap()
}

fn sandbox_ref() -> SandboxRef {
    SandboxRef {
        sandbox_id: "sbx_1".into(),
        provider_id: "local".into(),
        provider_version: "0.1.0".into(),
        tenant_id: "acme".into(),
        owner_run_id: "run_1".into(),
        spec_hash: format!("sha256:{}", "1".repeat(64)),
        policy_hash: format!("sha256:{}", "2".repeat(64)),
    }
}

fn spec() -> ResolvedSandboxSpec {
    ResolvedSandboxSpec {
        spec_version: SPEC_VERSION_V3.into(),
        provider_id: "local".into(),
        spec_hash: format!("sha256:{}", "1".repeat(64)),
        policy_hash: format!("sha256:{}", "2".repeat(64)),
        workspace_mode: WorkspaceMode::Isolated,
        host_workspace: None,
        lifecycle: LifecyclePolicy::default(),
        resources: Resources::default(),
        metadata: serde_json::json!({}),
    }
}

fn checkpoint() -> CheckpointRef {
    CheckpointRef {
        checkpoint_id: "ckp_1".into(),
        provider_id: "local".into(),
        sandbox_id: "sbx_1".into(),
        generation: 1,
        size_bytes: 42,
        digest: Some(format!("sha256:{}", "3".repeat(64))),
        created_at: now_ms(),
    }
}

fn receipt(disposition: ReleaseDisposition) -> SandboxReleaseReceipt {
    let released = disposition != ReleaseDisposition::Detach;
    SandboxReleaseReceipt {
        r#ref: sandbox_ref(),
        disposition,
        state: if released {
            SandboxState::Terminated
        } else {
            SandboxState::Ready
        },
        checkpoint: (disposition == ReleaseDisposition::SnapshotAndTerminate).then(checkpoint),
        compute_released: released,
        duplicate: false,
        released_at: now_ms(),
    }
}

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(value: &T) {
    let text = serde_json::to_string(value).unwrap();
    let back: T = serde_json::from_str(&text).unwrap();
    assert_eq!(&back, value, "{text}");
}

#[test]
fn every_wire_type_round_trips() {
    round_trip(&Capabilities {
        api_version: API_VERSION_V3.into(),
        capability: CAPABILITY_SANDBOX.into(),
        provider_id: "local".into(),
        provider_version: "0.1.0".into(),
        isolation_level: "process".into(),
        supported_release_dispositions: ReleaseDisposition::ALL.to_vec(),
        supports_snapshot: true,
        supports_restore: true,
        supports_reconnect: true,
        max_lifetime_seconds: Some(3600),
        supports_exec: true,
        supports_inventory: true,
        supports_checkpoint_delete: true,
        unauthenticated: false,
        bounded_resources: Vec::new(),
    });
    let context = RequestContext {
        actor: "sagents".into(),
        trace_id: Some("t-1".into()),
        deadline: Some(now_ms()),
        fencing_token: Some(7),
    };
    round_trip(&ProvisionRequest {
        spec: spec(),
        owner_run_id: "run_1".into(),
        tenant_id: "acme".into(),
        idempotency_key: "k".into(),
        context: context.clone(),
    });
    round_trip(&SandboxHandle {
        r#ref: sandbox_ref(),
        state: SandboxState::Ready,
        revision: 3,
        generation: 2,
        grant: Some(Grant {
            token: "g".into(),
            sandbox_id: "sbx_1".into(),
            generation: 2,
            expires_at: now_ms(),
        }),
    });
    round_trip(&SandboxInfo {
        r#ref: sandbox_ref(),
        state: SandboxState::Lost,
        revision: 9,
        attached_clients: 1,
        generation: 1,
    });
    round_trip(&AttachRequest {
        context: context.clone(),
    });
    round_trip(&ReleaseRequest {
        request: ReleaseSpec {
            r#ref: sandbox_ref(),
            disposition: ReleaseDisposition::SnapshotAndTerminate,
            reason: "approval_required".into(),
            expected_revision: Some(2),
            idempotency_key: "run_1:1:sus_1".into(),
        },
        context: context.clone(),
    });
    for d in ReleaseDisposition::ALL {
        round_trip(&receipt(*d));
    }
    round_trip(&RestoreRequest {
        checkpoint: checkpoint(),
        spec: spec(),
        owner_run_id: "run_1".into(),
        idempotency_key: "r".into(),
        context,
    });
    round_trip(&ExecRequest {
        argv: vec!["echo".into(), "hi".into()],
        cwd: Some("sub".into()),
        env: Some([("A".to_string(), "b".to_string())].into()),
        stdin: Some("in".into()),
        timeout_seconds: 5,
    });
    round_trip(&ExecResponse {
        exit_code: Some(0),
        stdout: "hi\n".into(),
        stderr: String::new(),
        truncated: false,
        timed_out: false,
    });
    round_trip(&ProviderError {
        code: "sandbox.not_found".into(),
        category: "not_found".into(),
        message: "no such sandbox".into(),
        retryable: false,
    });
}

#[test]
fn the_wire_uses_the_documented_field_names() {
    let v = serde_json::to_value(receipt(ReleaseDisposition::SnapshotAndTerminate)).unwrap();
    for key in [
        "ref",
        "disposition",
        "state",
        "checkpoint",
        "compute_released",
        "duplicate",
        "released_at",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert_eq!(v["disposition"], "snapshot_and_terminate");
    assert_eq!(v["state"], "terminated");
}

#[test]
fn requests_refuse_unknown_fields_and_responses_tolerate_them() {
    let mut req = serde_json::to_value(AttachRequest::default()).unwrap();
    req["extra"] = serde_json::json!(true);
    let err = serde_json::from_value::<AttachRequest>(req).unwrap_err();
    assert!(err.to_string().contains("extra"));
    let mut info = serde_json::to_value(SandboxInfo {
        r#ref: sandbox_ref(),
        state: SandboxState::Ready,
        revision: 1,
        attached_clients: 0,
        generation: 1,
    })
    .unwrap();
    info["future_field"] = serde_json::json!("x");
    assert!(serde_json::from_value::<SandboxInfo>(info).is_ok());
}

#[test]
fn consistent_receipts_pass() {
    for d in ReleaseDisposition::ALL {
        assert_eq!(receipt(*d).check_consistency(), Ok(()), "{d}");
    }
    let mut terminate_not_released = receipt(ReleaseDisposition::Terminate);
    terminate_not_released.compute_released = false;
    assert_eq!(terminate_not_released.check_consistency(), Ok(()));
}

#[test]
fn compute_released_requires_terminated() {
    let mut r = receipt(ReleaseDisposition::Terminate);
    r.state = SandboxState::Ready;
    assert_eq!(
        r.check_consistency(),
        Err(ReceiptInconsistency::ReleasedButNotTerminated(
            SandboxState::Ready
        ))
    );
}

#[test]
fn snapshot_release_requires_a_checkpoint() {
    let mut r = receipt(ReleaseDisposition::SnapshotAndTerminate);
    r.checkpoint = None;
    assert_eq!(
        r.check_consistency(),
        Err(ReceiptInconsistency::SnapshotWithoutCheckpoint)
    );
}

#[test]
fn detach_never_releases_compute() {
    let mut r = receipt(ReleaseDisposition::Detach);
    r.compute_released = true;
    r.state = SandboxState::Terminated;
    assert_eq!(
        r.check_consistency(),
        Err(ReceiptInconsistency::DetachReleasedCompute)
    );
}

#[test]
fn a_receipt_must_answer_the_request() {
    let r = receipt(ReleaseDisposition::Terminate);
    let mut asked = ReleaseSpec {
        r#ref: sandbox_ref(),
        disposition: ReleaseDisposition::Terminate,
        reason: "run_completed".into(),
        expected_revision: None,
        idempotency_key: "k".into(),
    };
    assert_eq!(r.check_answers(&asked), Ok(()));
    asked.disposition = ReleaseDisposition::SnapshotAndTerminate;
    assert!(matches!(
        r.check_answers(&asked),
        Err(ReceiptInconsistency::WrongDisposition { .. })
    ));
    asked.disposition = ReleaseDisposition::Terminate;
    asked.r#ref.sandbox_id = "sbx_other".into();
    assert!(matches!(
        r.check_answers(&asked),
        Err(ReceiptInconsistency::WrongSandbox { .. })
    ));
}
