use std::collections::HashMap;

use sqlx::any::AnyRow;

use crate::clock::to_millis;
use crate::domain::audit::AuditEntry;
use crate::domain::interaction::{OnExpiry, Resolver};
use crate::domain::tenant::{ExpiryDefault, TenantPolicy, TenantPolicyInfo};
use crate::domain::validate;
use crate::store::engine::params::{bind_ids, params};
use crate::store::engine::tx::WriteTx;
use crate::store::engine::{rows, Store, StoreResult};

const POLICY_COLS: &str = "tenant_id, allow_host_network, expires_in_seconds, \
     warn_before_seconds, on_expiry, expiry_decision, updated_at";

fn expiry_default(row: &AnyRow) -> StoreResult<Option<ExpiryDefault>> {
    let Some(expires_in_seconds) = rows::opt_int(row, "expires_in_seconds")? else {
        return Ok(None);
    };
    let on_expiry = match rows::opt_text(row, "on_expiry")? {
        Some(_) => Some(OnExpiry {
            action: rows::enumeration(row, "on_expiry")?,
            decision: rows::opt_text(row, "expiry_decision")?,
        }),
        None => None,
    };
    Ok(Some(ExpiryDefault {
        expires_in_seconds,
        warn_before_seconds: rows::opt_int(row, "warn_before_seconds")?,
        on_expiry,
    }))
}

impl Store {
    /// The policy an operator set for `tenant`, else the defaults (nothing allowed).
    pub async fn tenant_policy(&self, tenant: &str) -> StoreResult<TenantPolicyInfo> {
        validate::name("tenant", tenant)?;
        let sql = format!("SELECT {POLICY_COLS} FROM tenant_policies WHERE tenant_id = $1");
        let row = sqlx::query(&sql)
            .bind(tenant)
            .fetch_optional(&self.inner.read)
            .await?;
        match row {
            Some(row) => Ok(TenantPolicyInfo {
                tenant: tenant.to_owned(),
                allow_host_network: rows::flag(&row, "allow_host_network")?,
                interaction_expiry: expiry_default(&row)?,
                updated_at: Some(rows::time(&row, "updated_at")?),
            }),
            None => Ok(TenantPolicyInfo {
                tenant: tenant.to_owned(),
                allow_host_network: TenantPolicy::default().allow_host_network,
                interaction_expiry: None,
                updated_at: None,
            }),
        }
    }

    /// The default deadlines of `tenants` that have one, in `tx`.
    pub(in crate::store) async fn expiry_defaults(
        &self,
        tx: &mut WriteTx,
        tenants: &[&str],
    ) -> StoreResult<HashMap<String, ExpiryDefault>> {
        if tenants.is_empty() {
            return Ok(HashMap::new());
        }
        let sql = format!(
            "SELECT {POLICY_COLS} FROM tenant_policies \
             WHERE expires_in_seconds IS NOT NULL AND tenant_id IN ({})",
            params(1, tenants.len())
        );
        let found = bind_ids(sqlx::query(&sql), tenants)
            .fetch_all(tx.conn())
            .await?;
        let mut defaults = HashMap::new();
        for row in &found {
            if let Some(d) = expiry_default(row)? {
                defaults.insert(rows::text(row, "tenant_id")?, d);
            }
        }
        Ok(defaults)
    }

    /// Sets `tenant`'s whole policy (audited in its chain).
    pub async fn put_tenant_policy(
        &self,
        tenant: &str,
        policy: &TenantPolicy,
        by: impl Into<Resolver>,
    ) -> StoreResult<TenantPolicyInfo> {
        validate::name("tenant", tenant)?;
        policy.validate()?;
        let by = by.into();
        let mut tx = self.write_tx().await?;
        let now = tx.now;
        let expiry = policy.interaction_expiry.as_ref();
        let on_expiry = expiry.and_then(|d| d.on_expiry.as_ref());
        let written = sqlx::query(
            "INSERT INTO tenant_policies (tenant_id, allow_host_network, expires_in_seconds, \
             warn_before_seconds, on_expiry, expiry_decision, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (tenant_id) DO UPDATE SET \
             allow_host_network = excluded.allow_host_network, \
             expires_in_seconds = excluded.expires_in_seconds, \
             warn_before_seconds = excluded.warn_before_seconds, \
             on_expiry = excluded.on_expiry, expiry_decision = excluded.expiry_decision, \
             updated_at = excluded.updated_at",
        )
        .bind(tenant)
        .bind(i64::from(policy.allow_host_network))
        .bind(expiry.map(|d| d.expires_in_seconds))
        .bind(expiry.and_then(|d| d.warn_before_seconds))
        .bind(on_expiry.map(|p| p.action.as_str()))
        .bind(on_expiry.and_then(|p| p.decision.clone()))
        .bind(to_millis(now))
        .execute(tx.conn())
        .await;
        if written.is_ok() {
            tx.audit(AuditEntry {
                tenant: tenant.to_owned(),
                kind: "tenant_policy.changed",
                actor: by.id,
                actor_name: by.name,
                subject: tenant.to_owned(),
                data: serde_json::to_value(policy).unwrap_or_default(),
            });
        }
        tx.finish(self, written.map_err(Into::into)).await?;
        Ok(TenantPolicyInfo {
            tenant: tenant.to_owned(),
            allow_host_network: policy.allow_host_network,
            interaction_expiry: policy.interaction_expiry.clone(),
            updated_at: Some(crate::clock::from_millis(to_millis(now))),
        })
    }
}
