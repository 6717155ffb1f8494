//! What an operator allows one tenant beyond the defaults, and the rules that read it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::sandbox::{NetworkMode, ResolvedSandboxSpec};

/// A tenant's allowances; a tenant the operator never set one for has none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantPolicy {
    /// Its runs may ask for `network: host`: the host's network, with every service listening
    /// on the host's loopback (the database among them). Default: false.
    #[serde(default)]
    pub allow_host_network: bool,
}

/// A tenant's policy as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TenantPolicyInfo {
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub tenant: String,
    pub allow_host_network: bool,
    /// When an operator last set it; null when it was never set (the defaults).
    pub updated_at: Option<DateTime<Utc>>,
}

/// `sandbox.network_not_allowed`: the spec asks for a network the tenant was not allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tenant `{tenant}` may not ask for `network: host` (the host's network reaches the \
     service, its database and every loopback port); an operator allows it with \
     `PUT /v1/admin/tenants/{tenant}/policy`"
)]
pub struct NetworkNotAllowed {
    pub tenant: String,
}

impl NetworkNotAllowed {
    pub const FIELD: &'static str = "sandbox_spec.resources.network";
}

/// Whether `spec` needs a tenant allowance for its network (only `host` does).
pub fn needs_network_allowance(spec: &ResolvedSandboxSpec) -> bool {
    spec.resources.network == Some(NetworkMode::Host)
}

/// A spec may ask for `network: host` only when its tenant's policy allows it.
pub fn check_network(
    tenant: &str,
    spec: &ResolvedSandboxSpec,
    policy: &TenantPolicy,
) -> Result<(), NetworkNotAllowed> {
    if needs_network_allowance(spec) && !policy.allow_host_network {
        return Err(NetworkNotAllowed {
            tenant: tenant.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::sandbox::{Resources, WorkspaceMode, SPEC_VERSION_V3};

    fn spec(network: Option<NetworkMode>) -> ResolvedSandboxSpec {
        ResolvedSandboxSpec {
            spec_version: SPEC_VERSION_V3.into(),
            provider_id: "local".into(),
            spec_hash: format!("sha256:{}", "a".repeat(64)),
            policy_hash: format!("sha256:{}", "b".repeat(64)),
            workspace_mode: WorkspaceMode::Isolated,
            host_workspace: None,
            lifecycle: Default::default(),
            resources: Resources {
                network,
                ..Resources::default()
            },
            metadata: serde_json::json!({}),
        }
    }

    #[test]
    fn host_networking_needs_the_tenants_allowance() {
        let none = TenantPolicy::default();
        let allowed = TenantPolicy {
            allow_host_network: true,
        };
        let host = spec(Some(NetworkMode::Host));
        let refused = check_network("acme", &host, &none).unwrap_err();
        assert_eq!(refused.tenant, "acme");
        assert!(refused.to_string().contains("network: host"));
        assert_eq!(check_network("acme", &host, &allowed), Ok(()));
        for network in [None, Some(NetworkMode::None)] {
            assert_eq!(check_network("acme", &spec(network), &none), Ok(()));
            assert!(!needs_network_allowance(&spec(network)));
        }
    }

    #[test]
    fn a_policy_takes_only_known_fields_and_defaults_to_nothing() {
        let p: TenantPolicy = serde_json::from_str("{}").unwrap();
        assert!(!p.allow_host_network);
        assert!(serde_json::from_str::<TenantPolicy>(r#"{"allow_all": true}"#).is_err());
    }
}
