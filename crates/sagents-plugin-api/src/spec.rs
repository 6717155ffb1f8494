//! ResolvedSandboxSpec v3: what a run asks of a sandbox provider, as the provider receives it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolvedSandboxSpec {
    /// Must be `sagents.sandbox-spec/v3`.
    pub spec_version: String,
    pub provider_id: String,
    pub spec_hash: String,
    pub policy_hash: String,
    pub workspace_mode: WorkspaceMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
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

impl Resources {
    pub fn network(&self) -> NetworkMode {
        self.network.unwrap_or(NetworkMode::None)
    }
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

/// Why a provider refuses a spec; `Unsupported` maps to `sandbox.spec_unsupported`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("spec_version `{0}` is not supported; only `sagents.sandbox-spec/v3` is accepted")]
    Unsupported(String),
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: &'static str,
    },
}

impl ResolvedSandboxSpec {
    /// What a provider must refuse: another spec version, and a workspace mode whose
    /// `host_workspace` is missing or not allowed.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.spec_version != SPEC_VERSION_V3 {
            return Err(SpecError::Unsupported(
                self.spec_version.chars().take(80).collect(),
            ));
        }
        let invalid = |message| SpecError::Invalid {
            field: "sandbox_spec.host_workspace",
            message,
        };
        match (self.workspace_mode, &self.host_workspace) {
            (WorkspaceMode::Isolated, Some(_)) => Err(invalid(
                "is only allowed with workspace_mode `active_workspace`",
            )),
            (WorkspaceMode::ActiveWorkspace, None) => Err(invalid(
                "is required with workspace_mode `active_workspace`",
            )),
            _ => Ok(()),
        }
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

    /// The disposition for an unsafe pause (`policy_hold`).
    pub fn unsafe_pause_behavior(&self) -> ReleaseDisposition {
        self.lifecycle
            .unsafe_pause_behavior
            .unwrap_or(ReleaseDisposition::Detach)
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
    fn unknown_fields_and_misplaced_workspaces_are_refused() {
        let mut v = serde_json::to_value(spec(WorkspaceMode::Isolated)).unwrap();
        v["surprise"] = serde_json::json!(1);
        let err = serde_json::from_value::<ResolvedSandboxSpec>(v).unwrap_err();
        assert!(err.to_string().contains("surprise"));
        let mut s = spec(WorkspaceMode::Isolated);
        s.host_workspace = Some("proj".into());
        assert!(matches!(
            s.validate(),
            Err(SpecError::Invalid {
                field: "sandbox_spec.host_workspace",
                ..
            })
        ));
    }
}
