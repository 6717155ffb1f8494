//! Runtime claims and the per-run lease that fences every runtime write.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::interaction::Checkpoint;
use super::run::Run;
use super::sandbox::SandboxRef;
use super::LeaseId;
use sagents_text_enum::text_enum;

text_enum! {
    pub enum ClaimKind as "claim kind" {
        Start => "start",
        Resume => "resume",
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Lease {
    pub lease_id: LeaseId,
    pub fencing_token: i64,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ExpectedHashes {
    pub resolved_spec_hash: String,
    pub spec_hash: Option<String>,
    pub policy_hash: Option<String>,
}

/// What a sandbox-backed claim carries so the runtime can operate in its sandbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClaimSandbox {
    pub r#ref: SandboxRef,
    pub generation: i64,
    /// Lets the runtime exec in the sandbox until the lease ends. Empty in an
    /// `Idempotency-Key` replay (no grant is stored): heartbeat the lease for a fresh one.
    pub grant: String,
    /// The provider's generation of the compute, which the grant names (internal).
    #[serde(skip)]
    pub grant_generation: Option<i64>,
    /// The id the service registered the sandbox's provider under: the grant's audience
    /// (internal).
    #[serde(skip)]
    pub grant_audience: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Claim {
    pub kind: ClaimKind,
    pub run: Run,
    pub lease: Lease,
    pub checkpoint: Option<Checkpoint>,
    pub expected: ExpectedHashes,
    pub sandbox: Option<ClaimSandbox>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClaimResponse {
    pub claims: Vec<Claim>,
}

/// The lease columns of a run as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseState {
    pub lease_id: Option<String>,
    pub fencing_token: Option<i64>,
    pub expires_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the lease is lost: the fencing token is stale or the lease has expired")]
pub struct LeaseLost;

impl LeaseState {
    /// A write on behalf of `token` may land only while that token holds a live lease.
    pub fn check(&self, token: i64, now: DateTime<Utc>) -> Result<(), LeaseLost> {
        match (self.fencing_token, self.expires_at) {
            (Some(held), Some(exp)) if held == token && exp > now => Ok(()),
            _ => Err(LeaseLost),
        }
    }

    pub fn is_live(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|exp| exp > now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    #[test]
    fn only_the_current_unexpired_token_may_write() {
        let now = Utc::now();
        let lease = LeaseState {
            lease_id: Some("lea_x".into()),
            fencing_token: Some(7),
            expires_at: Some(now + Duration::seconds(30)),
        };
        assert!(lease.check(7, now).is_ok());
        assert_eq!(lease.check(6, now), Err(LeaseLost));
        assert_eq!(lease.check(7, now + Duration::seconds(30)), Err(LeaseLost));
        let released = LeaseState {
            lease_id: None,
            fencing_token: None,
            expires_at: None,
        };
        assert_eq!(released.check(7, now), Err(LeaseLost));
        assert!(!released.is_live(now));
    }
}
