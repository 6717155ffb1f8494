//! Runtime claims, long-polled.

use std::time::Duration;

use tokio::time::Instant;

use super::shutdown::Shutdown;
use super::snapshot::WaitingGuard;
use crate::domain::claim::Claim;
use crate::lifecycle::clients::ProviderClients;
use crate::metrics::Metrics;
use crate::providers::client::CallOptions;
use crate::providers::grant;
use crate::store::{Store, StoreResult};

/// Work can also become ready without a notification (a lease expiring), so a waiting
/// claim retries at least this often.
pub const CLAIM_RETRY_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Clone, Copy)]
pub struct ClaimWait<'a> {
    pub tenant: Option<&'a str>,
    pub worker_id: &'a str,
    pub max: u32,
    pub ttl: chrono::Duration,
    pub wait: Duration,
    /// Signs the grants of sandbox-backed claims.
    pub grant_secret: &'a [u8],
    pub providers: &'a ProviderClients,
}

/// Claims ready runs; with a wait, retries on every work notification until something is
/// claimed, the wait runs out, or the service shuts down (an empty list then).
pub async fn claim(
    store: &Store,
    shutdown: &Shutdown,
    metrics: &Metrics,
    q: ClaimWait<'_>,
) -> StoreResult<Vec<Claim>> {
    let mut work = store.hub().subscribe_work();
    work.borrow_and_update();
    let mut work_open = true;
    let deadline = Instant::now() + q.wait;
    let _waiting = (!q.wait.is_zero()).then(|| WaitingGuard::new(metrics));
    loop {
        let claims = store
            .claim_runs(q.tenant, q.worker_id, q.max, q.ttl)
            .await?;
        let remaining = deadline.saturating_duration_since(Instant::now());
        if !claims.is_empty() || remaining.is_zero() || shutdown.is_triggered() {
            return Ok(with_grants(claims, q.grant_secret, q.providers).await);
        }
        tokio::select! {
            changed = work.changed(), if work_open => work_open = changed.is_ok(),
            _ = tokio::time::sleep(remaining.min(CLAIM_RETRY_INTERVAL)) => {}
            _ = shutdown.wait() => return Ok(Vec::new()),
        }
    }
}

/// How long a claim waits for a provider to confirm a sandbox's generation.
pub const GENERATION_LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Fills each sandbox-backed claim's grant, valid as long as the lease. A grant names the
/// provider's own generation of the sandbox, which is not the record's (an attach keeps it, a
/// fresh provision starts it over), so the provider is asked; if it cannot answer, the
/// record's generation is used.
pub async fn with_grants(
    mut claims: Vec<Claim>,
    secret: &[u8],
    providers: &ProviderClients,
) -> Vec<Claim> {
    for claim in &mut claims {
        let expires_at = claim.lease.expires_at;
        let Some(sandbox) = claim.sandbox.as_mut() else {
            continue;
        };
        let field = |name: &str| sandbox.r#ref.get(name).and_then(|v| v.as_str());
        let (Some(sandbox_id), Some(provider_id), Ok(recorded)) = (
            field("sandbox_id"),
            field("provider_id"),
            u64::try_from(sandbox.generation),
        ) else {
            tracing::error!(run_id = %claim.run.id, "a claimed sandbox has no usable ref");
            continue;
        };
        let generation = provider_generation(providers, provider_id, sandbox_id)
            .await
            .unwrap_or(recorded);
        sandbox.grant = grant::mint(secret, sandbox_id, generation, expires_at).token;
    }
    claims
}

async fn provider_generation(
    providers: &ProviderClients,
    provider_id: &str,
    sandbox_id: &str,
) -> Option<u64> {
    let opts = CallOptions {
        request_id: None,
        timeout: Some(GENERATION_LOOKUP_TIMEOUT),
    };
    let looked_up = match providers.get(provider_id).await {
        Ok(client) => client.inspect(sandbox_id, &opts).await,
        Err(e) => Err(e),
    };
    match looked_up {
        Ok(info) => Some(info.generation),
        Err(e) => {
            providers.forget_on(provider_id, &e);
            tracing::warn!(%sandbox_id, error = %e, "the provider did not confirm the sandbox's generation");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::claim::{ClaimKind, ClaimSandbox, ExpectedHashes, Lease};
    use crate::domain::run::{Run, RunState};
    use crate::domain::{LeaseId, RunId, SessionId};
    use chrono::Utc;

    fn claim(sandbox: Option<ClaimSandbox>) -> Claim {
        let now = crate::clock::truncate_ms(Utc::now());
        Claim {
            kind: ClaimKind::Start,
            run: Run {
                id: RunId::new(),
                session_id: SessionId::new(),
                parent_run_id: None,
                state: RunState::Running,
                resolved_spec_hash: String::new(),
                sandbox_spec: None,
                input: serde_json::json!({}),
                output: None,
                error: None,
                revision: 1,
                created_at: now,
                updated_at: now,
            },
            lease: Lease {
                lease_id: LeaseId::new(),
                fencing_token: 9,
                expires_at: now + chrono::Duration::seconds(30),
            },
            checkpoint: None,
            expected: ExpectedHashes {
                resolved_spec_hash: String::new(),
                spec_hash: None,
                policy_hash: None,
            },
            sandbox,
        }
    }

    #[tokio::test]
    async fn sandbox_claims_get_a_grant_that_ends_with_the_lease() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/claims.db", dir.path().display());
        let store = crate::store::Store::connect(
            &url,
            std::sync::Arc::new(crate::clock::SystemClock),
            crate::notify::ChangeHub::new(),
            Default::default(),
        )
        .await
        .unwrap();
        store.migrate().await.unwrap();
        // No provider is registered: the record's generation is used.
        let providers = ProviderClients::new(store);
        let sandbox = ClaimSandbox {
            r#ref: serde_json::json!({ "sandbox_id": "sbx_1", "provider_id": "local" }),
            generation: 2,
            grant: String::new(),
        };
        let claims = with_grants(
            vec![claim(Some(sandbox)), claim(None)],
            b"secret",
            &providers,
        )
        .await;
        let lease_end = claims[0].lease.expires_at;
        let token = &claims[0].sandbox.as_ref().unwrap().grant;
        let before_end = lease_end - chrono::Duration::milliseconds(1);
        let granted = grant::verify(b"secret", token, "sbx_1", 2, before_end).unwrap();
        assert_eq!(granted.generation, 2);
        assert!(grant::verify(b"secret", token, "sbx_1", 2, lease_end).is_err());
        assert!(grant::verify(b"secret", token, "sbx_2", 2, before_end).is_err());
        assert!(claims[1].sandbox.is_none());
    }
}
