//! What an operator allows one tenant beyond the defaults, and the rules that read it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::commands::{NewInteraction, MAX_EXPIRY_SECONDS};
use super::interaction::OnExpiry;
use super::sandbox::{NetworkMode, ResolvedSandboxSpec};
use super::validate::ValidationError;

/// A tenant's allowances; a tenant the operator never set one for has none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantPolicy {
    /// Its runs may ask for `network: host`: the host's network, with every service listening
    /// on the host's loopback (the database among them). Default: false.
    #[serde(default)]
    pub allow_host_network: bool,
    /// The deadline of its interactions that name none. Default: none.
    #[serde(default)]
    pub interaction_expiry: Option<ExpiryDefault>,
}

/// The deadline a tenant's interactions get when they name neither a deadline nor a policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpiryDefault {
    #[schema(minimum = 1, maximum = 31536000)]
    pub expires_in_seconds: i64,
    #[serde(default)]
    #[schema(minimum = 1, maximum = 31536000)]
    pub warn_before_seconds: Option<i64>,
    /// A `decide` policy holds only for interactions that allow its decision; the others
    /// fail at the deadline. Default: `{"action": "fail"}`.
    #[serde(default)]
    pub on_expiry: Option<OnExpiry>,
}

impl TenantPolicy {
    pub fn validate(&self) -> Result<(), ValidationError> {
        let Some(d) = &self.interaction_expiry else {
            return Ok(());
        };
        let seconds = 1..=MAX_EXPIRY_SECONDS;
        let range = || format!("must be 1 to {MAX_EXPIRY_SECONDS}");
        if !seconds.contains(&d.expires_in_seconds) {
            return Err(ValidationError::new(
                "interaction_expiry.expires_in_seconds",
                range(),
            ));
        }
        if d.warn_before_seconds.is_some_and(|w| !seconds.contains(&w)) {
            return Err(ValidationError::new(
                "interaction_expiry.warn_before_seconds",
                range(),
            ));
        }
        let named = d.on_expiry.as_ref().and_then(|p| p.decision.as_deref());
        if named.is_some_and(|n| !(1..=128).contains(&n.chars().count())) {
            return Err(ValidationError::new(
                "interaction_expiry.on_expiry.decision",
                "must be 1 to 128 characters",
            ));
        }
        Ok(())
    }
}

/// `asked` with the tenant's default deadline when it names neither a deadline nor a policy;
/// a default decision the interaction does not allow becomes `fail`.
pub fn with_default_expiry(
    asked: &NewInteraction,
    default: Option<&ExpiryDefault>,
) -> NewInteraction {
    let mut i = asked.clone();
    let Some(d) = default else {
        return i;
    };
    if i.names_expiry() {
        return i;
    }
    i.expires_in_seconds = Some(d.expires_in_seconds);
    i.warn_before_seconds = d.warn_before_seconds;
    i.on_expiry = d.on_expiry.clone().map(|p| match &p.decision {
        Some(decision) if !i.allowed_decisions.contains(decision) => OnExpiry::default(),
        _ => p,
    });
    i
}

/// A tenant's policy as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TenantPolicyInfo {
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub tenant: String,
    pub allow_host_network: bool,
    pub interaction_expiry: Option<ExpiryDefault>,
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
mod expiry_tests {
    use serde_json::json;

    use super::*;
    use crate::domain::interaction::ExpiryAction;
    use crate::domain::interaction::InteractionType;

    fn asked() -> NewInteraction {
        NewInteraction {
            interaction_type: InteractionType::UserInput,
            allowed_decisions: vec!["submit".into()],
            payload: json!({}),
            expires_at: None,
            expires_in_seconds: None,
            warn_before_seconds: None,
            on_expiry: None,
        }
    }

    fn deny_in_a_day() -> ExpiryDefault {
        ExpiryDefault {
            expires_in_seconds: 86_400,
            warn_before_seconds: Some(3_600),
            on_expiry: Some(OnExpiry {
                action: ExpiryAction::Decide,
                decision: Some("deny".into()),
            }),
        }
    }

    #[test]
    fn an_interaction_without_a_deadline_gets_the_tenants() {
        let mut i = asked();
        i.allowed_decisions = vec!["approve".into(), "deny".into()];
        let d = deny_in_a_day();
        let got = with_default_expiry(&i, Some(&d));
        assert_eq!(got.expires_in_seconds, Some(86_400));
        assert_eq!(got.warn_before_seconds, Some(3_600));
        assert_eq!(got.on_expiry, d.on_expiry);
        assert_eq!(with_default_expiry(&i, None), i);
    }

    #[test]
    fn a_default_decision_the_interaction_does_not_allow_fails_instead() {
        let got = with_default_expiry(&asked(), Some(&deny_in_a_day()));
        assert_eq!(got.expires_in_seconds, Some(86_400));
        assert_eq!(got.on_expiry, Some(OnExpiry::default()));
    }

    #[test]
    fn an_interaction_naming_its_own_deadline_or_policy_keeps_it() {
        let mut own = asked();
        own.expires_in_seconds = Some(60);
        assert_eq!(with_default_expiry(&own, Some(&deny_in_a_day())), own);
        let mut policy_only = asked();
        policy_only.on_expiry = Some(OnExpiry::default());
        assert_eq!(
            with_default_expiry(&policy_only, Some(&deny_in_a_day())),
            policy_only
        );
    }

    #[test]
    fn a_default_is_checked_like_an_interactions_own() {
        let mut d = deny_in_a_day();
        let policy = |d: &ExpiryDefault| TenantPolicy {
            allow_host_network: false,
            interaction_expiry: Some(d.clone()),
        };
        assert!(policy(&d).validate().is_ok());
        d.expires_in_seconds = 0;
        assert_eq!(
            policy(&d).validate().unwrap_err().field,
            "interaction_expiry.expires_in_seconds"
        );
        d = deny_in_a_day();
        d.on_expiry = Some(OnExpiry {
            action: ExpiryAction::Decide,
            decision: Some("x".repeat(129)),
        });
        let refused = policy(&d).validate().unwrap_err();
        assert_eq!(refused.field, "interaction_expiry.on_expiry.decision");
    }
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
            ..TenantPolicy::default()
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
