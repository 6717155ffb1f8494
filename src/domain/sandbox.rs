//! What a run asks of a sandbox (ResolvedSandboxSpec v3) and what the service keeps of the
//! sandbox it got: its ref, its checkpoint and the last provider error. The plugin API's wire
//! types map to these at the provider edge, so a wire change is not a database-format change.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use chrono::{DateTime, Utc};

use super::validate::{self, ValidationError};
use sagents_text_enum::text_enum;

pub const SPEC_VERSION_V3: &str = "sagents.sandbox-spec/v3";

text_enum! {
    pub enum WorkspaceMode as "workspace mode" {
        Isolated => "isolated",
        ActiveWorkspace => "active_workspace",
    }
}

text_enum! {
    /// `none` (the default): the sandbox has only its own loopback; `host`: the host's network.
    pub enum NetworkMode as "network mode" {
        None => "none",
        Host => "host",
    }
}

text_enum! {
    pub enum ReleaseDisposition as "release disposition" {
        Detach => "detach",
        Terminate => "terminate",
        SnapshotAndTerminate => "snapshot_and_terminate",
    }
}

/// The one spec version accepted (another is `422 sandbox.spec_unsupported`).
#[derive(ToSchema)]
pub enum SpecVersion {
    #[schema(rename = "sagents.sandbox-spec/v3")]
    V3,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolvedSandboxSpec {
    /// Must be `sagents.sandbox-spec/v3`.
    #[schema(value_type = SpecVersion)]
    pub spec_version: String,
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub provider_id: String,
    #[schema(pattern = "^sha256:[0-9a-f]{64}$")]
    pub spec_hash: String,
    #[schema(pattern = "^sha256:[0-9a-f]{64}$")]
    pub policy_hash: String,
    pub workspace_mode: WorkspaceMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 1024)]
    pub host_workspace: Option<String>,
    #[serde(default)]
    pub lifecycle: LifecyclePolicy,
    #[serde(default)]
    pub resources: Resources,
    #[serde(default = "empty_object")]
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LifecyclePolicy {
    /// Default: `snapshot_and_terminate`, or `terminate` for an active workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safe_pause_behavior: Option<ReleaseDisposition>,
    /// Default: `detach`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsafe_pause_behavior: Option<ReleaseDisposition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lifetime_seconds: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_processes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_open_files: Option<u32>,
    /// The sandbox's files may not grow past this; an exec is refused once they have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_mb: Option<u64>,
    /// Default: `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkMode>,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

/// Why a spec is refused; `Unsupported` maps to `sandbox.spec_unsupported`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("spec_version `{0}` is not supported; only `sagents.sandbox-spec/v3` is accepted")]
    Unsupported(String),
    #[error(transparent)]
    Invalid(#[from] ValidationError),
}

impl ResolvedSandboxSpec {
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.spec_version != SPEC_VERSION_V3 {
            return Err(SpecError::Unsupported(
                self.spec_version.chars().take(80).collect(),
            ));
        }
        validate::name("sandbox_spec.provider_id", &self.provider_id)?;
        validate::sha256_digest("sandbox_spec.spec_hash", &self.spec_hash)?;
        validate::sha256_digest("sandbox_spec.policy_hash", &self.policy_hash)?;
        validate::json_object("sandbox_spec.metadata", &self.metadata)?;
        match (self.workspace_mode, &self.host_workspace) {
            (WorkspaceMode::Isolated, Some(_)) => {
                return Err(ValidationError::new(
                    "sandbox_spec.host_workspace",
                    "is only allowed with workspace_mode `active_workspace`",
                )
                .into())
            }
            (WorkspaceMode::ActiveWorkspace, None) => {
                return Err(ValidationError::new(
                    "sandbox_spec.host_workspace",
                    "is required with workspace_mode `active_workspace`",
                )
                .into())
            }
            (_, Some(path)) => validate::text("sandbox_spec.host_workspace", path)?,
            _ => {}
        }
        if self.lifecycle.safe_pause_behavior == Some(ReleaseDisposition::Detach) {
            return Err(ValidationError::new(
                "sandbox_spec.lifecycle.safe_pause_behavior",
                "must release compute (`snapshot_and_terminate` or `terminate`)",
            )
            .into());
        }
        if self.workspace_mode == WorkspaceMode::ActiveWorkspace
            && self.lifecycle.safe_pause_behavior == Some(ReleaseDisposition::SnapshotAndTerminate)
        {
            return Err(ValidationError::new(
                "sandbox_spec.lifecycle.safe_pause_behavior",
                "an active workspace keeps its files on the host: use `terminate`",
            )
            .into());
        }
        Ok(())
    }

    /// A valid spec with fixed example hashes, for demos and tests.
    pub fn example(provider_id: &str, mode: WorkspaceMode) -> Self {
        ResolvedSandboxSpec {
            spec_version: SPEC_VERSION_V3.into(),
            provider_id: provider_id.into(),
            spec_hash: format!("sha256:{}", "1".repeat(64)),
            policy_hash: format!("sha256:{}", "2".repeat(64)),
            workspace_mode: mode,
            host_workspace: (mode == WorkspaceMode::ActiveWorkspace).then(|| "proj".into()),
            lifecycle: LifecyclePolicy::default(),
            resources: Resources::default(),
            metadata: empty_object(),
        }
    }

    /// The disposition for a safe pause (any reason but `policy_hold`).
    pub fn safe_pause_behavior(&self) -> ReleaseDisposition {
        self.lifecycle
            .safe_pause_behavior
            .unwrap_or(match self.workspace_mode {
                WorkspaceMode::Isolated => ReleaseDisposition::SnapshotAndTerminate,
                WorkspaceMode::ActiveWorkspace => ReleaseDisposition::Terminate,
            })
    }

    /// Every disposition a run of this spec may need, with the field that asks for it: its
    /// safe and unsafe pauses, and the terminate that ends every run.
    pub fn required_dispositions(&self) -> [(&'static str, ReleaseDisposition); 3] {
        [
            (
                "sandbox_spec.lifecycle.safe_pause_behavior",
                self.safe_pause_behavior(),
            ),
            (
                "sandbox_spec.lifecycle.unsafe_pause_behavior",
                self.unsafe_pause_behavior(),
            ),
            ("sandbox_spec", ReleaseDisposition::Terminate),
        ]
    }

    /// The disposition for an unsafe pause (`policy_hold`).
    pub fn unsafe_pause_behavior(&self) -> ReleaseDisposition {
        self.lifecycle
            .unsafe_pause_behavior
            .unwrap_or(ReleaseDisposition::Detach)
    }
}

/// The sandbox a record is bound to, as the provider named it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub struct SandboxRef {
    pub sandbox_id: String,
    pub provider_id: String,
    pub provider_version: String,
    pub tenant_id: String,
    pub owner_run_id: String,
    pub spec_hash: String,
    pub policy_hash: String,
}

/// A sandbox's files as archived by `snapshot_and_terminate`; opaque to the service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CheckpointRef {
    pub checkpoint_id: String,
    pub provider_id: String,
    /// The sandbox the files were taken from.
    pub sandbox_id: String,
    /// The generation of the compute the files were taken from.
    #[serde(default)]
    pub generation: u64,
    /// Size of the stored archive.
    pub size_bytes: u64,
    /// `sha256:` digest of the stored archive, when the provider computes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// The last error a provider call ended with, as the record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProviderError {
    pub code: String,
    pub category: String,
    pub message: String,
    pub retryable: bool,
}

impl ProviderError {
    /// The category of a failed call whose side effect is unknown (a lost answer, a timeout,
    /// a receipt that cannot be trusted).
    pub const UNCERTAIN: &'static str = "uncertain";

    pub fn outcome_unknown(&self) -> bool {
        self.category == Self::UNCERTAIN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(mode: WorkspaceMode) -> ResolvedSandboxSpec {
        ResolvedSandboxSpec::example("local", mode)
    }

    #[test]
    fn v2_specs_are_unsupported() {
        let mut s = spec(WorkspaceMode::Isolated);
        s.spec_version = "sagents.sandbox-spec/v2".into();
        assert!(matches!(s.validate(), Err(SpecError::Unsupported(_))));
    }

    #[test]
    fn default_dispositions_follow_the_workspace_mode() {
        let iso = spec(WorkspaceMode::Isolated);
        assert!(iso.validate().is_ok());
        assert_eq!(
            iso.safe_pause_behavior(),
            ReleaseDisposition::SnapshotAndTerminate
        );
        assert_eq!(iso.unsafe_pause_behavior(), ReleaseDisposition::Detach);
        let active = spec(WorkspaceMode::ActiveWorkspace);
        assert!(active.validate().is_ok());
        assert_eq!(active.safe_pause_behavior(), ReleaseDisposition::Terminate);
    }

    #[test]
    fn unknown_fields_and_bad_hashes_are_refused() {
        let mut v = serde_json::to_value(spec(WorkspaceMode::Isolated)).unwrap();
        v["surprise"] = serde_json::json!(1);
        let err = serde_json::from_value::<ResolvedSandboxSpec>(v).unwrap_err();
        assert!(err.to_string().contains("surprise"));
        let mut s = spec(WorkspaceMode::Isolated);
        s.policy_hash = "nope".into();
        assert!(
            matches!(s.validate(), Err(SpecError::Invalid(e)) if e.field == "sandbox_spec.policy_hash")
        );
    }
}
