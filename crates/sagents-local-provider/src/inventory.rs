//! What the provider holds: `GET /v3/sandboxes` and `GET /v3/checkpoints`, paged in id
//! order with an opaque cursor naming the last id of the previous page (so a walk never
//! skips or repeats what exists throughout it), and `DELETE /v3/checkpoints/{id}`.

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;

use super::engine::{internal, reconcile, Engine, Entry};
use super::error::ApiError;
use super::state::SandboxRecord;
use sagents_plugin_api::wire::{
    CheckpointDeleteReceipt, CheckpointItem, CheckpointPage, InventoryItem, InventoryLabels,
    InventoryPage, InventoryQuery, INVENTORY_DEFAULT_LIMIT, INVENTORY_MAX_LIMIT,
};

const CURSOR_VERSION: &str = "v1";
const MAX_ID_LEN: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    Sandboxes,
    Checkpoints,
}

impl Listing {
    fn as_str(self) -> &'static str {
        match self {
            Listing::Sandboxes => "sandboxes",
            Listing::Checkpoints => "checkpoints",
        }
    }

    fn id_prefix(self) -> &'static str {
        match self {
            Listing::Sandboxes => "sbx_",
            Listing::Checkpoints => "ckp_",
        }
    }
}

fn valid_id(id: &str, prefix: &str) -> bool {
    id.len() <= MAX_ID_LEN
        && id.strip_prefix(prefix).is_some_and(|rest| {
            !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        })
}

/// A checkpoint id this provider could have made (and that is safe as a file name).
pub fn valid_checkpoint_id(id: &str) -> bool {
    valid_id(id, Listing::Checkpoints.id_prefix())
}

/// The cursor that resumes `listing` after `last_id`.
pub fn cursor(listing: Listing, last_id: &str) -> String {
    hex::encode(format!("{CURSOR_VERSION}:{}:{last_id}", listing.as_str()))
}

fn decode_cursor(listing: Listing, raw: &str) -> Result<String, ApiError> {
    let bad = || {
        ApiError::bad_input(
            "inventory.cursor_invalid",
            format!(
                "cursor is not one this provider gave for GET /v3/{}",
                listing.as_str()
            ),
        )
    };
    let bytes = hex::decode(raw).map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let mut parts = text.splitn(3, ':');
    let (Some(version), Some(kind), Some(id)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    if version != CURSOR_VERSION || kind != listing.as_str() || !valid_id(id, listing.id_prefix()) {
        return Err(bad());
    }
    Ok(id.to_owned())
}

/// A checked query: start after `after`, return at most `limit` items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub after: Option<String>,
    pub limit: usize,
}

impl Page {
    pub fn of(q: &InventoryQuery, listing: Listing) -> Result<Self, ApiError> {
        let limit = q.limit.unwrap_or(INVENTORY_DEFAULT_LIMIT);
        if limit == 0 || limit > INVENTORY_MAX_LIMIT {
            return Err(limit_error());
        }
        let after = match q.cursor.as_deref() {
            None | Some("") => None,
            Some(raw) => Some(decode_cursor(listing, raw)?),
        };
        Ok(Page {
            after,
            limit: limit as usize,
        })
    }
}

fn limit_error() -> ApiError {
    ApiError::bad_input(
        "validation.failed",
        format!("limit must be an integer from 1 to {INVENTORY_MAX_LIMIT}"),
    )
}

/// The query string of a listing as an [`InventoryQuery`]; an empty value counts as absent,
/// any other field is refused.
pub struct InventoryParams(pub InventoryQuery);

impl<S: Send + Sync> FromRequestParts<S> for InventoryParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)
            .map_err(|e| ApiError::bad_input("request.malformed", e.body_text()))?;
        let mut q = InventoryQuery::default();
        for (key, value) in pairs {
            let duplicate =
                || ApiError::bad_input("request.malformed", format!("`{key}` is given twice"));
            match key.as_str() {
                "cursor" | "limit" if value.is_empty() => {}
                "cursor" if q.cursor.is_some() => return Err(duplicate()),
                "cursor" => q.cursor = Some(value),
                "limit" if q.limit.is_some() => return Err(duplicate()),
                "limit" => q.limit = Some(value.parse().map_err(|_| limit_error())?),
                _ => {
                    return Err(ApiError::bad_input(
                        "request.malformed",
                        format!(
                            "unknown query field `{}`; expected `cursor` or `limit`",
                            key.chars().take(40).collect::<String>()
                        ),
                    ))
                }
            }
        }
        Ok(InventoryParams(q))
    }
}

fn item_of(rec: &SandboxRecord) -> InventoryItem {
    InventoryItem {
        r#ref: rec.r#ref.clone(),
        state: rec.state,
        generation: rec.generation,
        labels: InventoryLabels {
            owner_run_id: rec.r#ref.owner_run_id.clone(),
            tenant_id: rec.r#ref.tenant_id.clone(),
        },
        created_at: Some(rec.created_at),
    }
}

impl Engine {
    /// `GET /v3/sandboxes`: every sandbox held, in any state, by id.
    pub async fn list_sandboxes(&self, q: &InventoryQuery) -> Result<InventoryPage, ApiError> {
        let page = Page::of(q, Listing::Sandboxes)?;
        let entries = self.entries_after(page.after.as_deref(), page.limit + 1);
        let next_cursor = (entries.len() > page.limit)
            .then(|| cursor(Listing::Sandboxes, &entries[page.limit - 1].0));
        let mut items = Vec::with_capacity(page.limit);
        for (id, entry) in entries.into_iter().take(page.limit) {
            let slot = match entry {
                Entry::Resident(slot, _) => slot,
                // Read, not kept: a walk of the inventory leaves memory as it was.
                Entry::Terminated => match self.layout.load_sandbox(&id) {
                    Ok(Some(rec)) => {
                        items.push(item_of(&rec));
                        continue;
                    }
                    Ok(None) => continue,
                    Err(e) => return Err(internal("reading the sandbox state", e)),
                },
            };
            let mut rec = slot.lock().await;
            if rec.forgotten {
                continue;
            }
            if reconcile(&mut rec) {
                self.save(&rec)?;
            }
            items.push(item_of(&rec));
        }
        Ok(InventoryPage { items, next_cursor })
    }

    /// `GET /v3/checkpoints`: every recorded checkpoint, by id.
    pub async fn list_checkpoints(&self, q: &InventoryQuery) -> Result<CheckpointPage, ApiError> {
        let page = Page::of(q, Listing::Checkpoints)?;
        let mut ids = self
            .layout
            .checkpoint_ids()
            .map_err(|e| internal("listing the checkpoints", e))?;
        ids.retain(|id| valid_checkpoint_id(id));
        let start = page
            .after
            .as_deref()
            .map_or(0, |after| ids.partition_point(|id| id.as_str() <= after));
        let window = &ids[start..ids.len().min(start + page.limit + 1)];
        let next_cursor = (window.len() > page.limit)
            .then(|| cursor(Listing::Checkpoints, &window[page.limit - 1]));
        let mut items = Vec::with_capacity(page.limit);
        for id in window.iter().take(page.limit) {
            let stored = self
                .layout
                .load_checkpoint(id)
                .map_err(|e| internal("reading the checkpoint", e))?;
            let Some(stored) = stored else { continue };
            let labels = match stored.labels {
                Some(labels) => labels,
                None => self.labels_of(&stored.checkpoint.sandbox_id).await,
            };
            items.push(CheckpointItem {
                checkpoint: stored.checkpoint,
                labels,
            });
        }
        Ok(CheckpointPage { items, next_cursor })
    }

    async fn labels_of(&self, sandbox_id: &str) -> InventoryLabels {
        match self.slot(sandbox_id) {
            Ok(slot) => {
                let rec = slot.lock().await;
                InventoryLabels {
                    owner_run_id: rec.r#ref.owner_run_id.clone(),
                    tenant_id: rec.r#ref.tenant_id.clone(),
                }
            }
            Err(_) => InventoryLabels {
                owner_run_id: String::new(),
                tenant_id: String::new(),
            },
        }
    }

    /// `DELETE /v3/checkpoints/{id}`: removes the archive or manifest and the record, then
    /// the blobs no other checkpoint names; `deleted` is false when nothing was there.
    pub async fn delete_checkpoint(&self, id: &str) -> Result<CheckpointDeleteReceipt, ApiError> {
        if !valid_checkpoint_id(id) {
            return Err(ApiError::bad_input(
                "validation.failed",
                format!(
                    "checkpoint_id must be `ckp_` and up to {MAX_ID_LEN} letters, digits or `_`"
                ),
            ));
        }
        // Restores hold this lock from reading the record to unpacking the archive.
        let _checkpoint = self.locks.lock(&format!("checkpoint:{id}")).await;
        let (layout, owned) = (self.layout.clone(), id.to_owned());
        let deleted = tokio::task::spawn_blocking(move || {
            super::chunks::checkpoints::delete(&layout, &owned)
        })
        .await
        .map_err(|e| internal("deleting the checkpoint", e))?
        .map_err(|e| internal("deleting the checkpoint", e))?;
        self.warm.forget(id);
        Ok(CheckpointDeleteReceipt {
            checkpoint_id: id.to_owned(),
            deleted,
        })
    }
}

#[cfg(test)]
#[path = "inventory_tests.rs"]
mod tests;
