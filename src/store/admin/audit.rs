use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;

use crate::clock::to_millis;
use crate::domain::audit::{AuditRecord, SYSTEM_CHAIN};
use crate::domain::validate;
use crate::store::engine::{rows, Store, StoreResult};

/// The most records one page lists.
pub const MAX_AUDIT_PAGE: u32 = 1000;

fn record(row: &AnyRow) -> StoreResult<AuditRecord> {
    Ok(AuditRecord {
        tenant: rows::text(row, "tenant_id")?,
        sequence: rows::int(row, "sequence")?,
        at: rows::time(row, "at")?,
        kind: rows::text(row, "kind")?,
        actor: rows::text(row, "actor")?,
        actor_name: rows::opt_text(row, "actor_name")?,
        subject: rows::text(row, "subject")?,
        data: rows::json(row, "data")?,
        prev_hash: rows::text(row, "prev_hash")?,
        hash: rows::text(row, "hash")?,
    })
}

impl Store {
    /// `tenant`'s chain (`*`: the system chain) in sequence order: the records after
    /// sequence `after`, at or after `since`, at most `limit`.
    pub async fn list_audit(
        &self,
        tenant: &str,
        after: i64,
        since: Option<DateTime<Utc>>,
        limit: u32,
    ) -> StoreResult<Vec<AuditRecord>> {
        if tenant != SYSTEM_CHAIN {
            validate::name("tenant", tenant)?;
        }
        let found = sqlx::query(
            "SELECT tenant_id, sequence, at, kind, actor, actor_name, subject, data, prev_hash, \
             hash FROM audit_records WHERE tenant_id = $1 AND sequence > $2 AND at >= $3 \
             ORDER BY sequence LIMIT $4",
        )
        .bind(tenant)
        .bind(after)
        .bind(since.map_or(i64::MIN, to_millis))
        .bind(i64::from(limit.clamp(1, MAX_AUDIT_PAGE)))
        .fetch_all(&self.inner.read)
        .await?;
        found.iter().map(record).collect()
    }
}
