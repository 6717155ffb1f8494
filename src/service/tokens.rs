//! Token rules shared by the CLI and the admin API.

use crate::domain::token::{Role, DEFAULT_TENANT};
use crate::domain::validate::{self, ValidationError};

/// The tenant a new token is bound to: frontend and runtime tokens default to `default`;
/// admin tokens see every tenant and take none.
pub fn tenant_for(role: Role, tenant: Option<&str>) -> Result<Option<String>, ValidationError> {
    match (role, tenant) {
        (Role::Admin, None) => Ok(None),
        (Role::Admin, Some(_)) => Err(ValidationError::new(
            "tenant",
            "admin tokens are not bound to a tenant",
        )),
        (_, tenant) => {
            let tenant = tenant.unwrap_or(DEFAULT_TENANT);
            validate::name("tenant", tenant)?;
            Ok(Some(tenant.to_owned()))
        }
    }
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
