//! The reconciler: one replica at a time (under a singleton lease) compares each provider's
//! inventory with the records, terminates compute that no record owns, reopens records that
//! say released while their sandbox still runs, and deletes checkpoints nothing can restore
//! from. Every action is checked again against a fresh inspect and a fresh record first.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::Duration;

use super::clients::ProviderClients;
use super::reconcile::{self, Verdict};
use crate::domain::resource::{ResourceState, RunEffect};
use crate::domain::sandbox::ReleaseDisposition;
use crate::domain::RunId;
use crate::providers::client::{CallOptions, ProviderCallError, ProviderClient};
use crate::providers::codes;
use crate::providers::wire::{
    InventoryItem, InventoryLabels, ReleaseRequest, ReleaseSpec, RequestContext,
};
use crate::store::{RunView, Store, StoreError};

/// The name of the reconciler's singleton lease.
pub const LEASE: &str = "reconciler";

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Provider(#[from] ProviderCallError),
}

/// What one pass did, summed over the providers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassReport {
    pub providers: usize,
    /// Providers that list no inventory (or could not be read).
    pub skipped: usize,
    pub failed: usize,
    pub orphans_terminated: usize,
    pub records_reopened: usize,
    pub checkpoints_deleted: usize,
}

pub struct Reconciler {
    store: Store,
    clients: Arc<ProviderClients>,
    holder: String,
    /// A sandbox of an existing run younger than this is not judged (its bind may be in
    /// flight).
    pub min_age: Duration,
    pub checkpoint_grace: Duration,
}

impl Reconciler {
    pub fn new(store: Store, clients: Arc<ProviderClients>, holder: impl Into<String>) -> Self {
        Reconciler {
            store,
            clients,
            holder: holder.into(),
            min_age: Duration::minutes(10),
            checkpoint_grace: Duration::hours(24),
        }
    }

    /// A pass if this replica holds (or takes) the reconciler lease for `ttl`; `None` when
    /// another replica has it.
    pub async fn tick(&self, ttl: Duration) -> Result<Option<PassReport>, ReconcileError> {
        if !self.store.singleton_lease(LEASE, &self.holder, ttl).await? {
            return Ok(None);
        }
        Ok(Some(self.run_once().await?))
    }

    /// One pass over every registered provider.
    pub async fn run_once(&self) -> Result<PassReport, ReconcileError> {
        let mut report = PassReport::default();
        let counters = &self.store.metrics().lifecycle;
        for provider in self.store.list_providers().await? {
            report.providers += 1;
            let id = provider.provider_id;
            match self.provider_pass(&id, &mut report).await {
                Ok(true) => counters.reconciler_pass("ok"),
                Ok(false) => {
                    report.skipped += 1;
                    counters.reconciler_pass("skipped");
                    tracing::info!(provider_id = %id, "the provider lists no inventory: not reconciled");
                }
                Err(e) => {
                    report.failed += 1;
                    counters.reconciler_pass("failed");
                    tracing::warn!(provider_id = %id, error = %e, "reconciling the provider failed");
                }
            }
        }
        Ok(report)
    }

    /// False when the provider does not offer an inventory.
    async fn provider_pass(
        &self,
        provider_id: &str,
        report: &mut PassReport,
    ) -> Result<bool, ReconcileError> {
        let client = self.clients.get(provider_id).await?;
        let opts = CallOptions::default();
        let caps = client.capabilities(&opts).await?;
        if !caps.supports_inventory {
            return Ok(false);
        }
        let items = client.inventory_all(&opts).await?;
        let views = self.views(items.iter().map(|i| &i.labels)).await?;
        let now = self.store.now();
        for item in &items {
            match reconcile::judge(
                item,
                views.get(&item.labels.owner_run_id),
                now,
                self.min_age,
            ) {
                Verdict::Keep => {}
                Verdict::Orphan(why) => {
                    if self.terminate_orphan(&client, item, why).await? {
                        report.orphans_terminated += 1;
                    }
                }
                Verdict::FalselyReleased => {
                    if self.reopen(&client, item).await? {
                        report.records_reopened += 1;
                    }
                }
            }
        }
        if caps.supports_checkpoint_delete {
            report.checkpoints_deleted += self.expire_checkpoints(&client).await?;
        }
        Ok(true)
    }

    /// The runs that listed items name, by id.
    async fn views(
        &self,
        labels: impl Iterator<Item = &InventoryLabels>,
    ) -> Result<HashMap<String, RunView>, ReconcileError> {
        let owners: Vec<&str> = labels.map(|l| l.owner_run_id.as_str()).collect();
        Ok(self.store.reconcile_view(&owners).await?)
    }

    /// The sandbox still holds compute and its run's fresh view still disowns it.
    async fn still(
        &self,
        client: &ProviderClient,
        item: &InventoryItem,
    ) -> Result<Option<Verdict>, ReconcileError> {
        let info = match client
            .inspect(&item.r#ref.sandbox_id, &CallOptions::default())
            .await
        {
            Ok(info) => info,
            Err(ProviderCallError::Refused { error, .. })
                if codes::is_sandbox_not_found(&error) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e.into()),
        };
        if !info.state.holds_compute() {
            return Ok(None);
        }
        let owner = item.labels.owner_run_id.as_str();
        let views: HashMap<String, RunView> = self.store.reconcile_view(&[owner]).await?;
        let mut fresh = item.clone();
        fresh.state = info.state;
        Ok(Some(reconcile::judge(
            &fresh,
            views.get(owner),
            self.store.now(),
            self.min_age,
        )))
    }

    async fn terminate_orphan(
        &self,
        client: &ProviderClient,
        item: &InventoryItem,
        why: &str,
    ) -> Result<bool, ReconcileError> {
        if !matches!(self.still(client, item).await?, Some(Verdict::Orphan(_))) {
            return Ok(false);
        }
        let sandbox_id = &item.r#ref.sandbox_id;
        let req = ReleaseRequest {
            request: ReleaseSpec {
                r#ref: item.r#ref.clone(),
                disposition: ReleaseDisposition::Terminate.into(),
                reason: "reconcile".into(),
                expected_revision: None,
                idempotency_key: format!("reconcile:{sandbox_id}:g{}", item.generation),
            },
            context: RequestContext {
                actor: format!("sagents:reconciler:{}", self.holder),
                ..RequestContext::default()
            },
        };
        let receipt = client.release(&req, &CallOptions::default()).await?;
        let counters = &self.store.metrics().lifecycle;
        if receipt.compute_released {
            counters.reconciler_action("orphan_terminated");
            tracing::warn!(%sandbox_id, owner_run_id = %item.labels.owner_run_id, why, "terminated a sandbox no record owns");
            Ok(true)
        } else {
            counters.reconciler_action("orphan_unconfirmed");
            Ok(false)
        }
    }

    async fn reopen(
        &self,
        client: &ProviderClient,
        item: &InventoryItem,
    ) -> Result<bool, ReconcileError> {
        if self.still(client, item).await? != Some(Verdict::FalselyReleased) {
            return Ok(false);
        }
        let Ok(run_id) = item.labels.owner_run_id.parse::<RunId>() else {
            return Ok(false);
        };
        let holder = format!("reconciler-{}", self.holder);
        let lease = match self
            .store
            .lease_run(&run_id, &holder, Duration::seconds(30))
            .await
        {
            Ok(lease) => lease,
            Err(StoreError::Conflict { .. }) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        let result = async {
            let record = self.store.get_resource(&run_id).await?;
            let same = record
                .sandbox_ref
                .as_ref()
                .is_some_and(|r| r.sandbox_id == item.r#ref.sandbox_id);
            if record.state != ResourceState::Released || !same {
                return Ok(false);
            }
            let Ok(next) = reconcile::reopen(record, self.store.now()) else {
                return Ok(false);
            };
            self.store
                .save_resource(&run_id, lease.fencing_token, &next, RunEffect::None)
                .await?;
            Ok::<_, ReconcileError>(true)
        }
        .await;
        if let Err(e) = self.store.release_lease(&run_id, &lease).await {
            tracing::warn!(%run_id, error = %e, "could not hand the reconciler's lease back");
        }
        if matches!(result, Ok(true)) {
            self.store
                .metrics()
                .lifecycle
                .reconciler_action("record_reopened");
            tracing::error!(%run_id, sandbox_id = %item.r#ref.sandbox_id, "a released record's sandbox still runs: reopened");
        }
        result
    }

    async fn expire_checkpoints(&self, client: &ProviderClient) -> Result<usize, ReconcileError> {
        let opts = CallOptions::default();
        let items = client.checkpoints_all(&opts).await?;
        let views = self.views(items.iter().map(|i| &i.labels)).await?;
        let now = self.store.now();
        let mut deleted = 0;
        for item in &items {
            let run = views.get(&item.labels.owner_run_id);
            if !reconcile::checkpoint_expired(item, run, now, self.checkpoint_grace) {
                continue;
            }
            let receipt = client
                .delete_checkpoint(&item.checkpoint.checkpoint_id, &opts)
                .await?;
            if receipt.deleted {
                deleted += 1;
                self.store
                    .metrics()
                    .lifecycle
                    .reconciler_action("checkpoint_deleted");
            }
        }
        Ok(deleted)
    }
}
