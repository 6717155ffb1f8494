//! What a caller scoped to a tenant may see.

use sqlx::AnyConnection;

use super::error::StoreError;
use super::error::StoreResult;
use super::rows::{self, SESSION_COLS};
use crate::domain::session::Session;

/// Whether a caller scoped to `tenant` (None: admin) may see something owned by `owner`.
pub(in crate::store) fn sees(tenant: Option<&str>, owner: &str) -> bool {
    tenant.is_none_or(|t| t == owner)
}

/// The session, if it exists and the caller may see it.
pub(in crate::store) async fn find_session(
    conn: &mut AnyConnection,
    tenant: Option<&str>,
    id: &str,
) -> StoreResult<Session> {
    let sql = format!("SELECT {SESSION_COLS} FROM sessions s WHERE s.id = $1");
    let row = sqlx::query(&sql).bind(id).fetch_optional(conn).await?;
    match row {
        Some(row) => {
            let session = rows::session(&row)?;
            if sees(tenant, &session.tenant_id) {
                Ok(session)
            } else {
                Err(StoreError::NotFound("session"))
            }
        }
        None => Err(StoreError::NotFound("session")),
    }
}
