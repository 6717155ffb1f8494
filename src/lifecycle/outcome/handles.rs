//! A handle that names another run, tenant, spec or policy is never bound as the run's own.

use super::{bind_succeeded, BindKind, Next, OutcomeResult};
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

/// A handle that is not the run's: the sandbox is bound only so that it can be terminated,
/// and the run fails with `sandbox.handle_mismatch`; the end of the run then terminates it.
pub fn bind_mismatched(
    record: ExecutionResourceRecord,
    kind: BindKind,
    handle: &SandboxHandle,
    why: String,
) -> OutcomeResult<Next> {
    let mut record = bind_succeeded(record, kind, handle)?;
    record.error = Some(ProviderError {
        code: HANDLE_MISMATCH.into(),
        category: "integrity".into(),
        message: why.clone(),
        retryable: false,
    });
    Ok(Next {
        record,
        effect: RunEffect::Fail {
            code: HANDLE_MISMATCH.into(),
            message: why,
        },
    })
}
