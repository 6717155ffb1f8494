//! Token rules shared by the CLI and the admin API.

use crate::domain::token::{Role, TokenInfo, DEFAULT_TENANT};
use crate::domain::validate::{self, ValidationError};

/// The tenant a new token is bound to: frontend and runtime tokens default to `default`;
/// admin and metrics tokens see every tenant and take none.
pub fn tenant_for(role: Role, tenant: Option<&str>) -> Result<Option<String>, ValidationError> {
    match (role.tenant_bound(), tenant) {
        (false, None) => Ok(None),
        (false, Some(_)) => Err(ValidationError::new(
            "tenant",
            format!("{role} tokens are not bound to a tenant"),
        )),
        (_, tenant) => {
            let tenant = tenant.unwrap_or(DEFAULT_TENANT);
            validate::name("tenant", tenant)?;
            Ok(Some(tenant.to_owned()))
        }
    }
}

/// One line for an operator: id, role, tenant (`-` for none), created, and revoked or expiry.
pub fn describe(t: &TokenInfo) -> String {
    let when =
        |at: chrono::DateTime<chrono::Utc>| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let status = match (t.revoked_at, t.expires_at) {
        (Some(at), _) => format!("revoked {}", when(at)),
        (None, Some(at)) => format!("expires {}", when(at)),
        (None, None) => "active".to_owned(),
    };
    format!(
        "{}\t{}\t{}\t{}\t{status}\t{}",
        t.id,
        t.role,
        t.tenant_id.as_deref().unwrap_or("-"),
        when(t.created_at),
        t.name.as_deref().unwrap_or("-")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenants_by_role() {
        assert_eq!(tenant_for(Role::Frontend, None), Ok(Some("default".into())));
        assert_eq!(
            tenant_for(Role::Runtime, Some("acme")),
            Ok(Some("acme".into()))
        );
        assert_eq!(tenant_for(Role::Admin, None), Ok(None));
        assert_eq!(
            tenant_for(Role::Admin, Some("acme")).unwrap_err().field,
            "tenant"
        );
        assert_eq!(
            tenant_for(Role::Frontend, Some("a b")).unwrap_err().field,
            "tenant"
        );
    }
}
