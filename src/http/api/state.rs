//! What every handler can reach.

use std::sync::Arc;

use crate::clock::Clock;
use crate::config::Config;
use crate::lifecycle::clients::ProviderClients;
use crate::metrics::Metrics;
use crate::notify::ChangeHub;
use crate::providers::grant::GrantSigner;
use crate::service::shutdown::Shutdown;
use crate::service::stream_limits::StreamRegistry;
use crate::service::token_cache::TokenCache;
use crate::store::Store;

/// What every handler can reach. One reference count to clone: a request clones it
/// several times on its way through the router.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

pub struct Shared {
    pub store: Store,
    pub config: Arc<Config>,
    pub hub: Arc<ChangeHub>,
    pub metrics: Arc<Metrics>,
    pub clock: Arc<dyn Clock>,
    pub shutdown: Shutdown,
    pub tokens: Arc<TokenCache>,
    /// The event streams each token holds open here.
    pub streams: Arc<StreamRegistry>,
    /// Signs sandbox grants; the same on every replica.
    pub grants: Arc<GrantSigner>,
    /// Clients of the registered sandbox providers, shared by claims and the coordinator.
    pub providers: Arc<ProviderClients>,
}
