//! Inputs of the use cases, as the API receives them (JSON bodies) and the store applies them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::interaction::{ExpiryAction, InteractionType, OnExpiry, SuspensionReason};
use super::job::{ExecutionAffinity, JobState, PauseBehavior};
use super::sandbox::{ResolvedSandboxSpec, SpecError};
use super::validate::{self, ValidationError};
use super::{RunId, SessionId};

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    #[serde(default)]
    #[schema(max_length = 1024)]
    pub title: Option<String>,
    #[serde(default = "empty_object")]
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
    #[serde(default)]
    pub parent_session_id: Option<SessionId>,
}

impl CreateSession {
    pub fn validate(&self) -> Result<(), ValidationError> {
        if let Some(title) = &self.title {
            validate::text("title", title)?;
        }
        validate::json_object("metadata", &self.metadata)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRun {
    /// A run of this session, or of its parent session (a sub-agent's run in a child
    /// session): the parent's sandbox is not released while this run's compute exists.
    #[serde(default)]
    pub parent_run_id: Option<RunId>,
    #[serde(default)]
    pub sandbox_spec: Option<ResolvedSandboxSpec>,
    #[schema(pattern = "^sha256:[0-9a-f]{64}$")]
    pub resolved_spec_hash: String,
    #[serde(default = "empty_object")]
    #[schema(value_type = Object)]
    pub input: serde_json::Value,
}

impl CreateRun {
    pub fn validate(&self) -> Result<(), SpecError> {
        if let Some(spec) = &self.sandbox_spec {
            spec.validate()?;
        }
        validate::sha256_digest("resolved_spec_hash", &self.resolved_spec_hash)?;
        Ok(validate::json_object("input", &self.input)?)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewCheckpoint {
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub codec_version: String,
    #[schema(minimum = 0)]
    pub sequence: i64,
    #[schema(value_type = Object)]
    pub state: serde_json::Value,
    #[schema(pattern = "^sha256:[0-9a-f]{64}$")]
    pub resolved_spec_hash: String,
}

/// 1 to 128 characters each, unique, at least one: the rules of `validate::allowed_decisions`.
fn allowed_decisions_schema() -> utoipa::openapi::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    ArrayBuilder::new()
        .items(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(128)),
        )
        .min_items(Some(1))
        .unique_items(true)
        .build()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewInteraction {
    pub interaction_type: InteractionType,
    #[schema(schema_with = allowed_decisions_schema)]
    pub allowed_decisions: Vec<String>,
    #[serde(default = "empty_object")]
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    /// The deadline; or give `expires_in_seconds` instead.
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
    /// The deadline, counted from the suspension's commit.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 31536000)]
    pub expires_in_seconds: Option<i64>,
    /// Announces the deadline this long before it (`interaction.expiring`, once).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 31536000)]
    pub warn_before_seconds: Option<i64>,
    /// What the deadline does; `{"action": "fail"}` when not given.
    #[serde(default)]
    pub on_expiry: Option<OnExpiry>,
}

/// The longest deadline and warning an interaction may name, in seconds (a year).
pub const MAX_EXPIRY_SECONDS: i64 = 31_536_000;

impl NewInteraction {
    /// It names a deadline or a policy of its own (a tenant's default does not apply).
    pub fn names_expiry(&self) -> bool {
        self.expires_at.is_some() || self.expires_in_seconds.is_some() || self.on_expiry.is_some()
    }

    /// The deadline, as an instant, for a suspension committed at `now`.
    pub fn deadline(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.expires_at
            .or_else(|| Some(now + chrono::Duration::seconds(self.expires_in_seconds?)))
    }

    /// When the deadline is announced, for a suspension committed at `now`.
    pub fn warn_at(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        Some(self.deadline(now)? - chrono::Duration::seconds(self.warn_before_seconds?))
    }

    fn validate(&self, now: DateTime<Utc>) -> Result<(), ValidationError> {
        validate::allowed_decisions("interaction.allowed_decisions", &self.allowed_decisions)?;
        validate::json_object("interaction.payload", &self.payload)?;
        if self.expires_at.is_some_and(|at| at <= now) {
            return Err(ValidationError::new(
                "interaction.expires_at",
                "must be in the future",
            ));
        }
        let seconds = 1..=MAX_EXPIRY_SECONDS;
        if let Some(s) = self.expires_in_seconds {
            if self.expires_at.is_some() {
                return Err(ValidationError::new(
                    "interaction.expires_in_seconds",
                    "give either expires_at or expires_in_seconds, not both",
                ));
            }
            if !seconds.contains(&s) {
                return Err(ValidationError::new(
                    "interaction.expires_in_seconds",
                    format!("must be 1 to {MAX_EXPIRY_SECONDS}"),
                ));
            }
        }
        let has_deadline = self.expires_at.is_some() || self.expires_in_seconds.is_some();
        if let Some(s) = self.warn_before_seconds {
            if !seconds.contains(&s) {
                return Err(ValidationError::new(
                    "interaction.warn_before_seconds",
                    format!("must be 1 to {MAX_EXPIRY_SECONDS}"),
                ));
            }
            if !has_deadline {
                return Err(ValidationError::new(
                    "interaction.warn_before_seconds",
                    "needs a deadline (expires_at or expires_in_seconds)",
                ));
            }
        }
        if let Some(policy) = &self.on_expiry {
            self.validate_on_expiry(policy, has_deadline)?;
        }
        Ok(())
    }

    fn validate_on_expiry(
        &self,
        policy: &OnExpiry,
        has_deadline: bool,
    ) -> Result<(), ValidationError> {
        // The wire shape gives a decision to `decide` alone; it must be one this one allows.
        if let Some(d) = &policy.decision {
            if !self.allowed_decisions.contains(d) {
                return Err(ValidationError::new(
                    "interaction.on_expiry.decision",
                    format!("must be one of: {}", self.allowed_decisions.join(", ")),
                ));
            }
        }
        if policy.action != ExpiryAction::Fail && !has_deadline {
            return Err(ValidationError::new(
                "interaction.on_expiry",
                "needs a deadline (expires_at or expires_in_seconds)",
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SuspendRun {
    pub fencing_token: i64,
    pub reason: SuspensionReason,
    pub checkpoint: NewCheckpoint,
    #[serde(default)]
    pub interaction: Option<NewInteraction>,
}

impl SuspendRun {
    pub fn validate(&self, now: DateTime<Utc>) -> Result<(), ValidationError> {
        validate::name("checkpoint.codec_version", &self.checkpoint.codec_version)?;
        if self.checkpoint.sequence < 0 {
            return Err(ValidationError::new(
                "checkpoint.sequence",
                "must not be negative",
            ));
        }
        validate::sha256_digest(
            "checkpoint.resolved_spec_hash",
            &self.checkpoint.resolved_spec_hash,
        )?;
        if let Some(i) = &self.interaction {
            i.validate(now)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplyInteraction {
    #[schema(min_length = 1, max_length = 128)]
    pub decision: String,
    #[serde(default = "empty_object")]
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    /// The interaction revision the user answered; a different current revision is a conflict.
    #[serde(default)]
    pub expected_revision: Option<i64>,
    /// The digest of the payload the user was shown (the interaction's `payload_sha256`): a
    /// payload that is not that one any more is a conflict, so an answer is bound to it.
    #[serde(default)]
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub payload_sha256: Option<String>,
    /// Why the user answered so, kept with the resolution.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 2000)]
    pub comment: Option<String>,
}

/// The longest reply comment, in characters.
pub const MAX_COMMENT_CHARS: usize = 2000;

impl ReplyInteraction {
    pub fn validate(&self) -> Result<(), ValidationError> {
        if !(1..=128).contains(&self.decision.chars().count()) {
            return Err(ValidationError::new(
                "decision",
                "must be 1 to 128 characters",
            ));
        }
        let digest = self.payload_sha256.as_deref();
        if digest.is_some_and(|d| {
            d.len() != 64 || !d.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        }) {
            return Err(ValidationError::new(
                "payload_sha256",
                "must be 64 lowercase hexadecimal digits",
            ));
        }
        if self
            .comment
            .as_ref()
            .is_some_and(|c| !(1..=MAX_COMMENT_CHARS).contains(&c.chars().count()))
        {
            return Err(ValidationError::new(
                "comment",
                format!("must be 1 to {MAX_COMMENT_CHARS} characters"),
            ));
        }
        validate::json_object("payload", &self.payload)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfirmResumed {
    pub fencing_token: i64,
    #[schema(pattern = "^sha256:[0-9a-f]{64}$")]
    pub resolved_spec_hash: String,
    #[serde(default)]
    #[schema(pattern = "^sha256:[0-9a-f]{64}$")]
    pub spec_hash: Option<String>,
    #[serde(default)]
    #[schema(pattern = "^sha256:[0-9a-f]{64}$")]
    pub policy_hash: Option<String>,
}

impl ConfirmResumed {
    /// A malformed hash can never match: refuse it rather than fail the run over a typo.
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate::sha256_digest("resolved_spec_hash", &self.resolved_spec_hash)?;
        if let Some(h) = &self.spec_hash {
            validate::sha256_digest("spec_hash", h)?;
        }
        if let Some(h) = &self.policy_hash {
            validate::sha256_digest("policy_hash", h)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteRun {
    pub fencing_token: i64,
    #[serde(default = "empty_object")]
    #[schema(value_type = Object)]
    pub output: serde_json::Value,
}

impl CompleteRun {
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate::json_object("output", &self.output)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailRun {
    pub fencing_token: i64,
    #[schema(value_type = Object)]
    pub error: serde_json::Value,
}

impl FailRun {
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate::json_object("error", &self.error)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateJob {
    pub fencing_token: i64,
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub kind: String,
    #[serde(default = "empty_object")]
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    #[serde(default)]
    pub pause_behavior: Option<PauseBehavior>,
    #[serde(default)]
    pub execution_affinity: Option<ExecutionAffinity>,
}

impl CreateJob {
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate::name("kind", &self.kind)?;
        validate::json_object("payload", &self.payload)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateJob {
    pub state: JobState,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub worker_id: String,
    /// How many runs to claim at most (1 to 100, default 1).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    pub max: Option<u32>,
    /// Long-poll: wait up to this many seconds for work (at most the configured limit).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 60)]
    pub wait_seconds: Option<u32>,
}

impl ClaimRequest {
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate::name("worker_id", &self.worker_id)?;
        if matches!(self.max, Some(0) | Some(101..)) {
            return Err(ValidationError::new("max", "must be between 1 and 100"));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    pub fencing_token: i64,
}
