use crate::clock::to_millis;
use crate::config::{SealError, Sealer};
use crate::domain::audit::{AuditEntry, SYSTEM_CHAIN};
use crate::domain::interaction::Resolver;
use crate::domain::validate;
use crate::store::engine::records::ProviderRecord;
use crate::store::engine::rows::{self, PROVIDER_COLS};
use crate::store::engine::{Store, StoreError, StoreResult};

fn provider_context(provider_id: &str) -> String {
    format!("provider:{provider_id}")
}

fn unsealable_token(provider_id: &str, e: SealError) -> StoreError {
    StoreError::Unavailable(format!("the token of provider `{provider_id}`: {e}"))
}

impl Store {
    /// Seals provider tokens with `sealer` from now on; the first call wins.
    pub fn use_sealer(&self, sealer: Sealer) -> bool {
        self.inner.sealer.set(sealer).is_ok()
    }

    pub(in crate::store) fn sealer(&self) -> &Sealer {
        static NONE: Sealer = Sealer::none();
        self.inner.sealer.get().unwrap_or(&NONE)
    }

    /// The record with its token opened.
    fn opened(&self, mut record: ProviderRecord) -> StoreResult<ProviderRecord> {
        record.token = self
            .sealer()
            .open(&provider_context(&record.provider_id), &record.token)
            .map_err(|e| unsealable_token(&record.provider_id, e))?;
        Ok(record)
    }

    /// Rewrites every provider token that is not sealed under the first key (or, with no key,
    /// not plain); returns how many were rewritten. Run after a key rotation.
    pub async fn reseal_provider_tokens(&self) -> StoreResult<usize> {
        let rows = sqlx::query("SELECT provider_id, token FROM providers")
            .fetch_all(&self.inner.write)
            .await?;
        let mut rewritten = 0;
        for row in &rows {
            let (id, stored) = (rows::text(row, "provider_id")?, rows::text(row, "token")?);
            if self.sealer().is_current(&stored) {
                continue;
            }
            let plain = self
                .sealer()
                .open(&provider_context(&id), &stored)
                .map_err(|e| unsealable_token(&id, e))?;
            let sealed = self
                .sealer()
                .seal(&provider_context(&id), &plain)
                .map_err(|e| unsealable_token(&id, e))?;
            let done = sqlx::query(
                "UPDATE providers SET token = $1 WHERE provider_id = $2 AND token = $3",
            )
            .bind(&sealed)
            .bind(&id)
            .bind(&stored)
            .execute(&self.inner.write)
            .await?;
            rewritten += usize::try_from(done.rows_affected()).unwrap_or(0);
        }
        Ok(rewritten)
    }

    /// Inserts or replaces (same `provider_id`) a provider (audited in the system chain,
    /// never its token).
    pub async fn upsert_provider(
        &self,
        provider_id: &str,
        base_url: &str,
        token: &str,
        capabilities: &serde_json::Value,
        by: impl Into<Resolver>,
    ) -> StoreResult<ProviderRecord> {
        let by = by.into();
        validate::name("provider_id", provider_id)?;
        validate::text("base_url", base_url)?;
        validate::text("token", token)?;
        let sealed = self
            .sealer()
            .seal(&provider_context(provider_id), token)
            .map_err(|e| unsealable_token(provider_id, e))?;
        let sql = format!(
            "INSERT INTO providers (provider_id, base_url, token, capabilities, created_at, \
             updated_at) VALUES ($1, $2, $3, $4, $5, $5) \
             ON CONFLICT (provider_id) DO UPDATE SET base_url = excluded.base_url, \
             token = excluded.token, capabilities = excluded.capabilities, \
             updated_at = excluded.updated_at \
             RETURNING {PROVIDER_COLS}"
        );
        let mut tx = self.write_tx().await?;
        let written = async {
            let row = sqlx::query(&sql)
                .bind(provider_id)
                .bind(base_url)
                .bind(&sealed)
                .bind(rows::to_json(capabilities)?)
                .bind(to_millis(tx.now))
                .fetch_one(tx.conn())
                .await?;
            tx.audit(AuditEntry {
                tenant: SYSTEM_CHAIN.to_owned(),
                kind: "provider.registered",
                actor: by.id,
                actor_name: by.name,
                subject: provider_id.to_owned(),
                data: serde_json::json!({ "base_url": base_url, "capabilities": capabilities }),
            });
            rows::provider(&row)
        }
        .await;
        let record = tx.finish(self, written).await?;
        self.opened(record)
    }

    pub async fn list_providers(&self) -> StoreResult<Vec<ProviderRecord>> {
        self.list_providers_as_stored()
            .await?
            .into_iter()
            .map(|r| self.opened(r))
            .collect()
    }

    /// The providers with their tokens as stored (perhaps sealed): for listings, which never
    /// show a token, so that a missing key does not hide which providers exist.
    pub async fn list_providers_as_stored(&self) -> StoreResult<Vec<ProviderRecord>> {
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
        row.as_ref()
            .map(|r| self.opened(rows::provider(r)?))
            .transpose()
    }
}
