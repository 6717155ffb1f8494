//! What the provider lets a caller ask for at all: the host's network only where the operator
//! allowed it.

use super::engine::Engine;
use super::error::ApiError;
use sagents_plugin_api::spec::{NetworkMode, ResolvedSandboxSpec};

impl Engine {
    /// Refuses `network: host` unless the provider was started with `--allow-host-network`:
    /// the host's network reaches the service, its database and every loopback port.
    pub(super) fn check_network(&self, spec: &ResolvedSandboxSpec) -> Result<(), ApiError> {
        if spec.resources.network() == NetworkMode::Host && !self.cfg.allow_host_network {
            return Err(ApiError::invalid(
                "sandbox.host_network_refused",
                "resources.network `host` is not allowed on this provider (it was started without --allow-host-network); ask for `none`",
            ));
        }
        Ok(())
    }
}
