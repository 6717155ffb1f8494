//! The row types the store reads and returns: what row decoding (`rows.rs`) produces beside
//! the domain's own types.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::claim::LeaseState;
use crate::domain::interaction::InteractionRequest;
use crate::domain::resource::ResourceState;
use crate::domain::run::{Run, RunStatus};
use crate::domain::{InteractionId, RunId, SessionId, SuspensionId};

/// A run as the fenced writes need it: the run, its lease and its tenant.
#[derive(Debug, Clone)]
pub(in crate::store) struct RunRecord {
    pub run: Run,
    pub lease: LeaseState,
    pub tenant_id: String,
}

/// An interaction with the session it belongs to.
#[derive(Debug, Clone)]
pub(in crate::store) struct InteractionRecord {
    pub interaction: InteractionRequest,
    pub session_id: SessionId,
}

/// The open suspension of a run (`pending` or `resolving`).
#[derive(Debug, Clone)]
pub(in crate::store) struct OpenSuspension {
    pub id: SuspensionId,
    pub interaction_id: Option<InteractionId>,
}

/// What a compare-and-set write of a record checks and reports: its state and version.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) struct RecordHead {
    pub state: ResourceState,
    pub version: i64,
}

/// What a fenced record write checks of its run: the lease, and whether a parent's record
/// may wait on this one's release.
#[derive(Debug, Clone)]
pub(in crate::store) struct RunFence {
    pub lease: LeaseState,
    pub has_parent: bool,
}

/// One entry of the durable per-session audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionEvent {
    pub session_id: SessionId,
    pub sequence: i64,
    pub r#type: String,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    pub created_at: DateTime<Utc>,
}

/// One entry of a run's execution-resource history. `sequence` is the record's version after
/// the write that logged it (entries from before this log existed are numbered from 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ResourceEvent {
    pub run_id: RunId,
    pub sequence: i64,
    pub r#type: String,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReplyOutcome {
    pub interaction: InteractionRequest,
    pub run_status: RunStatus,
}

/// A registered sandbox provider. The token is needed to call it and is never listed (nor
/// printed by `Debug`).
#[derive(Clone, PartialEq)]
pub struct ProviderRecord {
    pub provider_id: String,
    pub base_url: String,
    pub token: String,
    pub capabilities: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl std::fmt::Debug for ProviderRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderRecord")
            .field("provider_id", &self.provider_id)
            .field("base_url", &self.base_url)
            .field("token", &"***")
            .field("capabilities", &self.capabilities)
            .field("created_at", &self.created_at)
            .field("updated_at", &self.updated_at)
            .finish()
    }
}
