//! The inbox: a tenant's pending interactions across its sessions, newest first.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::clock::to_millis;
use crate::domain::snapshot::PendingInteraction;
use crate::domain::{InteractionId, SessionId};
use crate::store::engine::rows::{self, INTERACTION_COLS};
use crate::store::engine::{Store, StoreResult};

const MAX_PAGE: u32 = 1000;

/// One pending interaction and the session it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InboxItem {
    pub session_id: SessionId,
    /// As in the session's snapshot (`pending_interactions`).
    pub interaction: PendingInteraction,
}

/// Where a page ends: the last interaction's request time (Unix ms) and id, as
/// `<ms>.<interaction id>`; opaque to clients, but of a shape the schema states exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxCursor {
    requested_at_ms: i64,
    id: InteractionId,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a cursor this service issued")]
pub struct BadCursor;

impl InboxCursor {
    pub fn after(item: &InboxItem) -> Self {
        Self {
            requested_at_ms: to_millis(item.interaction.requested_at),
            id: item.interaction.id.clone(),
        }
    }
}

impl fmt::Display for InboxCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.requested_at_ms, self.id)
    }
}

impl FromStr for InboxCursor {
    type Err = BadCursor;

    fn from_str(s: &str) -> Result<Self, BadCursor> {
        let (ms, id) = s.split_once('.').ok_or(BadCursor)?;
        if !(1..=15).contains(&ms.len()) || !ms.bytes().all(|b| b.is_ascii_digit()) {
            return Err(BadCursor);
        }
        Ok(Self {
            requested_at_ms: ms.parse().map_err(|_| BadCursor)?,
            id: id.parse().map_err(|_| BadCursor)?,
        })
    }
}

impl Store {
    /// The tenant's pending interactions, newest first (request time, then id), at most
    /// `limit`, after `cursor` when given.
    pub async fn list_inbox(
        &self,
        tenant: &str,
        cursor: Option<&InboxCursor>,
        limit: u32,
    ) -> StoreResult<Vec<InboxItem>> {
        let limit = i64::from(limit.clamp(1, MAX_PAGE));
        // Two statements rather than `$2 IS NULL OR …`, so each plans as one index range.
        let page = match cursor {
            None => format!(
                "SELECT {INTERACTION_COLS} FROM interactions i \
                 WHERE i.tenant_id = $1 AND i.status = 'pending' \
                 ORDER BY i.requested_at DESC, i.id DESC LIMIT $2"
            ),
            Some(_) => format!(
                "SELECT {INTERACTION_COLS} FROM interactions i \
                 WHERE i.tenant_id = $1 AND i.status = 'pending' \
                 AND (i.requested_at, i.id) < ($3, $4) \
                 ORDER BY i.requested_at DESC, i.id DESC LIMIT $2"
            ),
        };
        let mut query = sqlx::query(&page).bind(tenant).bind(limit);
        if let Some(c) = cursor {
            query = query.bind(c.requested_at_ms).bind(c.id.as_str());
        }
        query
            .fetch_all(&self.inner.read)
            .await?
            .iter()
            .map(|row| {
                Ok(InboxItem {
                    session_id: SessionId::from_trusted(rows::text(row, "session_id")?),
                    interaction: rows::pending_interaction(row)?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::from_millis;

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        let c = InboxCursor {
            requested_at_ms: to_millis(from_millis(1_700_000_000_123)),
            id: InteractionId::new(),
        };
        assert_eq!(c.to_string().parse::<InboxCursor>(), Ok(c.clone()));
        for bad in [
            "",
            "x",
            "!!!",
            "12.int_zz",
            "-1.int_0192f0c1a2b37c4d8e9f0a1b2c3d4e5f",
            "+1.int_0192f0c1a2b37c4d8e9f0a1b2c3d4e5f",
            &"a".repeat(300),
        ] {
            assert_eq!(bad.parse::<InboxCursor>(), Err(BadCursor), "{bad}");
        }
    }
}
