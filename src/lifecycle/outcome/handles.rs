//! A handle that names another run, tenant, spec or policy is never bound as the run's own.

use super::{abandon, bind_succeeded, BindKind, Next, OutcomeResult};
use crate::domain::resource::{ExecutionResourceRecord, RunEffect};
use crate::domain::sandbox::ProviderError;
use crate::providers::wire::SandboxHandle;

/// The code a run fails with when its provider binds a sandbox that is not the one asked for.
pub const HANDLE_MISMATCH: &str = "sandbox.handle_mismatch";

/// Why a handle cannot be bound to the run (owner, tenant, spec or policy hash differ), or
/// `None` when it names exactly what was asked for.
pub fn handle_mismatch(
    record: &ExecutionResourceRecord,
    tenant_id: &str,
    handle: &SandboxHandle,
) -> Option<String> {
    let got = &handle.r#ref;
    let spec = &record.sandbox_spec;
    let checks = [
        (
            "owner_run_id",
            record.run_id.as_str(),
            got.owner_run_id.as_str(),
        ),
        ("tenant_id", tenant_id, got.tenant_id.as_str()),
        ("spec_hash", spec.spec_hash.as_str(), got.spec_hash.as_str()),
        (
            "policy_hash",
            spec.policy_hash.as_str(),
            got.policy_hash.as_str(),
        ),
    ];
    let wrong: Vec<String> = checks
        .iter()
        .filter(|(_, want, got)| want != got)
        .map(|(field, want, got)| format!("{field} is `{got}`, not `{want}`"))
        .collect();
    (!wrong.is_empty()).then(|| {
        format!(
            "the provider bound sandbox `{}` for another run or policy: {}",
            got.sandbox_id,
            wrong.join("; ")
        )
    })
}

/// Whether the handle provably names the run's own compute: its owner run and tenant are
/// the run's (only its spec or policy hash differ).
pub fn handle_is_own(
    record: &ExecutionResourceRecord,
    tenant_id: &str,
    handle: &SandboxHandle,
) -> bool {
    handle.r#ref.owner_run_id == record.run_id.as_str() && handle.r#ref.tenant_id == tenant_id
}

/// A handle that is not the run's: the run fails with `sandbox.handle_mismatch` either way.
/// A sandbox that provably is the run's (only a hash differs) is bound so that the end of
/// the run terminates it. One that names another run or tenant is quarantined: never bound,
/// never terminated by this run (it may be another run's live compute); the record keeps
/// what it had (a provision or restore ends with nothing bound, `released` without
/// `compute_released`) and its error names the foreign sandbox for operators.
pub fn bind_mismatched(
    record: ExecutionResourceRecord,
    tenant_id: &str,
    kind: BindKind,
    handle: &SandboxHandle,
    why: String,
) -> OutcomeResult<Next> {
    let own = handle_is_own(&record, tenant_id, handle);
    let mut record = match (own, kind) {
        (true, _) => bind_succeeded(record, kind, handle)?,
        (false, BindKind::Attach) => record,
        (false, BindKind::Provision | BindKind::Restore) => abandon(record)?,
    };
    let message = if own {
        why.clone()
    } else {
        let got = &handle.r#ref;
        format!(
            "{why}; quarantined, not terminated: sandbox `{}` of provider generation {} names \
             owner run `{}` of tenant `{}`",
            got.sandbox_id, handle.generation, got.owner_run_id, got.tenant_id
        )
    };
    record.error = Some(ProviderError {
        code: HANDLE_MISMATCH.into(),
        category: "integrity".into(),
        message: message.clone(),
        retryable: false,
    });
    Ok(Next {
        record,
        effect: RunEffect::Fail {
            code: HANDLE_MISMATCH.into(),
            message,
        },
    })
}
