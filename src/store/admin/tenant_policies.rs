use crate::clock::to_millis;
use crate::domain::tenant::{TenantPolicy, TenantPolicyInfo};
use crate::domain::validate;
use crate::store::engine::{rows, Store, StoreResult};

impl Store {
    /// The policy an operator set for `tenant`, else the defaults (nothing allowed).
    pub async fn tenant_policy(&self, tenant: &str) -> StoreResult<TenantPolicyInfo> {
        validate::name("tenant", tenant)?;
        let row = sqlx::query(
            "SELECT allow_host_network, updated_at FROM tenant_policies WHERE tenant_id = $1",
        )
        .bind(tenant)
        .fetch_optional(&self.inner.read)
        .await?;
        match row {
            Some(row) => Ok(TenantPolicyInfo {
                tenant: tenant.to_owned(),
                allow_host_network: rows::flag(&row, "allow_host_network")?,
                updated_at: Some(rows::time(&row, "updated_at")?),
            }),
            None => Ok(TenantPolicyInfo {
                tenant: tenant.to_owned(),
                allow_host_network: TenantPolicy::default().allow_host_network,
                updated_at: None,
            }),
        }
    }

    /// Sets `tenant`'s whole policy.
    pub async fn put_tenant_policy(
        &self,
        tenant: &str,
        policy: &TenantPolicy,
    ) -> StoreResult<TenantPolicyInfo> {
        validate::name("tenant", tenant)?;
        let now = self.now();
        sqlx::query(
            "INSERT INTO tenant_policies (tenant_id, allow_host_network, updated_at) \
             VALUES ($1, $2, $3) ON CONFLICT (tenant_id) DO UPDATE SET \
             allow_host_network = excluded.allow_host_network, updated_at = excluded.updated_at",
        )
        .bind(tenant)
        .bind(i64::from(policy.allow_host_network))
        .bind(to_millis(now))
        .execute(&self.inner.write)
        .await?;
        Ok(TenantPolicyInfo {
            tenant: tenant.to_owned(),
            allow_host_network: policy.allow_host_network,
            updated_at: Some(crate::clock::from_millis(to_millis(now))),
        })
    }
}
