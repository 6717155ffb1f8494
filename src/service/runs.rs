//! Creating a run: its sandbox spec may ask only for what its provider advertises, so a
//! missing disposition is refused at creation instead of costing a snapshot at the first pause,
//! and for the host's network only where an operator allowed its tenant that.

use crate::domain::commands::CreateRun;
use crate::domain::run::Run;
use crate::domain::sandbox::ReleaseDisposition;
use crate::domain::tenant::{self, NetworkNotAllowed, TenantPolicy};
use crate::domain::SessionId;
use crate::providers::wire::Capabilities;
use crate::store::{IdempotencyClaim, Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum CreateRunError {
    /// `sandbox.capability_missing`: the provider does not offer a disposition the spec needs.
    #[error("{message}")]
    CapabilityMissing {
        field: &'static str,
        message: String,
    },
    /// `sandbox.network_not_allowed`: `network: host` without the tenant's allowance.
    #[error(transparent)]
    NetworkNotAllowed(#[from] NetworkNotAllowed),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub async fn create_run(
    store: &Store,
    tenant: &str,
    session_id: &SessionId,
    cmd: &CreateRun,
    key: Option<&IdempotencyClaim>,
) -> Result<Run, CreateRunError> {
    if let Some(spec) = &cmd.sandbox_spec {
        if tenant::needs_network_allowance(spec) {
            let stored = store.tenant_policy(tenant).await?;
            let policy = TenantPolicy {
                allow_host_network: stored.allow_host_network,
                ..TenantPolicy::default()
            };
            tenant::check_network(tenant, spec, &policy)?;
        }
        // An unregistered provider is the store's to refuse, with the field it names.
        if let Some(provider) = store.get_provider(&spec.provider_id).await? {
            let offered = offered_dispositions(&provider.capabilities);
            for (field, needed) in spec.required_dispositions() {
                if !offered.contains(&needed) {
                    return Err(CreateRunError::CapabilityMissing {
                        field,
                        message: format!(
                            "provider `{}` does not offer the `{needed}` disposition this \
                             spec needs (it offers: {})",
                            spec.provider_id,
                            offered
                                .iter()
                                .map(|d| d.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    });
                }
            }
        }
    }
    Ok(store.create_run_keyed(tenant, session_id, cmd, key).await?)
}

/// What the provider advertised at registration; nothing if the stored document is unreadable.
fn offered_dispositions(capabilities: &serde_json::Value) -> Vec<ReleaseDisposition> {
    match serde_json::from_value::<Capabilities>(capabilities.clone()) {
        Ok(caps) => caps
            .supported_release_dispositions
            .into_iter()
            .map(Into::into)
            .collect(),
        Err(e) => {
            tracing::error!(error = %e, "stored provider capabilities are unreadable");
            Vec::new()
        }
    }
}
