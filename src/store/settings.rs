use super::{Store, StoreResult};

impl Store {
    /// Returns the stored value of `key`, storing `init` first if there is none (race-safe:
    /// every replica ends up with the same value).
    pub async fn setting_or_init(&self, key: &str, init: &str) -> StoreResult<String> {
        todo!()
    }
}
