//! What the reconciler reads and holds: the runs and records that inventory items name, and
//! a lease that lets one replica at a time do work that must not run twice at once.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};

use crate::clock::to_millis;
use crate::domain::resource::ExecutionResourceRecord;
use crate::domain::run::RunState;
use crate::domain::validate;
use crate::store::claims::runtime::lease_expiry;
use crate::store::engine::{Store, StoreResult};

/// A run as the reconciler judges its compute: its state, tenant, last change (the end of a
/// terminal run) and its record, if it has one.
#[derive(Debug, Clone)]
pub struct RunView {
    pub state: RunState,
    pub tenant_id: String,
    pub updated_at: DateTime<Utc>,
    pub record: Option<ExecutionResourceRecord>,
}

impl Store {
    /// The runs among `run_ids` that exist, with their records; unknown ids are left out.
    pub async fn reconcile_view(&self, run_ids: &[&str]) -> StoreResult<HashMap<String, RunView>> {
        let mut conn = self.inner.read.acquire().await?;
        let mut out = HashMap::with_capacity(run_ids.len());
        for ids in run_ids.chunks(200) {
            let runs = self.load_runs(&mut conn, ids, false).await?;
            let mut records = self.load_resources(&mut conn, ids, false).await?;
            for (id, rec) in runs {
                let record = records.remove(&id);
                out.insert(
                    id,
                    RunView {
                        state: rec.run.state,
                        tenant_id: rec.tenant_id,
                        updated_at: rec.run.updated_at,
                        record,
                    },
                );
            }
        }
        Ok(out)
    }

    /// Takes or renews the lease `name` for `holder` until now + `ttl` if it is free, expired
    /// or already `holder`'s; false when another holder has it.
    pub async fn singleton_lease(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> StoreResult<bool> {
        validate::name("holder", holder)?;
        let mut tx = self.write_tx().await?;
        let now = tx.now;
        let result = async {
            let expires_at = to_millis(lease_expiry(now, ttl)?);
            let taken = sqlx::query(
                "INSERT INTO singleton_leases (name, holder, expires_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, \
                   expires_at = excluded.expires_at \
                 WHERE singleton_leases.holder = excluded.holder \
                   OR singleton_leases.expires_at <= $4 \
                 RETURNING holder",
            )
            .bind(name)
            .bind(holder)
            .bind(expires_at)
            .bind(to_millis(now))
            .fetch_optional(tx.conn())
            .await?;
            Ok(taken.is_some())
        }
        .await;
        tx.finish(self, result).await
    }
}
