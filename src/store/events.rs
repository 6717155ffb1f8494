use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Store, StoreResult};
use crate::domain::SessionId;

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

impl Store {
    /// Events of a session with `sequence > after`, oldest first, at most `limit`.
    pub async fn list_events(
        &self,
        tenant: Option<&str>,
        session_id: &SessionId,
        after: i64,
        limit: u32,
    ) -> StoreResult<Vec<SessionEvent>> {
        todo!()
    }
}
