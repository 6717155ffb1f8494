use super::{Store, StoreResult};
use crate::domain::token::{Principal, Role, TokenInfo};
use crate::domain::TokenId;

impl Store {
    /// Stores a new token (only its hash) and returns it with the secret, shown once.
    /// Frontend and runtime tokens need a tenant (`Invalid` on `tenant` otherwise); admin
    /// tokens take none.
    pub async fn create_token(
        &self,
        role: Role,
        tenant: Option<&str>,
    ) -> StoreResult<(TokenInfo, String)> {
        todo!()
    }

    /// The principal of an unrevoked token with this secret hash.
    pub async fn authenticate(&self, secret_hash: &str) -> StoreResult<Option<Principal>> {
        todo!()
    }

    pub async fn list_tokens(&self) -> StoreResult<Vec<TokenInfo>> {
        todo!()
    }

    /// Marks the token revoked (`NotFound("token")` if unknown); revoking twice is a no-op.
    pub async fn revoke_token(&self, id: &TokenId) -> StoreResult<TokenInfo> {
        todo!()
    }
}
