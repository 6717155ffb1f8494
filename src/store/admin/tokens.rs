use chrono::{DateTime, Utc};

use crate::clock::to_millis;
use crate::domain::audit::{AuditEntry, SYSTEM_CHAIN};
use crate::domain::interaction::Resolver;
use crate::domain::token::{self, new_secret, NewToken, Principal, Role, TokenInfo};
use crate::domain::validate::{self, ValidationError};
use crate::domain::TokenId;
use crate::store::admin::idempotency::IdempotencyClaim;
use crate::store::engine::rows::{self, TOKEN_COLS};
use crate::store::engine::{Store, StoreError, StoreResult};

/// The status and stored answer a replay of a token's creation gets, from the token.
pub type TokenReplay<'a> = &'a (dyn Fn(&TokenInfo) -> (u16, Vec<u8>) + Sync);

impl Store {
    /// Stores a new token (only its hash) and returns it with the secret, shown once.
    /// Frontend and runtime tokens need a tenant (`Invalid` on `tenant` otherwise); admin
    /// tokens take none.
    pub async fn create_token(
        &self,
        role: Role,
        tenant: Option<&str>,
        expires_at: Option<DateTime<Utc>>,
    ) -> StoreResult<(TokenInfo, String)> {
        let new = NewToken {
            role,
            tenant: tenant.map(str::to_owned),
            expires_at,
            name: None,
        };
        self.create_token_keyed(&new, "cli", None).await
    }

    /// [`Self::create_token`] under an `Idempotency-Key`: `replay` gives the status and stored
    /// answer (never the secret) kept under the key in the transaction that creates the token.
    pub async fn create_token_keyed(
        &self,
        new: &NewToken,
        by: impl Into<Resolver>,
        key: Option<(&IdempotencyClaim, TokenReplay<'_>)>,
    ) -> StoreResult<(TokenInfo, String)> {
        let by = by.into();
        let (role, tenant, expires_at) = (new.role, new.tenant.as_deref(), new.expires_at);
        if let Some(name) = &new.name {
            token::check_name(name)?;
        }
        match (role.tenant_bound(), tenant) {
            (false, Some(_)) => {
                return Err(ValidationError::new(
                    "tenant",
                    format!("{role} tokens are not bound to a tenant"),
                )
                .into())
            }
            (true, None) => {
                return Err(ValidationError::new(
                    "tenant",
                    "is required for frontend and runtime tokens",
                )
                .into())
            }
            (_, Some(t)) => validate::name("tenant", t)?,
            (false, None) => {}
        }
        if expires_at.is_some_and(|at| at <= self.now()) {
            return Err(ValidationError::new("ttl_seconds", "must lie in the future").into());
        }
        let (secret, hash) = new_secret();
        let info = TokenInfo {
            id: TokenId::new(),
            role,
            tenant_id: tenant.map(str::to_owned),
            created_at: self.now(),
            revoked_at: None,
            expires_at,
            name: new.name.clone(),
        };
        let mut tx = self.write_tx().await?;
        let result: StoreResult<()> = async {
            sqlx::query(
                "INSERT INTO tokens (id, role, tenant_id, secret_hash, created_at, expires_at, \
                 name) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(info.id.as_str())
            .bind(role.as_str())
            .bind(info.tenant_id.as_deref())
            .bind(&hash)
            .bind(to_millis(info.created_at))
            .bind(expires_at.map(to_millis))
            .bind(info.name.as_deref())
            .execute(tx.conn())
            .await?;
            tx.audit(token_record(&info, "token.created", &by));
            if let Some((claim, replay)) = key {
                let (status, stored) = replay(&info);
                self.idempotency_stored_in(&mut tx, claim, status, &stored)
                    .await?;
            }
            Ok(())
        }
        .await;
        tx.finish(self, result).await?;
        Ok((info, secret))
    }

    /// The principal of an unrevoked, unexpired token with this secret hash.
    pub async fn authenticate(&self, secret_hash: &str) -> StoreResult<Option<Principal>> {
        let sql = format!(
            "SELECT {TOKEN_COLS} FROM tokens WHERE secret_hash = $1 AND revoked_at IS NULL \
             AND (expires_at IS NULL OR expires_at > $2)"
        );
        let row = sqlx::query(&sql)
            .bind(secret_hash)
            .bind(to_millis(self.now()))
            .fetch_optional(&self.inner.read)
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let info = rows::token(&row)?;
        Ok(Some(Principal {
            token_id: info.id,
            role: info.role,
            tenant_id: info.tenant_id,
            expires_at: info.expires_at,
            name: info.name,
        }))
    }

    /// Whether the token is neither revoked nor expired (false for an unknown one).
    pub async fn token_is_live(&self, id: &TokenId) -> StoreResult<bool> {
        let row = sqlx::query(
            "SELECT id FROM tokens WHERE id = $1 AND revoked_at IS NULL \
             AND (expires_at IS NULL OR expires_at > $2)",
        )
        .bind(id.as_str())
        .bind(to_millis(self.now()))
        .fetch_optional(&self.inner.read)
        .await?;
        Ok(row.is_some())
    }

    pub async fn list_tokens(&self) -> StoreResult<Vec<TokenInfo>> {
        let sql = format!("SELECT {TOKEN_COLS} FROM tokens ORDER BY created_at, id");
        sqlx::query(&sql)
            .fetch_all(&self.inner.read)
            .await?
            .iter()
            .map(rows::token)
            .collect()
    }

    /// Marks the token revoked (`NotFound("token")` if unknown); revoking twice is a no-op.
    /// Revokes a token (again: no change); the first revocation is audited.
    pub async fn revoke_token(
        &self,
        id: &TokenId,
        by: impl Into<Resolver>,
    ) -> StoreResult<TokenInfo> {
        let by = by.into();
        let mut tx = self.write_tx().await?;
        let result = async {
            let sql = format!(
                "UPDATE tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL \
                 RETURNING {TOKEN_COLS}"
            );
            let revoked = sqlx::query(&sql)
                .bind(id.as_str())
                .bind(to_millis(tx.now))
                .fetch_optional(tx.conn())
                .await?;
            if let Some(row) = revoked {
                let info = rows::token(&row)?;
                tx.audit(token_record(&info, "token.revoked", &by));
                return Ok(info);
            }
            let sql = format!("SELECT {TOKEN_COLS} FROM tokens WHERE id = $1");
            match sqlx::query(&sql)
                .bind(id.as_str())
                .fetch_optional(tx.conn())
                .await?
            {
                Some(row) => rows::token(&row),
                None => Err(StoreError::NotFound("token")),
            }
        }
        .await;
        tx.finish(self, result).await
    }
}

/// The audit record of a token's creation or revocation, in its tenant's chain (admin and
/// metrics tokens: the system chain). Never its secret.
fn token_record(info: &TokenInfo, kind: &'static str, by: &Resolver) -> AuditEntry {
    AuditEntry {
        tenant: info
            .tenant_id
            .clone()
            .unwrap_or_else(|| SYSTEM_CHAIN.to_owned()),
        kind,
        actor: by.id.clone(),
        actor_name: by.name.clone(),
        subject: info.id.to_string(),
        data: serde_json::json!({
            "role": info.role,
            "name": info.name,
            "expires_at": info.expires_at,
        }),
    }
}
