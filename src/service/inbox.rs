//! Inbox reads: a page of the tenant's pending interactions, conditional and long-polled.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::time::Instant;
use utoipa::ToSchema;

use super::shutdown::Shutdown;
use super::snapshot::WaitingGuard;
use crate::metrics::Metrics;
use crate::store::{InboxCursor, InboxItem, Store, StoreResult};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InboxPage {
    /// Newest first.
    pub interactions: Vec<InboxItem>,
    /// Pass as `cursor` for the next page; absent on the last one.
    #[schema(pattern = "^[0-9]{1,15}\\.int_[0-9a-f]{32}$")]
    pub next_cursor: Option<String>,
}

impl InboxPage {
    /// A strong ETag: a digest of the page as served, so it changes exactly when the page does.
    pub fn etag(&self) -> String {
        let body = serde_json::to_vec(self).unwrap_or_default();
        let digest = Sha256::digest(&body);
        format!("\"{}\"", hex::encode(&digest[..16]))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum InboxOutcome {
    /// The caller's ETag is current: `304`.
    NotModified {
        etag: String,
    },
    Current {
        etag: String,
        page: InboxPage,
    },
}

#[derive(Debug, Clone, Copy)]
pub struct InboxRead<'a> {
    pub tenant: &'a str,
    pub cursor: Option<&'a InboxCursor>,
    pub limit: u32,
    pub if_none_match: Option<&'a str>,
    /// How long to hold the request while the ETag stays current (zero: answer at once).
    pub wait: Duration,
}

/// Whether an `If-None-Match` value names `etag` (`*` matches any; weak tags compare too).
pub fn etag_matches(header: &str, etag: &str) -> bool {
    header
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || tag == etag || tag.strip_prefix("W/") == Some(etag))
}

/// Reads the page; with a current `If-None-Match` and a wait, holds the request (one
/// in-memory subscription, no database connection) until the tenant's inbox changes and the
/// page with it, the wait ends or the server shuts down.
pub async fn read_inbox(
    store: &Store,
    shutdown: &Shutdown,
    metrics: &Metrics,
    q: InboxRead<'_>,
) -> StoreResult<InboxOutcome> {
    // Subscribe before reading, so a change between the read and the wait is not missed.
    let mut watch = (q.if_none_match.is_some() && !q.wait.is_zero())
        .then(|| store.hub().subscribe_inbox(q.tenant));
    let mut page = Box::pin(read_page(store, q)).await?;
    let mut etag = page.etag();
    let current = |etag: &str| q.if_none_match.is_some_and(|inm| etag_matches(inm, etag));
    if let Some(watch) = watch.as_mut() {
        let _waiting = WaitingGuard::new(metrics);
        let deadline = Instant::now() + q.wait;
        while current(&etag) && !shutdown.is_triggered() {
            let changed = tokio::select! {
                _ = watch.changed() => true,
                _ = tokio::time::sleep_until(deadline) => false,
                _ = shutdown.wait() => false,
            };
            if !changed {
                break;
            }
            page = Box::pin(read_page(store, q)).await?;
            etag = page.etag();
        }
    }
    Ok(if current(&etag) {
        InboxOutcome::NotModified { etag }
    } else {
        InboxOutcome::Current { etag, page }
    })
}

async fn read_page(store: &Store, q: InboxRead<'_>) -> StoreResult<InboxPage> {
    let interactions = store.list_inbox(q.tenant, q.cursor, q.limit).await?;
    let next_cursor = (interactions.len() == q.limit as usize)
        .then(|| {
            interactions
                .last()
                .map(|i| InboxCursor::after(i).to_string())
        })
        .flatten();
    Ok(InboxPage {
        interactions,
        next_cursor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_match_lists_weak_tags_and_stars() {
        let page = InboxPage {
            interactions: vec![],
            next_cursor: None,
        };
        let etag = page.etag();
        assert_eq!(etag.len(), 34);
        assert!(etag_matches(&etag, &etag));
        assert!(etag_matches(&format!("\"x\", W/{etag}"), &etag));
        assert!(etag_matches("*", &etag));
        assert!(!etag_matches("\"x\"", &etag));
    }
}
