//! Sessions: the aggregate root a frontend sees.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::SessionId;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Session {
    pub id: SessionId,
    pub tenant_id: String,
    pub title: Option<String>,
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
    pub parent_session_id: Option<SessionId>,
    pub revision: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}
