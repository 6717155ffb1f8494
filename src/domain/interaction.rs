//! Interaction requests, suspensions and agent checkpoints.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{CheckpointId, InteractionId, RunId, SuspensionId};
use sagents_text_enum::text_enum;

text_enum! {
    pub enum InteractionType as "interaction type" {
        Approval => "approval",
        Permission => "permission",
        UserInput => "user_input",
        Credential => "credential",
        Elicitation => "elicitation",
    }
}

text_enum! {
    pub enum InteractionStatus as "interaction status" {
        Pending => "pending",
        Resolved => "resolved",
        Expired => "expired",
        Cancelled => "cancelled",
    }
}

text_enum! {
    pub enum SuspensionReason as "suspension reason" {
        ApprovalRequired => "approval_required",
        PermissionRequired => "permission_required",
        InputRequired => "input_required",
        ManualPause => "manual_pause",
        ExternalEvent => "external_event",
        ResourceWait => "resource_wait",
        PolicyHold => "policy_hold",
    }
}

impl SuspensionReason {
    /// Only a policy hold is an unsafe pause (compute is kept, see the lifecycle rules).
    pub fn is_unsafe(self) -> bool {
        self == SuspensionReason::PolicyHold
    }
}

text_enum! {
    pub enum SuspensionStatus as "suspension status" {
        Pending => "pending",
        Resolving => "resolving",
        Resolved => "resolved",
        Cancelled => "cancelled",
    }
}

text_enum! {
    pub enum ExpiryAction as "expiry action" {
        Fail => "fail",
        Cancel => "cancel",
        Decide => "decide",
    }
}

/// Who a resolution made by an interaction's deadline is recorded as resolved by.
pub const RESOLVED_BY_EXPIRY: &str = "system:expiry";

/// What happens when a pending interaction's deadline passes: its run fails (`fail`, the
/// default), is cancelled (`cancel`), or goes on with `decision`, one of the interaction's
/// allowed decisions, recorded as resolved by `system:expiry` (`decide`). On the wire:
/// `{"action": "fail"}`, `{"action": "cancel"}`, `{"action": "decide", "decision": "deny"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "OnExpiryWire", into = "OnExpiryWire")]
pub struct OnExpiry {
    pub action: ExpiryAction,
    /// With `decide` (and only then): the decision the deadline makes.
    pub decision: Option<String>,
}

impl Default for OnExpiry {
    fn default() -> Self {
        Self {
            action: ExpiryAction::Fail,
            decision: None,
        }
    }
}

/// `OnExpiry` as sent and served: one shape per action, so a decision goes with `decide` only.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum OnExpiryWire {
    #[schema(title = "OnExpiryFail")]
    Fail,
    #[schema(title = "OnExpiryCancel")]
    Cancel,
    #[schema(title = "OnExpiryDecide")]
    Decide {
        #[schema(min_length = 1, max_length = 128)]
        decision: String,
    },
}

impl From<OnExpiryWire> for OnExpiry {
    fn from(wire: OnExpiryWire) -> Self {
        let (action, decision) = match wire {
            OnExpiryWire::Fail => (ExpiryAction::Fail, None),
            OnExpiryWire::Cancel => (ExpiryAction::Cancel, None),
            OnExpiryWire::Decide { decision } => (ExpiryAction::Decide, Some(decision)),
        };
        Self { action, decision }
    }
}

impl From<OnExpiry> for OnExpiryWire {
    fn from(policy: OnExpiry) -> Self {
        match (policy.action, policy.decision) {
            (ExpiryAction::Decide, Some(decision)) => OnExpiryWire::Decide { decision },
            (ExpiryAction::Cancel, _) => OnExpiryWire::Cancel,
            _ => OnExpiryWire::Fail,
        }
    }
}

impl utoipa::PartialSchema for OnExpiry {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        <OnExpiryWire as utoipa::PartialSchema>::schema()
    }
}

impl ToSchema for OnExpiry {
    fn name() -> std::borrow::Cow<'static, str> {
        "OnExpiry".into()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Resolution {
    pub decision: String,
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    /// The justification the person gave with the reply, if any.
    pub comment: Option<String>,
    /// Who answered: `token:<id>`, or `system:expiry` for a deadline's decision.
    pub resolved_by: String,
    /// The display name of the token that answered, as it was then.
    pub resolved_by_name: Option<String>,
    pub resolved_at: DateTime<Utc>,
}

/// Who answers an interaction: a stable id and the display name it has now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolver {
    pub id: String,
    pub name: Option<String>,
}

impl From<&str> for Resolver {
    fn from(id: &str) -> Self {
        Self {
            id: id.to_owned(),
            name: None,
        }
    }
}

/// What a reply's `payload_sha256` binds to: the SHA-256, in lowercase hex, of the payload in
/// its canonical form: compact JSON (no whitespace), object keys ordered by their UTF-8 bytes,
/// strings escaped only where JSON requires it (`"`, `\`, control characters), numbers as
/// sent (integers as digits, others in their shortest round-trip form). It is the form the
/// service stores, so it is also served beside every payload.
pub fn payload_digest(payload: &serde_json::Value) -> String {
    use sha2::{Digest, Sha256};
    let canonical = serde_json::to_vec(payload).unwrap_or_default();
    hex::encode(Sha256::digest(canonical))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InteractionRequest {
    pub id: InteractionId,
    pub run_id: RunId,
    pub interaction_type: InteractionType,
    pub status: InteractionStatus,
    pub allowed_decisions: Vec<String>,
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    /// `payload_digest(payload)`: a reply may send it back to bind its answer to this payload.
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub payload_sha256: String,
    pub revision: i64,
    pub requested_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    /// What the deadline does if nobody answers first.
    pub on_expiry: OnExpiry,
    pub resolution: Option<Resolution>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Suspension {
    pub id: SuspensionId,
    pub run_id: RunId,
    pub reason: SuspensionReason,
    pub status: SuspensionStatus,
    pub checkpoint_id: CheckpointId,
    pub interaction_id: Option<InteractionId>,
    pub requested_at: DateTime<Utc>,
    pub resolved_at: Option<DateTime<Utc>>,
}

/// The agent's own checkpoint (not the sandbox's). Immutable once written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Checkpoint {
    pub id: CheckpointId,
    pub run_id: RunId,
    pub sequence: i64,
    pub codec_version: String,
    #[schema(value_type = Object)]
    pub state: serde_json::Value,
    pub resolved_spec_hash: String,
    pub created_at: DateTime<Utc>,
}

#[cfg(test)]
mod digest_tests {
    use serde_json::json;

    use super::payload_digest;

    #[test]
    fn the_digest_is_of_compact_json_with_sorted_keys() {
        let sent: serde_json::Value = serde_json::from_str(
            "{ \"b\": [1, 2.5, \"x\"],\n \"a\": {\"\\u00e9\": null, \"Z\": true} }",
        )
        .unwrap();
        let canonical = r#"{"a":{"Z":true,"é":null},"b":[1,2.5,"x"]}"#;
        use sha2::{Digest, Sha256};
        assert_eq!(
            payload_digest(&sent),
            hex::encode(Sha256::digest(canonical))
        );
        assert_eq!(
            payload_digest(&sent),
            payload_digest(&json!({"b": [1, 2.5, "x"], "a": {"Z": true, "é": null}}))
        );
        assert_ne!(
            payload_digest(&sent),
            payload_digest(&json!({"b": [1, 2.5, "x"]}))
        );
    }
}
