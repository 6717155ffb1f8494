//! The Session Snapshot: the only view a frontend gets. It never carries compute state.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::interaction::{InteractionType, OnExpiry};
use super::run::RunStatus;
use super::{InteractionId, RunId, SessionId};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Snapshot {
    pub session: SnapshotSession,
    pub runs: Vec<SnapshotRun>,
    pub pending_interactions: Vec<PendingInteraction>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SnapshotSession {
    pub id: SessionId,
    pub title: Option<String>,
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
    pub revision: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SnapshotRun {
    pub id: RunId,
    pub parent_run_id: Option<RunId>,
    pub status: RunStatus,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PendingInteraction {
    pub id: InteractionId,
    pub run_id: RunId,
    pub interaction_type: InteractionType,
    pub allowed_decisions: Vec<String>,
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    /// The payload's digest, for a reply to bind its answer to it (`payload_sha256`).
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub payload_sha256: String,
    pub revision: i64,
    pub requested_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    /// What the deadline does if nobody answers first.
    pub on_expiry: OnExpiry,
}

impl Snapshot {
    /// The strong ETag of a snapshot is its session revision.
    pub fn etag(&self) -> String {
        etag_for(self.session.revision)
    }
}

pub fn etag_for(revision: i64) -> String {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(revision);
    let mut etag = String::with_capacity(digits.len() + 2);
    etag.push('"');
    etag.push_str(digits);
    etag.push('"');
    etag
}

/// Whether an `If-None-Match` header value names the given revision (`*` matches any).
pub fn if_none_match_matches(header: &str, revision: i64) -> bool {
    let mut digits = itoa::Buffer::new();
    let current = digits.format(revision);
    header.split(',').map(str::trim).any(|tag| {
        let strong = tag.strip_prefix("W/").unwrap_or(tag);
        tag == "*" || strong.strip_prefix('"').and_then(|t| t.strip_suffix('"')) == Some(current)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_etag_is_the_quoted_revision_and_matches_itself() {
        for revision in [0, 7, 1_234_567_890_123, i64::MAX] {
            let etag = etag_for(revision);
            assert_eq!(etag, format!("\"{revision}\""));
            assert!(if_none_match_matches(&etag, revision));
        }
    }

    #[test]
    fn if_none_match_accepts_lists_and_weak_tags() {
        assert!(if_none_match_matches("\"7\"", 7));
        assert!(if_none_match_matches("\"3\", W/\"7\"", 7));
        assert!(if_none_match_matches("*", 7));
        assert!(!if_none_match_matches("\"6\"", 7));
        assert!(!if_none_match_matches("7", 7));
        assert!(!if_none_match_matches("\"", 7));
        assert!(!if_none_match_matches("\"77\"", 7));
        assert!(if_none_match_matches("\"-1\"", -1));
        assert!(!if_none_match_matches("", 7));
    }
}
