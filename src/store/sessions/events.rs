use sqlx::any::AnyRow;
use sqlx::AnyConnection;

use crate::domain::SessionId;
use crate::store::engine::records::SessionEvent;
use crate::store::engine::visible::find_session;
use crate::store::engine::{rows, Store, StoreResult};

const MAX_EVENTS: u32 = 1000;

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
        let page = EventPage {
            table: "session_events",
            key: "session_id",
            after,
            limit,
        };
        page.rows(&mut conn, session_id.as_str())
            .await?
            .iter()
            .map(rows::session_event)
            .collect()
    }
}

/// A page of an event table (`key`, `sequence`, `type`, `data`, `created_at`): entries of one
/// key with `sequence > after`, oldest first, at most `limit` (capped).
pub(in crate::store) struct EventPage {
    pub table: &'static str,
    pub key: &'static str,
    pub after: i64,
    pub limit: u32,
}

impl EventPage {
    pub async fn rows(&self, conn: &mut AnyConnection, id: &str) -> StoreResult<Vec<AnyRow>> {
        let sql = format!(
            "SELECT {key}, sequence, type, data, created_at FROM {table} \
             WHERE {key} = $1 AND sequence > $2 ORDER BY sequence LIMIT $3",
            key = self.key,
            table = self.table
        );
        Ok(sqlx::query(&sql)
            .bind(id)
            .bind(self.after)
            .bind(i64::from(self.limit.min(MAX_EVENTS)))
            .fetch_all(conn)
            .await?)
    }
}
