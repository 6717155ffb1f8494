//! The execution-resource history of a run, for operators: every state a record entered, with
//! the provider, generation, disposition and error code. Frontends never read it.

use crate::domain::RunId;
use crate::store::engine::records::ResourceEvent;
use crate::store::engine::rows;
use crate::store::engine::{Store, StoreError, StoreResult};
use crate::store::sessions::events::EventPage;

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
            hidden: &[],
        };
        page.rows(&mut conn, run_id.as_str())
            .await?
            .iter()
            .map(rows::history_entry)
            .collect()
    }
}
