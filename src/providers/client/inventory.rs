//! Inventory and checkpoint retention calls: `GET /v3/sandboxes`, `GET /v3/checkpoints`,
//! `DELETE /v3/checkpoints/{checkpoint_id}`, and bounded walks over every page.

use std::collections::HashSet;
use std::future::Future;

use reqwest::Method;

use super::super::wire::{
    CheckpointDeleteReceipt, CheckpointItem, CheckpointPage, InventoryItem, InventoryPage,
    InventoryQuery, INVENTORY_MAX_LIMIT,
};
use super::{check_segment, CallOptions, ProviderCallError, ProviderClient, UncertainKind};

fn listing_path(base: &str, query: &InventoryQuery) -> Result<String, ProviderCallError> {
    let qs = serde_urlencoded::to_string(query)
        .map_err(|e| ProviderCallError::Config(format!("inventory query: {e}")))?;
    Ok(if qs.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{qs}")
    })
}

impl ProviderClient {
    /// `GET /v3/sandboxes?cursor=&limit=`: one page of the sandboxes the provider holds.
    pub async fn list_sandboxes(
        &self,
        query: &InventoryQuery,
        opts: &CallOptions,
    ) -> Result<InventoryPage, ProviderCallError> {
        let path = listing_path("v3/sandboxes", query)?;
        let t = self.config.timeouts.inventory;
        self.call(Method::GET, &path, None::<&()>, None, t, opts)
            .await
    }

    /// `GET /v3/checkpoints?cursor=&limit=`: one page of the checkpoints the provider stores.
    pub async fn list_checkpoints(
        &self,
        query: &InventoryQuery,
        opts: &CallOptions,
    ) -> Result<CheckpointPage, ProviderCallError> {
        let path = listing_path("v3/checkpoints", query)?;
        let t = self.config.timeouts.inventory;
        self.call(Method::GET, &path, None::<&()>, None, t, opts)
            .await
    }

    /// `DELETE /v3/checkpoints/{checkpoint_id}` (idempotent: `deleted: false` when it was
    /// already gone). A receipt naming another checkpoint is `Uncertain(InconsistentReceipt)`.
    pub async fn delete_checkpoint(
        &self,
        checkpoint_id: &str,
        opts: &CallOptions,
    ) -> Result<CheckpointDeleteReceipt, ProviderCallError> {
        check_segment("checkpoint id", checkpoint_id)?;
        let path = format!("v3/checkpoints/{checkpoint_id}");
        let t = self.config.timeouts.checkpoint_delete;
        let receipt: CheckpointDeleteReceipt = self
            .call(Method::DELETE, &path, None::<&()>, None, t, opts)
            .await?;
        if receipt.checkpoint_id != checkpoint_id {
            return Err(ProviderCallError::uncertain(
                UncertainKind::InconsistentReceipt,
                format!(
                    "the receipt is for checkpoint `{}`, but `{checkpoint_id}` was asked",
                    receipt.checkpoint_id.chars().take(80).collect::<String>()
                ),
            ));
        }
        Ok(receipt)
    }

    /// Every sandbox the provider holds, walking the pages at the largest page size. Fails
    /// with `Uncertain(InconsistentPaging)` on a cursor that comes back or after
    /// `max_inventory_pages` pages.
    pub async fn inventory_all(
        &self,
        opts: &CallOptions,
    ) -> Result<Vec<InventoryItem>, ProviderCallError> {
        self.walk(|q| async move {
            let page = self.list_sandboxes(&q, opts).await?;
            Ok((page.items, page.next_cursor))
        })
        .await
    }

    /// Every checkpoint the provider stores, walked like [`ProviderClient::inventory_all`].
    pub async fn checkpoints_all(
        &self,
        opts: &CallOptions,
    ) -> Result<Vec<CheckpointItem>, ProviderCallError> {
        self.walk(|q| async move {
            let page = self.list_checkpoints(&q, opts).await?;
            Ok((page.items, page.next_cursor))
        })
        .await
    }

    async fn walk<T, F, Fut>(&self, mut fetch: F) -> Result<Vec<T>, ProviderCallError>
    where
        F: FnMut(InventoryQuery) -> Fut,
        Fut: Future<Output = Result<(Vec<T>, Option<String>), ProviderCallError>>,
    {
        let max_pages = self.config.max_inventory_pages;
        let mut items = Vec::new();
        let mut seen = HashSet::new();
        let mut cursor = None;
        for _ in 0..max_pages {
            let query = InventoryQuery {
                cursor: cursor.take(),
                limit: Some(INVENTORY_MAX_LIMIT),
            };
            let (page, next) = fetch(query).await?;
            items.extend(page);
            let Some(next) = next else {
                return Ok(items);
            };
            if !seen.insert(next.clone()) {
                return Err(ProviderCallError::uncertain(
                    UncertainKind::InconsistentPaging,
                    format!(
                        "the provider gave the cursor `{}` twice",
                        next.chars().take(80).collect::<String>()
                    ),
                ));
            }
            cursor = Some(next);
        }
        Err(ProviderCallError::uncertain(
            UncertainKind::InconsistentPaging,
            format!("the listing did not end within {max_pages} pages"),
        ))
    }
}
