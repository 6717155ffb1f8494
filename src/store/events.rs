use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::rows;
use super::sessions::find_session;
use super::{Store, StoreResult};
use crate::domain::SessionId;

const MAX_EVENTS: u32 = 1000;

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
        let mut conn = self.inner.read.acquire().await?;
        find_session(&mut conn, tenant, session_id.as_str()).await?;
        sqlx::query(
            "SELECT session_id, sequence, type, data, created_at FROM session_events \
             WHERE session_id = $1 AND sequence > $2 ORDER BY sequence LIMIT $3",
        )
        .bind(session_id.as_str())
        .bind(after)
        .bind(i64::from(limit.min(MAX_EVENTS)))
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(rows::event)
        .collect()
    }
}
