use crate::config::SealError;
use crate::store::engine::{rows, Store, StoreError, StoreResult};

/// The associated data a sealed setting is bound to, so it opens only in its own row.
fn setting_context(key: &str) -> String {
    format!("setting:{key}")
}

fn unsealable_setting(key: &str, e: SealError) -> StoreError {
    StoreError::Unavailable(format!("the setting `{key}`: {e}"))
}

impl Store {
    /// Returns the stored value of `key`, storing `init` first if there is none (race-safe:
    /// every replica ends up with the same value).
    pub async fn setting_or_init(&self, key: &str, init: &str) -> StoreResult<String> {
        let mut tx = self.write_tx().await?;
        let result: StoreResult<_> = async {
            sqlx::query(
                "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
            )
            .bind(key)
            .bind(init)
            .execute(tx.conn())
            .await?;
            let row = sqlx::query("SELECT value FROM settings WHERE key = $1")
                .bind(key)
                .fetch_one(tx.conn())
                .await?;
            rows::text(&row, "value")
        }
        .await;
        tx.finish(self, result).await
    }

    /// Like [`Store::setting_or_init`] for a secret: `init` is stored sealed under the
    /// store's sealer (as given without one), and the value read back is opened, whether it
    /// was stored sealed or, before a key was configured, as given.
    pub async fn secret_setting_or_init(&self, key: &str, init: &str) -> StoreResult<String> {
        let sealed = self
            .sealer()
            .seal(&setting_context(key), init)
            .map_err(|e| unsealable_setting(key, e))?;
        let stored = self.setting_or_init(key, &sealed).await?;
        self.sealer()
            .open(&setting_context(key), &stored)
            .map_err(|e| unsealable_setting(key, e))
    }

    /// Rewrites a secret setting that is not sealed under the first key (or, with no key,
    /// not stored as given); whether it was rewritten (false too when there is none).
    pub async fn reseal_secret_setting(&self, key: &str) -> StoreResult<bool> {
        let row = sqlx::query("SELECT value FROM settings WHERE key = $1")
            .bind(key)
            .fetch_optional(&self.inner.write)
            .await?;
        let Some(row) = row else {
            return Ok(false);
        };
        let stored = rows::text(&row, "value")?;
        if self.sealer().is_current(&stored) {
            return Ok(false);
        }
        let plain = self
            .sealer()
            .open(&setting_context(key), &stored)
            .map_err(|e| unsealable_setting(key, e))?;
        let sealed = self
            .sealer()
            .seal(&setting_context(key), &plain)
            .map_err(|e| unsealable_setting(key, e))?;
        let done = sqlx::query("UPDATE settings SET value = $1 WHERE key = $2 AND value = $3")
            .bind(&sealed)
            .bind(key)
            .bind(&stored)
            .execute(&self.inner.write)
            .await?;
        Ok(done.rows_affected() > 0)
    }
}
