use sqlx::any::AnyRow;
use sqlx::AnyConnection;

use crate::domain::SessionId;
use crate::store::engine::records::SessionEvent;
use crate::store::engine::visible::find_session;
use crate::store::engine::{rows, Store, StoreResult};

const MAX_EVENTS: u32 = 1000;

/// Entries of the session log that only operators read (`LIKE` patterns of their types): the
/// service's own bookkeeping, such as a worker taking over an expired lease, that no user did
/// or sees.
const INTERNAL_EVENTS: &[&str] = &["lease.%"];

impl Store {
    /// What a user sees of a session's log: its events with `sequence > after`, oldest first,
    /// at most `limit`, without the `INTERNAL_EVENTS`.
    pub async fn list_events(
        &self,
        tenant: Option<&str>,
        session_id: &SessionId,
        after: i64,
        limit: u32,
    ) -> StoreResult<Vec<SessionEvent>> {
        self.session_log(tenant, session_id, after, limit, INTERNAL_EVENTS)
            .await
    }

    /// The whole log of a session, internal entries too (operators).
    pub async fn list_session_log(
        &self,
        tenant: Option<&str>,
        session_id: &SessionId,
        after: i64,
        limit: u32,
    ) -> StoreResult<Vec<SessionEvent>> {
        self.session_log(tenant, session_id, after, limit, &[])
            .await
    }

    async fn session_log(
        &self,
        tenant: Option<&str>,
        session_id: &SessionId,
        after: i64,
        limit: u32,
        hidden: &'static [&'static str],
    ) -> StoreResult<Vec<SessionEvent>> {
        let mut conn = self.inner.read.acquire().await?;
        find_session(&mut conn, tenant, session_id.as_str()).await?;
        let page = EventPage {
            table: "session_events",
            key: "session_id",
            after,
            limit,
            hidden,
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
    /// `LIKE` patterns of the types left out.
    pub hidden: &'static [&'static str],
}

impl EventPage {
    pub async fn rows(&self, conn: &mut AnyConnection, id: &str) -> StoreResult<Vec<AnyRow>> {
        let hidden: String = self
            .hidden
            .iter()
            .map(|pattern| format!(" AND type NOT LIKE '{pattern}'"))
            .collect();
        let sql = format!(
            "SELECT {key}, sequence, type, data, created_at FROM {table} \
             WHERE {key} = $1 AND sequence > $2{hidden} ORDER BY sequence LIMIT $3",
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
