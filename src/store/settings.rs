use super::rows;
use super::{Store, StoreResult};

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
}
