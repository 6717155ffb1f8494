//! The provider edge: plugin API wire types to the domain types the service stores, and back.

use super::{wire, wire_spec};
use crate::domain::sandbox;

impl From<wire::SandboxRef> for sandbox::SandboxRef {
    fn from(r: wire::SandboxRef) -> Self {
        sandbox::SandboxRef {
            sandbox_id: r.sandbox_id,
            provider_id: r.provider_id,
            provider_version: r.provider_version,
            tenant_id: r.tenant_id,
            owner_run_id: r.owner_run_id,
            spec_hash: r.spec_hash,
            policy_hash: r.policy_hash,
        }
    }
}

impl From<sandbox::SandboxRef> for wire::SandboxRef {
    fn from(r: sandbox::SandboxRef) -> Self {
        wire::SandboxRef {
            sandbox_id: r.sandbox_id,
            provider_id: r.provider_id,
            provider_version: r.provider_version,
            tenant_id: r.tenant_id,
            owner_run_id: r.owner_run_id,
            spec_hash: r.spec_hash,
            policy_hash: r.policy_hash,
        }
    }
}

impl From<wire::CheckpointRef> for sandbox::CheckpointRef {
    fn from(c: wire::CheckpointRef) -> Self {
        sandbox::CheckpointRef {
            checkpoint_id: c.checkpoint_id,
            provider_id: c.provider_id,
            sandbox_id: c.sandbox_id,
            generation: c.generation,
            size_bytes: c.size_bytes,
            digest: c.digest,
            created_at: c.created_at,
        }
    }
}

impl From<sandbox::CheckpointRef> for wire::CheckpointRef {
    fn from(c: sandbox::CheckpointRef) -> Self {
        wire::CheckpointRef {
            checkpoint_id: c.checkpoint_id,
            provider_id: c.provider_id,
            sandbox_id: c.sandbox_id,
            generation: c.generation,
            size_bytes: c.size_bytes,
            digest: c.digest,
            created_at: c.created_at,
        }
    }
}

impl From<wire::ProviderError> for sandbox::ProviderError {
    fn from(e: wire::ProviderError) -> Self {
        sandbox::ProviderError {
            code: e.code,
            category: e.category,
            message: e.message,
            retryable: e.retryable,
        }
    }
}

impl From<sandbox::ReleaseDisposition> for wire_spec::ReleaseDisposition {
    fn from(d: sandbox::ReleaseDisposition) -> Self {
        match d {
            sandbox::ReleaseDisposition::Detach => wire_spec::ReleaseDisposition::Detach,
            sandbox::ReleaseDisposition::Terminate => wire_spec::ReleaseDisposition::Terminate,
            sandbox::ReleaseDisposition::SnapshotAndTerminate => {
                wire_spec::ReleaseDisposition::SnapshotAndTerminate
            }
        }
    }
}

impl From<wire_spec::ReleaseDisposition> for sandbox::ReleaseDisposition {
    fn from(d: wire_spec::ReleaseDisposition) -> Self {
        match d {
            wire_spec::ReleaseDisposition::Detach => sandbox::ReleaseDisposition::Detach,
            wire_spec::ReleaseDisposition::Terminate => sandbox::ReleaseDisposition::Terminate,
            wire_spec::ReleaseDisposition::SnapshotAndTerminate => {
                sandbox::ReleaseDisposition::SnapshotAndTerminate
            }
        }
    }
}

impl From<sandbox::WorkspaceMode> for wire_spec::WorkspaceMode {
    fn from(m: sandbox::WorkspaceMode) -> Self {
        match m {
            sandbox::WorkspaceMode::Isolated => wire_spec::WorkspaceMode::Isolated,
            sandbox::WorkspaceMode::ActiveWorkspace => wire_spec::WorkspaceMode::ActiveWorkspace,
        }
    }
}

impl From<sandbox::ResolvedSandboxSpec> for wire_spec::ResolvedSandboxSpec {
    fn from(s: sandbox::ResolvedSandboxSpec) -> Self {
        wire_spec::ResolvedSandboxSpec {
            spec_version: s.spec_version,
            provider_id: s.provider_id,
            spec_hash: s.spec_hash,
            policy_hash: s.policy_hash,
            workspace_mode: s.workspace_mode.into(),
            host_workspace: s.host_workspace,
            lifecycle: wire_spec::LifecyclePolicy {
                safe_pause_behavior: s.lifecycle.safe_pause_behavior.map(Into::into),
                unsafe_pause_behavior: s.lifecycle.unsafe_pause_behavior.map(Into::into),
                max_lifetime_seconds: s.lifecycle.max_lifetime_seconds,
            },
            resources: wire_spec::Resources {
                cpu_percent: s.resources.cpu_percent,
                memory_mb: s.resources.memory_mb,
                max_processes: s.resources.max_processes,
                max_open_files: s.resources.max_open_files,
                disk_mb: s.resources.disk_mb,
                network: s.resources.network.map(|n| match n {
                    sandbox::NetworkMode::None => wire_spec::NetworkMode::None,
                    sandbox::NetworkMode::Host => wire_spec::NetworkMode::Host,
                }),
            },
            metadata: s.metadata,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_resource_limit_reaches_the_provider() {
        let resources = serde_json::json!({
            "cpu_percent": 50, "memory_mb": 256, "max_processes": 64,
            "max_open_files": 128, "disk_mb": 512, "network": "host",
        });
        let spec: sandbox::ResolvedSandboxSpec = serde_json::from_value(serde_json::json!({
            "spec_version": sandbox::SPEC_VERSION_V3, "provider_id": "local",
            "spec_hash": format!("sha256:{}", "a".repeat(64)),
            "policy_hash": format!("sha256:{}", "b".repeat(64)),
            "workspace_mode": "isolated", "resources": resources,
        }))
        .unwrap();
        let wire = wire_spec::ResolvedSandboxSpec::from(spec);
        assert_eq!(serde_json::to_value(&wire.resources).unwrap(), resources);
        assert_eq!(wire.resources.network(), wire_spec::NetworkMode::Host);
        let unknown = serde_json::from_value::<sandbox::Resources>(
            serde_json::json!({"network": "internet"}),
        );
        assert!(unknown.is_err());
    }
}
