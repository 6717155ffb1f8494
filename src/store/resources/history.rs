//! The execution-resource history of a run, for operators: every state a record entered, with
//! the provider, generation, disposition and error code. Frontends never read it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use utoipa::ToSchema;

use crate::domain::RunId;
use crate::store::engine::rows::{int, json, text, time};
use crate::store::sessions::events::EventPage;
use crate::store::{Store, StoreError, StoreResult};

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

fn resource_event(row: &AnyRow) -> StoreResult<ResourceEvent> {
    Ok(ResourceEvent {
        run_id: RunId::from_trusted(text(row, "run_id")?),
        sequence: int(row, "sequence")?,
        r#type: text(row, "type")?,
        data: json(row, "data")?,
        created_at: time(row, "created_at")?,
    })
}

impl Store {
    /// Entries of the run's resource history with `sequence > after`, oldest first, at most
    /// `limit`; `NotFound` when the run has no execution resource.
    pub async fn list_resource_events(
        &self,
        run_id: &RunId,
        after: i64,
        limit: u32,
    ) -> StoreResult<Vec<ResourceEvent>> {
        let mut conn = self.inner.read.acquire().await?;
        let exists = sqlx::query("SELECT run_id FROM execution_resources WHERE run_id = $1")
            .bind(run_id.as_str())
            .fetch_optional(&mut *conn)
            .await?;
        if exists.is_none() {
            return Err(StoreError::NotFound("execution_resource"));
        }
        let page = EventPage {
            table: "execution_resource_events",
            key: "run_id",
            after,
            limit,
        };
        page.rows(&mut conn, run_id.as_str())
            .await?
            .iter()
            .map(resource_event)
            .collect()
    }
}
