//! The ExecutionResourceRecord: one per run that has compute, never shown to a frontend.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::machine::ResourceState;
use super::rules::ReleasePurpose;
use crate::domain::interaction::SuspensionReason;
use crate::domain::{JobId, RunId, SuspensionId};
use crate::providers::spec::{ReleaseDisposition, ResolvedSandboxSpec};
use crate::providers::wire::{CheckpointRef, ProviderError, SandboxRef};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ExecutionResourceRecord {
    pub run_id: RunId,
    /// 0 before the first bind, 1 at first bind, +1 on every attach, restore or re-provision.
    pub generation: i64,
    pub provider_id: String,
    /// The provider's own generation of the compute; grants name it.
    pub provider_generation: Option<i64>,
    pub sandbox_ref: Option<SandboxRef>,
    pub sandbox_spec: ResolvedSandboxSpec,
    pub run_resolved_spec_hash: String,
    pub state: ResourceState,
    pub disposition: Option<ReleaseDisposition>,
    pub sandbox_checkpoint: Option<CheckpointRef>,
    /// A terminal provider error destroyed the sandbox checkpoint; resume fails with
    /// `sandbox.snapshot_lost`.
    pub checkpoint_lost: bool,
    pub suspension_id: Option<SuspensionId>,
    pub suspension_reason: Option<SuspensionReason>,
    pub blocking_job_ids: Vec<JobId>,
    pub blocking_child_run_ids: Vec<RunId>,
    pub release_idempotency_key: Option<String>,
    pub release_purpose: Option<ReleasePurpose>,
    pub release_requested_at: Option<DateTime<Utc>>,
    pub released_at: Option<DateTime<Utc>>,
    pub compute_released: bool,
    /// Key of the provision or restore under way; set before the provider is called, so a
    /// run that ends meanwhile knows compute may exist.
    pub bind_idempotency_key: Option<String>,
    pub retry_count: i64,
    pub next_retry_at: Option<DateTime<Utc>>,
    /// When the coordinator should next look at this record (`None`: nothing to do).
    pub due_at: Option<DateTime<Utc>>,
    pub error: Option<ProviderError>,
    /// Compare-and-set version, bumped by every write.
    pub version: i64,
    pub updated_at: DateTime<Utc>,
}

impl ExecutionResourceRecord {
    /// The record as it is created with its run: nothing bound yet, due at once.
    pub fn provisioning(
        run_id: RunId,
        spec: ResolvedSandboxSpec,
        run_resolved_spec_hash: String,
        now: DateTime<Utc>,
    ) -> Self {
        ExecutionResourceRecord {
            run_id,
            generation: 0,
            provider_id: spec.provider_id.clone(),
            provider_generation: None,
            sandbox_ref: None,
            sandbox_spec: spec,
            run_resolved_spec_hash,
            state: ResourceState::Provisioning,
            disposition: None,
            sandbox_checkpoint: None,
            checkpoint_lost: false,
            suspension_id: None,
            suspension_reason: None,
            blocking_job_ids: vec![],
            blocking_child_run_ids: vec![],
            release_idempotency_key: None,
            release_purpose: None,
            release_requested_at: None,
            released_at: None,
            compute_released: false,
            bind_idempotency_key: None,
            retry_count: 0,
            next_retry_at: None,
            due_at: Some(now),
            error: None,
            version: 1,
            updated_at: now,
        }
    }
}
