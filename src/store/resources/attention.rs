//! Records that need an operator: listed oldest first, and leased one run at a time so that
//! an operator's decision goes through the same fenced compare-and-set as the coordinator's.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::clock::to_millis;
use crate::domain::claim::Lease;
use crate::domain::resource::{ExecutionResourceRecord, BIND_NEEDS_ATTENTION};
use crate::domain::validate;
use crate::domain::{LeaseId, RunId};
use crate::store::claims::runtime::lease_expiry;
use crate::store::engine::rows::{self, RESOURCE_COLS};
use crate::store::engine::{Store, StoreError, StoreResult};

/// A `needs_attention` record, with its tenant and when it entered that state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AttentionItem {
    pub tenant_id: String,
    pub since: DateTime<Utc>,
    pub record: ExecutionResourceRecord,
}

impl Store {
    /// `needs_attention` records and binds flagged for an operator, longest waiting first, at most `limit`, after the record of
    /// run `after` (the last of the previous page) when given.
    pub async fn list_attention(
        &self,
        after: Option<&RunId>,
        limit: u32,
    ) -> StoreResult<Vec<AttentionItem>> {
        let mut conn = self.inner.read.acquire().await?;
        if let Some(after) = after {
            let found = sqlx::query("SELECT run_id FROM execution_resources WHERE run_id = $1")
                .bind(after.as_str())
                .fetch_optional(&mut *conn)
                .await?;
            if found.is_none() {
                return Err(StoreError::NotFound("execution_resource"));
            }
        }
        let sql = format!(
            "SELECT {RESOURCE_COLS}, state_since, \
               (SELECT s.tenant_id FROM runs r JOIN sessions s ON s.id = r.session_id \
                WHERE r.id = execution_resources.run_id) AS tenant_id \
             FROM execution_resources WHERE (state = 'needs_attention' OR error LIKE '%\"code\":\"{BIND_NEEDS_ATTENTION}\"%') \
               AND ($1 IS NULL OR \
               (state_since, run_id) > (SELECT c.state_since, c.run_id \
                 FROM execution_resources c WHERE c.run_id = $1)) \
             ORDER BY state_since, run_id LIMIT $2"
        );
        sqlx::query(&sql)
            .bind(after.map(RunId::as_str))
            .bind(i64::from(limit))
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|row| {
                Ok(AttentionItem {
                    tenant_id: rows::text(row, "tenant_id")?,
                    since: rows::time(row, "state_since")?,
                    record: rows::resource(row)?,
                })
            })
            .collect()
    }

    /// Leases one run to `holder` for `ttl` with a new fencing token, if no lease on it is
    /// live; `Conflict(execution_resource.busy)` otherwise. Handed back with `release_lease`.
    pub async fn lease_run(
        &self,
        run_id: &RunId,
        holder: &str,
        ttl: Duration,
    ) -> StoreResult<Lease> {
        validate::name("holder", holder)?;
        let mut tx = self.write_tx().await?;
        let now = tx.now;
        let result = async {
            let expires_at = lease_expiry(now, ttl)?;
            let fencing_token = self.next_fencing_token(tx.conn()).await?;
            let lease_id = LeaseId::new();
            let leased = sqlx::query(
                "UPDATE runs SET lease_id = $1, lease_holder = $2, fencing_token = $3, \
                 lease_expires_at = $4 WHERE id = $5 \
                 AND (lease_expires_at IS NULL OR lease_expires_at <= $6) RETURNING id",
            )
            .bind(lease_id.as_str())
            .bind(holder)
            .bind(fencing_token)
            .bind(to_millis(expires_at))
            .bind(run_id.as_str())
            .bind(to_millis(now))
            .fetch_optional(tx.conn())
            .await?;
            if leased.is_some() {
                return Ok(Lease {
                    lease_id,
                    fencing_token,
                    expires_at,
                });
            }
            let exists = sqlx::query("SELECT id FROM runs WHERE id = $1")
                .bind(run_id.as_str())
                .fetch_optional(tx.conn())
                .await?;
            Err(match exists {
                None => StoreError::NotFound("run"),
                Some(_) => StoreError::conflict(
                    "execution_resource.busy",
                    format!("run `{run_id}` is leased to a worker now; try again in a moment"),
                ),
            })
        }
        .await;
        tx.finish(self, result).await
    }
}
