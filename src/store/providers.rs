use chrono::{DateTime, Utc};

use super::rows::{self, PROVIDER_COLS};
use super::{Store, StoreResult};
use crate::clock::to_millis;
use crate::domain::validate;

/// A registered sandbox provider. The token is needed to call it and is never listed (nor
/// printed by `Debug`).
#[derive(Clone, PartialEq)]
pub struct ProviderRecord {
    pub provider_id: String,
    pub base_url: String,
    pub token: String,
    pub capabilities: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl std::fmt::Debug for ProviderRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderRecord")
            .field("provider_id", &self.provider_id)
            .field("base_url", &self.base_url)
            .field("token", &"***")
            .field("capabilities", &self.capabilities)
            .field("created_at", &self.created_at)
            .field("updated_at", &self.updated_at)
            .finish()
    }
}

impl Store {
    /// Inserts or replaces (same `provider_id`) a provider.
    pub async fn upsert_provider(
        &self,
        provider_id: &str,
        base_url: &str,
        token: &str,
        capabilities: &serde_json::Value,
    ) -> StoreResult<ProviderRecord> {
        validate::name("provider_id", provider_id)?;
        validate::text("base_url", base_url)?;
        validate::text("token", token)?;
        let sql = format!(
            "INSERT INTO providers (provider_id, base_url, token, capabilities, created_at, \
             updated_at) VALUES ($1, $2, $3, $4, $5, $5) \
             ON CONFLICT (provider_id) DO UPDATE SET base_url = excluded.base_url, \
             token = excluded.token, capabilities = excluded.capabilities, \
             updated_at = excluded.updated_at \
             RETURNING {PROVIDER_COLS}"
        );
        let row = sqlx::query(&sql)
            .bind(provider_id)
            .bind(base_url)
            .bind(token)
            .bind(rows::to_json(capabilities)?)
            .bind(to_millis(self.now()))
            .fetch_one(&self.inner.write)
            .await?;
        rows::provider(&row)
    }

    pub async fn list_providers(&self) -> StoreResult<Vec<ProviderRecord>> {
        let sql = format!("SELECT {PROVIDER_COLS} FROM providers ORDER BY provider_id");
        sqlx::query(&sql)
            .fetch_all(&self.inner.read)
            .await?
            .iter()
            .map(rows::provider)
            .collect()
    }

    pub async fn get_provider(&self, provider_id: &str) -> StoreResult<Option<ProviderRecord>> {
        let sql = format!("SELECT {PROVIDER_COLS} FROM providers WHERE provider_id = $1");
        let row = sqlx::query(&sql)
            .bind(provider_id)
            .fetch_optional(&self.inner.read)
            .await?;
        row.as_ref().map(rows::provider).transpose()
    }
}
