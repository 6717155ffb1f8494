use std::sync::Arc;

use crate::domain::commands::CreateSession;
use crate::domain::session::Session;
use crate::domain::snapshot::Snapshot;
use crate::domain::validate;
use crate::domain::SessionId;
use crate::metrics::Metrics;
use crate::snapshot_cache::{Cached, Encoded, SnapshotCache};
use crate::store::admin::idempotency::IdempotencyClaim;
use crate::store::engine::rows::{self, SESSION_COLS};
use crate::store::engine::snapshot_read::{read_snapshot, OwnedSnapshot};
use crate::store::engine::visible::{find_session, sees};
use crate::store::engine::{Store, StoreError, StoreResult};
use crate::store::sessions::create_batch::SessionItem;

const MAX_PAGE: u32 = 1000;

impl Store {
    /// Creates a session at revision 1. A `parent_session_id` must name a session of the
    /// same tenant (`Invalid` on `parent_session_id` otherwise). Written through the group
    /// commit with the writes queued beside it.
    pub async fn create_session(&self, tenant: &str, cmd: &CreateSession) -> StoreResult<Session> {
        self.create_session_keyed(tenant, cmd, None).await
    }

    /// [`Self::create_session`] under an `Idempotency-Key`: the answer is stored under the
    /// key in the transaction that creates the session.
    pub async fn create_session_keyed(
        &self,
        tenant: &str,
        cmd: &CreateSession,
        key: Option<&IdempotencyClaim>,
    ) -> StoreResult<Session> {
        validate::name("tenant", tenant)?;
        cmd.validate()?;
        self.grouped(SessionItem {
            id: SessionId::new(),
            tenant: tenant.to_owned(),
            cmd: cmd.clone(),
            key: key.cloned(),
        })
        .await
    }

    /// The tenant's sessions, newest first, at most `limit`, after the session `before` (the
    /// last one of the previous page) when given.
    pub async fn list_sessions(
        &self,
        tenant: &str,
        before: Option<&SessionId>,
        limit: u32,
    ) -> StoreResult<Vec<Session>> {
        let mut conn = self.inner.read.acquire().await?;
        if let Some(before) = before {
            find_session(&mut conn, Some(tenant), before.as_str()).await?;
        }
        let sql = format!(
            "SELECT {SESSION_COLS} FROM sessions s WHERE s.tenant_id = $1 AND ($2 IS NULL OR \
             (s.created_at, s.id) < (SELECT c.created_at, c.id FROM sessions c WHERE c.id = $2)) \
             ORDER BY s.created_at DESC, s.id DESC LIMIT $3"
        );
        sqlx::query(&sql)
            .bind(tenant)
            .bind(before.map(SessionId::as_str))
            .bind(i64::from(limit.min(MAX_PAGE)))
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(rows::session)
            .collect()
    }

    /// `tenant: None` means an admin caller that sees every tenant.
    pub async fn get_session(&self, tenant: Option<&str>, id: &SessionId) -> StoreResult<Session> {
        let mut conn = self.inner.read.acquire().await?;
        find_session(&mut conn, tenant, id.as_str()).await
    }

    /// The current revision only: the cheap path behind `304 Not Modified`.
    pub async fn session_revision(&self, tenant: Option<&str>, id: &SessionId) -> StoreResult<i64> {
        let cache = &self.inner.hub.cache;
        match cache.get(id.as_str(), tenant) {
            Some(Cached::Visible { revision, .. }) => return Ok(revision),
            Some(Cached::Hidden) => return Err(StoreError::NotFound("session")),
            None => {}
        }
        let epoch = cache.epoch();
        let row = sqlx::query("SELECT tenant_id, revision FROM sessions WHERE id = $1")
            .bind(id.as_str())
            .fetch_optional(&self.inner.read)
            .await?;
        let Some(row) = row else {
            return Err(StoreError::NotFound("session"));
        };
        let (owner, revision) = (rows::text(&row, "tenant_id")?, rows::int(&row, "revision")?);
        cache.confirm(epoch, id.as_str(), &owner, revision, None);
        if sees(tenant, &owner) {
            Ok(revision)
        } else {
            Err(StoreError::NotFound("session"))
        }
    }

    /// The snapshot as of one moment. Runs are ordered by
    /// creation, pending interactions by request time then id.
    pub async fn snapshot(&self, tenant: Option<&str>, id: &SessionId) -> StoreResult<Snapshot> {
        let encoded = self.encoded_snapshot(tenant, id).await?;
        encoded
            .decode()
            .map_err(|e| StoreError::Database(sqlx::Error::Decode(e.into())))
    }

    /// The snapshot with its JSON body, from the cache while its revision is current.
    pub async fn encoded_snapshot(
        &self,
        tenant: Option<&str>,
        id: &SessionId,
    ) -> StoreResult<Arc<Encoded>> {
        let cache = &self.inner.hub.cache;
        if let Some(hit) = cached_snapshot(cache, tenant, id)? {
            return Ok(hit);
        }
        // Readers of one session take turns: those after the first find its read cached.
        let _turn = cache.read_turn(id.as_str()).await;
        if let Some(hit) = cached_snapshot(cache, tenant, id)? {
            return Ok(hit);
        }
        Metrics::inc(&self.metrics().snapshot_reads);
        let epoch = cache.epoch();
        let mut conn = self.inner.read.acquire().await?;
        let OwnedSnapshot {
            snapshot,
            tenant_id: owner,
        } = match read_snapshot(&mut conn, tenant, id.as_str()).await? {
            Some(snapshot) => snapshot,
            None => {
                // A write landed between the two statements: read again in one transaction.
                drop(conn);
                let mut tx = self.begin_consistent_read().await?;
                let snapshot = read_snapshot(&mut tx, tenant, id.as_str()).await?;
                tx.commit().await?;
                snapshot.ok_or_else(|| {
                    StoreError::Database(sqlx::Error::Protocol(
                        "a session's revision changed within one repeatable read".into(),
                    ))
                })?
            }
        };
        let encoded = Arc::new(
            Encoded::new(&snapshot)
                .map_err(|e| StoreError::Database(sqlx::Error::Encode(e.into())))?,
        );
        cache.confirm(
            epoch,
            id.as_str(),
            &owner,
            encoded.revision(),
            Some(encoded.clone()),
        );
        Ok(encoded)
    }
}

/// The cached snapshot of `id` if its revision is the current one; `NotFound` if the cache
/// knows the session belongs to another tenant.
fn cached_snapshot(
    cache: &SnapshotCache,
    tenant: Option<&str>,
    id: &SessionId,
) -> StoreResult<Option<Arc<Encoded>>> {
    match cache.get(id.as_str(), tenant) {
        Some(Cached::Visible { snapshot, .. }) => Ok(snapshot),
        Some(Cached::Hidden) => Err(StoreError::NotFound("session")),
        None => Ok(None),
    }
}
