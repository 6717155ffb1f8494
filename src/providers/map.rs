//! The provider edge: plugin API wire types to the domain types the service stores, and back.

use super::wire;
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
