use chrono::{DateTime, Utc};

use super::{Store, StoreResult};

/// A registered sandbox provider. The token is needed to call it and is never listed.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderRecord {
    pub provider_id: String,
    pub base_url: String,
    pub token: String,
    pub capabilities: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
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
        todo!()
    }

    pub async fn list_providers(&self) -> StoreResult<Vec<ProviderRecord>> {
        todo!()
    }

    pub async fn get_provider(&self, provider_id: &str) -> StoreResult<Option<ProviderRecord>> {
        todo!()
    }
}
