//! The commit's appends to the audit chains: each chain's head is locked, its new records
//! hashed onto it, written, and the head moved, in the transaction of the change itself.

use std::collections::BTreeMap;

use sqlx::Row;

use super::WriteTx;
use crate::clock::{from_millis, to_millis};
use crate::domain::audit::{AuditEntry, GENESIS};
use crate::store::engine::error::StoreResult;
use crate::store::engine::handle::Store;
use crate::store::engine::params::value_rows;
use crate::store::engine::rows::to_json;

/// Parameters per audit record row.
const RECORD_COLS: usize = 10;

impl WriteTx {
    /// Appends an audit record to `entry.tenant`'s chain when this transaction commits.
    pub fn audit(&mut self, entry: AuditEntry) {
        self.audit.push(entry);
    }

    /// Chains in tenant order, so two transactions never wait on each other's heads.
    pub(super) async fn append_audit(&mut self, store: &Store) -> StoreResult<()> {
        let entries = std::mem::take(&mut self.audit);
        if entries.is_empty() {
            return Ok(());
        }
        let mut chains: BTreeMap<String, Vec<AuditEntry>> = BTreeMap::new();
        for e in entries {
            chains.entry(e.tenant.clone()).or_default().push(e);
        }
        let at = from_millis(to_millis(self.now));
        for (tenant, entries) in chains {
            // One statement creates the head if need be, locks it and reads it.
            let head = sqlx::query(
                "INSERT INTO audit_heads (tenant_id, sequence, hash) VALUES ($1, 0, $2) \
                 ON CONFLICT (tenant_id) DO UPDATE SET sequence = audit_heads.sequence \
                 RETURNING sequence, hash",
            )
            .bind(tenant.as_str())
            .bind(GENESIS)
            .fetch_one(&mut *self.tx)
            .await?;
            let mut last: (i64, String) = (head.try_get("sequence")?, head.try_get("hash")?);
            let mut records = Vec::with_capacity(entries.len());
            for e in entries {
                let record = e.chained(at, (last.0, &last.1));
                last = (record.sequence, record.hash.clone());
                records.push(record);
            }
            // A transaction carries a few dozen records at most (a group's writes).
            let together = store.writes_in_with();
            let first = if together { 4 } else { 1 };
            let insert = format!(
                "INSERT INTO audit_records (tenant_id, sequence, at, kind, actor, actor_name, \
                 subject, data, prev_hash, hash) VALUES {}",
                value_rows(first, records.len(), RECORD_COLS)
            );
            // PostgreSQL moves the head in the same statement.
            let sql = if together {
                format!(
                    "WITH r AS ({insert} RETURNING 1) UPDATE audit_heads SET sequence = $2, \
                     hash = $3 WHERE tenant_id = $1"
                )
            } else {
                insert
            };
            let mut query = sqlx::query(&sql);
            if together {
                query = query
                    .bind(tenant.as_str())
                    .bind(last.0)
                    .bind(last.1.as_str());
            }
            for r in &records {
                query = query
                    .bind(r.tenant.as_str())
                    .bind(r.sequence)
                    .bind(to_millis(r.at))
                    .bind(r.kind.as_str())
                    .bind(r.actor.as_str())
                    .bind(r.actor_name.as_deref())
                    .bind(r.subject.as_str())
                    .bind(to_json(&r.data)?)
                    .bind(r.prev_hash.as_str())
                    .bind(r.hash.as_str());
            }
            query.execute(&mut *self.tx).await?;
            if !together {
                sqlx::query("UPDATE audit_heads SET sequence = $2, hash = $3 WHERE tenant_id = $1")
                    .bind(tenant.as_str())
                    .bind(last.0)
                    .bind(last.1.as_str())
                    .execute(&mut *self.tx)
                    .await?;
            }
        }
        Ok(())
    }
}
