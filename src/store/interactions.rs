use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Store, StoreResult};
use crate::domain::commands::ReplyInteraction;
use crate::domain::interaction::InteractionRequest;
use crate::domain::run::RunStatus;
use crate::domain::{InteractionId, SessionId};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReplyOutcome {
    pub interaction: InteractionRequest,
    pub run_status: RunStatus,
}

impl Store {
    /// In one transaction: interaction → `resolved` (decision must be allowed: `Invalid` on
    /// `decision`), its suspension → `resolving`, its run → `resuming`; revision bump, event,
    /// publish session + work. A replay with the same decision and payload returns the first
    /// answer unchanged; any other reply to a non-pending interaction → `Conflict`
    /// `interaction.not_pending`. A stale `expected_revision` → `Conflict`
    /// `interaction.revision_mismatch`; past `expires_at` → `Conflict` `interaction.expired`.
    pub async fn reply_interaction(
        &self,
        tenant: Option<&str>,
        session_id: &SessionId,
        interaction_id: &InteractionId,
        cmd: &ReplyInteraction,
        resolved_by: &str,
    ) -> StoreResult<ReplyOutcome> {
        todo!()
    }

    /// Pending interactions past `expires_at` → `expired`; their runs fail with
    /// `interaction.expired`, their suspensions are cancelled. Returns how many expired.
    pub async fn expire_interactions(&self) -> StoreResult<u64> {
        todo!()
    }
}
