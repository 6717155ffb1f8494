//! Plugin API v3 wire types: the bodies of every provider endpoint.
//!
//! Request bodies refuse unknown fields; response bodies tolerate them, so a provider may add
//! fields without breaking its callers.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::spec::{ReleaseDisposition, ResolvedSandboxSpec};
use sagents_text_enum::text_enum;

pub const API_VERSION_V3: &str = "3";
pub const CAPABILITY_SANDBOX: &str = "execution.sandbox";
/// Header carrying the caller's fencing token (also sent in the body's `context`).
pub const FENCING_TOKEN_HEADER: &str = "x-sagents-fencing-token";
pub const REQUEST_ID_HEADER: &str = "x-request-id";

text_enum! {
    pub enum SandboxState as "sandbox state" {
        Provisioning => "provisioning",
        Ready => "ready",
        Suspended => "suspended",
        Terminated => "terminated",
        Lost => "lost",
    }
}

impl SandboxState {
    /// Whether compute may still exist for a sandbox in this state.
    pub fn holds_compute(self) -> bool {
        !matches!(self, SandboxState::Terminated)
    }
}

/// `GET /v3/capabilities`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Capabilities {
    /// Must be `"3"`.
    pub api_version: String,
    /// Must be `execution.sandbox`.
    pub capability: String,
    pub provider_id: String,
    pub provider_version: String,
    pub isolation_level: String,
    pub supported_release_dispositions: Vec<ReleaseDisposition>,
    pub supports_snapshot: bool,
    pub supports_restore: bool,
    pub supports_reconnect: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lifetime_seconds: Option<u64>,
    /// Whether `POST /v3/sandboxes/{id}/exec` is offered (reference provider extension).
    #[serde(default)]
    pub supports_exec: bool,
    /// Whether `GET /v3/sandboxes` and `GET /v3/checkpoints` list what the provider holds.
    #[serde(default)]
    pub supports_inventory: bool,
    /// Whether `DELETE /v3/checkpoints/{checkpoint_id}` is offered.
    #[serde(default)]
    pub supports_checkpoint_delete: bool,
    /// The provider serves without a token (reference provider's `--insecure-no-auth`):
    /// anyone who reaches it may provision, release and restore.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unauthenticated: bool,
    /// The spec's `resources` the provider bounds for a sandbox as a whole (`max_processes`,
    /// `memory_mb`, `cpu_percent`); a spec that sets another is refused, never ignored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bounded_resources: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub struct SandboxRef {
    pub sandbox_id: String,
    pub provider_id: String,
    pub provider_version: String,
    pub tenant_id: String,
    pub owner_run_id: String,
    pub spec_hash: String,
    pub policy_hash: String,
}

/// Who calls and under which lease; the fencing token lets a provider log or refuse stale
/// holders.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestContext {
    #[serde(default)]
    pub actor: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fencing_token: Option<i64>,
}

/// `POST /v3/sandboxes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProvisionRequest {
    pub spec: ResolvedSandboxSpec,
    pub owner_run_id: String,
    pub tenant_id: String,
    pub idempotency_key: String,
    #[serde(default)]
    pub context: RequestContext,
}

/// A short-lived signed token letting its holder operate in one sandbox generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Grant {
    pub token: String,
    pub sandbox_id: String,
    pub generation: u64,
    pub expires_at: DateTime<Utc>,
}

/// The answer of provision, attach and restore: `{ref, state, revision}`.
///
/// `generation` counts the compute incarnations behind the sandbox (grants name it); `grant`
/// is offered by providers that mint grants themselves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SandboxHandle {
    pub r#ref: SandboxRef,
    pub state: SandboxState,
    pub revision: u64,
    #[serde(default)]
    pub generation: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<Grant>,
}

/// `GET /v3/sandboxes/{sandbox_id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SandboxInfo {
    pub r#ref: SandboxRef,
    pub state: SandboxState,
    pub revision: u64,
    pub attached_clients: u32,
    #[serde(default)]
    pub generation: u64,
}

/// `POST /v3/sandboxes/{sandbox_id}/attach`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachRequest {
    #[serde(default)]
    pub context: RequestContext,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseSpec {
    pub r#ref: SandboxRef,
    pub disposition: ReleaseDisposition,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_revision: Option<u64>,
    pub idempotency_key: String,
}

/// `POST /v3/sandboxes/{sandbox_id}/release`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    pub request: ReleaseSpec,
    #[serde(default)]
    pub context: RequestContext,
}

/// A sandbox's files as archived by `snapshot_and_terminate`; opaque to the service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CheckpointRef {
    pub checkpoint_id: String,
    pub provider_id: String,
    /// The sandbox the files were taken from.
    pub sandbox_id: String,
    /// The generation of the compute the files were taken from.
    #[serde(default)]
    pub generation: u64,
    /// Size of the stored archive.
    pub size_bytes: u64,
    /// `sha256:` digest of the stored archive, when the provider computes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SandboxReleaseReceipt {
    pub r#ref: SandboxRef,
    pub disposition: ReleaseDisposition,
    pub state: SandboxState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<CheckpointRef>,
    pub compute_released: bool,
    pub duplicate: bool,
    pub released_at: DateTime<Utc>,
}

/// `POST /v3/restores`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreRequest {
    pub checkpoint: CheckpointRef,
    pub spec: ResolvedSandboxSpec,
    pub owner_run_id: String,
    pub idempotency_key: String,
    #[serde(default)]
    pub context: RequestContext,
}

/// `POST /v3/sandboxes/{sandbox_id}/exec` (reference provider extension). The grant goes in
/// the `Authorization: Bearer` header, never in the body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecRequest {
    pub argv: Vec<String>,
    /// Relative to the sandbox root; must stay inside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    pub timeout_seconds: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExecResponse {
    /// `None` when the command was killed by a signal.
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Whether stdout or stderr was cut at the provider's output cap.
    pub truncated: bool,
    pub timed_out: bool,
}

/// Who a sandbox or checkpoint was made for, as given at provision or restore.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct InventoryLabels {
    pub owner_run_id: String,
    pub tenant_id: String,
}

/// Query of `GET /v3/sandboxes` and `GET /v3/checkpoints`: an opaque cursor from the previous
/// page, and a page size (1 to [`INVENTORY_MAX_LIMIT`], default [`INVENTORY_DEFAULT_LIMIT`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InventoryQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

pub const INVENTORY_DEFAULT_LIMIT: u32 = 100;
pub const INVENTORY_MAX_LIMIT: u32 = 500;

/// One sandbox the provider holds, in any state (a terminated one may be listed until the
/// provider forgets it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct InventoryItem {
    pub r#ref: SandboxRef,
    pub state: SandboxState,
    pub generation: u64,
    pub labels: InventoryLabels,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
}

/// `GET /v3/sandboxes?cursor=&limit=`: a page in a stable order; no `next_cursor` on the last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct InventoryPage {
    pub items: Vec<InventoryItem>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// One stored checkpoint, with the labels of the sandbox it was taken from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CheckpointItem {
    pub checkpoint: CheckpointRef,
    pub labels: InventoryLabels,
}

/// `GET /v3/checkpoints?cursor=&limit=`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CheckpointPage {
    pub items: Vec<CheckpointItem>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `DELETE /v3/checkpoints/{checkpoint_id}` (idempotent): `deleted` is false when the
/// checkpoint was already gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CheckpointDeleteReceipt {
    pub checkpoint_id: String,
    pub deleted: bool,
}

/// `202 Accepted` to a release or restore still running under its idempotency key: the
/// caller asks again with the same key after `retry_after_ms`; this is not a failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OperationPending {
    /// `operation.in_progress`.
    pub code: String,
    /// `release` or `restore`.
    pub operation: String,
    pub idempotency_key: String,
    pub retry_after_ms: u64,
}

/// Every provider error body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProviderError {
    pub code: String,
    pub category: String,
    pub message: String,
    pub retryable: bool,
}

/// Why a receipt cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReceiptInconsistency {
    #[error("compute_released is true but the sandbox state is `{0}`, not `terminated`")]
    ReleasedButNotTerminated(SandboxState),
    #[error("snapshot_and_terminate released compute without a checkpoint")]
    SnapshotWithoutCheckpoint,
    #[error("detach claims compute_released")]
    DetachReleasedCompute,
    #[error("the receipt is for disposition `{got}`, but `{asked}` was asked")]
    WrongDisposition {
        asked: ReleaseDisposition,
        got: ReleaseDisposition,
    },
    #[error("the receipt is for sandbox `{got}`, but `{asked}` was asked")]
    WrongSandbox { asked: String, got: String },
}

impl SandboxReleaseReceipt {
    /// The consistency rules of a receipt on its own.
    pub fn check_consistency(&self) -> Result<(), ReceiptInconsistency> {
        if self.compute_released && self.state != SandboxState::Terminated {
            return Err(ReceiptInconsistency::ReleasedButNotTerminated(self.state));
        }
        match self.disposition {
            ReleaseDisposition::SnapshotAndTerminate
                if self.compute_released && self.checkpoint.is_none() =>
            {
                Err(ReceiptInconsistency::SnapshotWithoutCheckpoint)
            }
            ReleaseDisposition::Detach if self.compute_released => {
                Err(ReceiptInconsistency::DetachReleasedCompute)
            }
            _ => Ok(()),
        }
    }

    /// Consistency plus: it answers the request that was sent.
    pub fn check_answers(&self, request: &ReleaseSpec) -> Result<(), ReceiptInconsistency> {
        if self.r#ref.sandbox_id != request.r#ref.sandbox_id {
            return Err(ReceiptInconsistency::WrongSandbox {
                asked: request.r#ref.sandbox_id.clone(),
                got: self.r#ref.sandbox_id.clone(),
            });
        }
        if self.disposition != request.disposition {
            return Err(ReceiptInconsistency::WrongDisposition {
                asked: request.disposition,
                got: self.disposition,
            });
        }
        self.check_consistency()
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
