//! The inventory and checkpoint retention checks: `inventory_lists_sandboxes`,
//! `inventory_pages_without_repeats`, `inventory_lists_checkpoints`,
//! `checkpoint_delete_idempotent`, `restore_refused_after_checkpoint_delete`.

use std::collections::HashSet;

use super::super::client::{CallOptions, ProviderCallError};
use super::super::wire::{
    CheckpointItem, CheckpointRef, InventoryItem, InventoryLabels, InventoryQuery, RestoreRequest,
    SandboxHandle, SandboxState, INVENTORY_MAX_LIMIT,
};
use super::super::wire_spec::ReleaseDisposition as D;
use super::{context, e, result, CheckResult, Checker, Outcome, TENANT};

const MAX_PAGES: usize = 10_000;

/// One page of a listing: its items and the cursor to the next.
type Fetched<T> = Result<(Vec<T>, Option<String>), ProviderCallError>;

impl Checker {
    pub(super) async fn inventory_checks(&self) -> Vec<CheckResult> {
        vec![
            result(
                "inventory_lists_sandboxes",
                self.inventory_lists_sandboxes().await,
            ),
            result(
                "inventory_pages_without_repeats",
                self.inventory_pages_without_repeats().await,
            ),
            result(
                "inventory_lists_checkpoints",
                self.inventory_lists_checkpoints().await,
            ),
            result(
                "checkpoint_delete_idempotent",
                self.checkpoint_delete_idempotent().await,
            ),
            result(
                "restore_refused_after_checkpoint_delete",
                self.restore_refused_after_checkpoint_delete().await,
            ),
        ]
    }

    fn lacks(&self, capability: &str) -> Outcome {
        Ok(format!(
            "skipped: the provider does not advertise {capability}"
        ))
    }

    fn labels(&self) -> InventoryLabels {
        InventoryLabels {
            owner_run_id: self.owner(),
            tenant_id: TENANT.into(),
        }
    }

    /// Walks a listing with `limit`; fails on a page over the limit, an item listed twice, a
    /// cursor given twice or a walk that does not end. Returns the items and the page count.
    async fn walk<T, Fut>(
        &self,
        what: &str,
        limit: u32,
        id_of: impl Fn(&T) -> String,
        fetch: impl Fn(InventoryQuery) -> Fut,
    ) -> Result<(Vec<T>, usize), String>
    where
        Fut: std::future::Future<Output = Fetched<T>>,
    {
        let (mut items, mut ids, mut cursors) = (Vec::new(), HashSet::new(), HashSet::new());
        let mut cursor = None;
        for pages in 1..=MAX_PAGES {
            let query = InventoryQuery {
                cursor: cursor.take(),
                limit: Some(limit),
            };
            let (page, next) = fetch(query).await.map_err(|x| e(what, x))?;
            if page.len() > limit as usize {
                return Err(format!(
                    "{what} answered {} items to limit={limit}",
                    page.len()
                ));
            }
            for item in page {
                let id = id_of(&item);
                if !ids.insert(id.clone()) {
                    return Err(format!("{what} listed `{id}` twice (limit={limit})"));
                }
                items.push(item);
            }
            let Some(next) = next else {
                return Ok((items, pages));
            };
            if !cursors.insert(next.clone()) {
                return Err(format!("{what} gave the same cursor twice (limit={limit})"));
            }
            cursor = Some(next);
        }
        Err(format!("{what} did not end within {MAX_PAGES} pages"))
    }

    async fn sandboxes(&self, limit: u32) -> Result<(Vec<InventoryItem>, usize), String> {
        let opts = CallOptions::default();
        let fetch = |q: InventoryQuery| {
            let opts = opts.clone();
            async move {
                let p = self.client.list_sandboxes(&q, &opts).await?;
                Ok((p.items, p.next_cursor))
            }
        };
        let id_of = |i: &InventoryItem| i.r#ref.sandbox_id.clone();
        self.walk("GET /v3/sandboxes", limit, id_of, fetch).await
    }

    async fn checkpoints(&self) -> Result<Vec<CheckpointItem>, String> {
        let opts = CallOptions::default();
        let fetch = |q: InventoryQuery| {
            let opts = opts.clone();
            async move {
                let p = self.client.list_checkpoints(&q, &opts).await?;
                Ok((p.items, p.next_cursor))
            }
        };
        let id_of = |i: &CheckpointItem| i.checkpoint.checkpoint_id.clone();
        let walked = self.walk("GET /v3/checkpoints", INVENTORY_MAX_LIMIT, id_of, fetch);
        Ok(walked.await?.0)
    }

    async fn listed(&self, h: &SandboxHandle) -> Result<Option<InventoryItem>, String> {
        let (items, _) = self.sandboxes(INVENTORY_MAX_LIMIT).await?;
        Ok(items
            .into_iter()
            .find(|i| i.r#ref.sandbox_id == h.r#ref.sandbox_id))
    }

    /// A fresh checkpoint from `snapshot_and_terminate`.
    async fn checkpoint(&self) -> Result<CheckpointRef, String> {
        let h = self.provision().await?;
        match self
            .release(&h, D::SnapshotAndTerminate, &self.key("inventory-snap"))
            .await
        {
            Ok(r) => r
                .checkpoint
                .ok_or_else(|| "snapshot_and_terminate returned no checkpoint".into()),
            Err(x) => {
                self.cleanup(&h).await;
                Err(x)
            }
        }
    }

    async fn inventory_lists_sandboxes(&self) -> Outcome {
        if !self.caps.supports_inventory {
            return self.lacks("supports_inventory");
        }
        let h = self.provision().await?;
        let outcome = self.listed_then_terminated(&h).await;
        if outcome.is_err() {
            self.cleanup(&h).await;
        }
        outcome
    }

    async fn listed_then_terminated(&self, h: &SandboxHandle) -> Outcome {
        let item = self
            .listed(h)
            .await?
            .ok_or("a provisioned sandbox is not listed")?;
        if item.r#ref != h.r#ref {
            return Err(format!(
                "listed with another ref: {:?}, provision answered {:?}",
                item.r#ref, h.r#ref
            ));
        }
        if item.labels != self.labels() {
            return Err(format!(
                "listed with labels {:?}, provisioned for {:?}",
                item.labels,
                self.labels()
            ));
        }
        if item.state != SandboxState::Ready {
            return Err(format!("a ready sandbox is listed `{}`", item.state));
        }
        if h.generation != 0 && item.generation != h.generation {
            return Err(format!(
                "listed at generation {}, provision answered {}",
                item.generation, h.generation
            ));
        }
        if !self
            .caps
            .supported_release_dispositions
            .contains(&D::Terminate)
        {
            return Ok("listed ready with its ref and labels (no terminate offered)".into());
        }
        self.release(h, D::Terminate, &self.key("inventory-term"))
            .await?;
        match self.listed(h).await? {
            None => Ok("listed ready with its ref and labels; absent after terminate".into()),
            Some(i) if i.state == SandboxState::Terminated => {
                Ok("listed ready with its ref and labels; terminated after terminate".into())
            }
            Some(i) => Err(format!(
                "after terminate the sandbox is listed `{}`",
                i.state
            )),
        }
    }

    async fn inventory_pages_without_repeats(&self) -> Outcome {
        if !self.caps.supports_inventory {
            return self.lacks("supports_inventory");
        }
        let a = self.provision().await?;
        let b = match self.provision().await {
            Ok(b) => b,
            Err(x) => {
                self.cleanup(&a).await;
                return Err(x);
            }
        };
        let outcome = self.pages_of_one(&[&a, &b]).await;
        self.cleanup(&a).await;
        self.cleanup(&b).await;
        outcome
    }

    async fn pages_of_one(&self, ours: &[&SandboxHandle]) -> Outcome {
        let (items, pages) = self.sandboxes(1).await?;
        for h in ours {
            if !items
                .iter()
                .any(|i| i.r#ref.sandbox_id == h.r#ref.sandbox_id)
            {
                return Err(format!(
                    "`{}` was not met walking with limit=1",
                    h.r#ref.sandbox_id
                ));
            }
        }
        Ok(format!(
            "{} sandboxes over {pages} pages of limit=1, none repeated",
            items.len()
        ))
    }

    async fn inventory_lists_checkpoints(&self) -> Outcome {
        if !self.caps.supports_inventory {
            return self.lacks("supports_inventory");
        }
        if !self.offers_snapshot() {
            return self.lacks("snapshot_and_terminate");
        }
        let ckp = self.checkpoint().await?;
        let item = self
            .checkpoints()
            .await?
            .into_iter()
            .find(|i| i.checkpoint.checkpoint_id == ckp.checkpoint_id)
            .ok_or("the checkpoint of a snapshot_and_terminate is not listed")?;
        let c = &item.checkpoint;
        if (&c.sandbox_id, c.size_bytes, &c.digest)
            != (&ckp.sandbox_id, ckp.size_bytes, &ckp.digest)
        {
            return Err(format!("listed as {c:?}, the receipt said {ckp:?}"));
        }
        if item.labels != self.labels() {
            return Err(format!(
                "listed with labels {:?}, its sandbox was for {:?}",
                item.labels,
                self.labels()
            ));
        }
        Ok("listed with its sandbox's labels".into())
    }

    async fn delete(&self, checkpoint_id: &str) -> Result<bool, String> {
        self.client
            .delete_checkpoint(checkpoint_id, &CallOptions::default())
            .await
            .map(|r| r.deleted)
            .map_err(|x| e("DELETE /v3/checkpoints", x))
    }

    async fn checkpoint_delete_idempotent(&self) -> Outcome {
        if !self.caps.supports_checkpoint_delete {
            return self.lacks("supports_checkpoint_delete");
        }
        if !self.offers_snapshot() {
            return self.lacks("snapshot_and_terminate");
        }
        let ckp = self.checkpoint().await?;
        if !self.delete(&ckp.checkpoint_id).await? {
            return Err("the first delete answered deleted: false".into());
        }
        if self.delete(&ckp.checkpoint_id).await? {
            return Err("a second delete answered deleted: true".into());
        }
        if !self.caps.supports_inventory {
            return Ok("deleted: true, then false".into());
        }
        let still = self
            .checkpoints()
            .await?
            .iter()
            .any(|i| i.checkpoint.checkpoint_id == ckp.checkpoint_id);
        if still {
            return Err("a deleted checkpoint is still listed".into());
        }
        Ok("deleted: true, then false; no longer listed".into())
    }

    async fn restore_refused_after_checkpoint_delete(&self) -> Outcome {
        if !self.caps.supports_checkpoint_delete {
            return self.lacks("supports_checkpoint_delete");
        }
        if !self.offers_snapshot() || !self.caps.supports_restore {
            return self.lacks("snapshot_and_terminate with restore");
        }
        let ckp = self.checkpoint().await?;
        self.delete(&ckp.checkpoint_id).await?;
        let req = RestoreRequest {
            checkpoint: ckp,
            spec: self.spec(),
            owner_run_id: self.owner(),
            idempotency_key: self.key("restore-deleted"),
            context: context(),
        };
        match self.client.restore(&req, &CallOptions::default()).await {
            Err(
                ProviderCallError::Refused { status, error }
                | ProviderCallError::Terminal { status, error },
            ) => Ok(format!("refused with {status} {}", error.code)),
            Err(other) => Err(format!(
                "a restore from a deleted checkpoint did not fail clearly (not retryable): {other}"
            )),
            Ok(h) => {
                self.cleanup(&h).await;
                Err("a restore from a deleted checkpoint succeeded".into())
            }
        }
    }
}
