//! Runtime claims, long-polled.

use std::time::Duration;

use tokio::time::Instant;

use super::shutdown::Shutdown;
use super::snapshot::WaitingGuard;
use crate::domain::claim::ClaimSandbox;
use crate::domain::claim::{Claim, ClaimKind};
use crate::domain::LeaseId;
use crate::metrics::Metrics;
use crate::providers::grant::GrantSigner;
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
    /// How often a waiting claim looks again without a notification: `CLAIM_RETRY_INTERVAL`.
    pub poll: Duration,
    /// Signs the grants of sandbox-backed claims.
    pub grants: &'a GrantSigner,
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
            log_resume_stages(metrics, &claims);
            return Ok(with_grants(claims, q.grants));
        }
        tokio::select! {
            changed = work.changed(), if work_open => work_open = changed.is_ok(),
            _ = tokio::time::sleep(remaining.min(q.poll)) => {}
            _ = shutdown.wait() => return Ok(Vec::new()),
        }
    }
}

/// One line per resume this replica bound and now offers, with how long each stage took.
fn log_resume_stages(metrics: &Metrics, claims: &[Claim]) {
    for claim in claims.iter().filter(|c| c.kind == ClaimKind::Resume) {
        let Some(t) = metrics.resume.offered(claim.run.id.as_str()) else {
            continue;
        };
        let ms = |i: usize| (t.stages[i].as_secs_f64() * 100_000.0).round() / 100.0;
        tracing::info!(
            run_id = %claim.run.id,
            kind = t.kind,
            reply_to_claim_ms = ms(0),
            claim_to_call_ms = ms(1),
            provider_ms = ms(2),
            answer_to_saved_ms = ms(3),
            saved_to_offered_ms = ms(4),
            total_ms = ms(5),
            "resume stages"
        );
    }
}

/// Fills each sandbox-backed claim's grant, valid as long as the lease.
pub fn with_grants(mut claims: Vec<Claim>, signer: &GrantSigner) -> Vec<Claim> {
    for claim in &mut claims {
        let expires_at = claim.lease.expires_at;
        if let Some(sandbox) = claim.sandbox.as_mut() {
            sandbox.grant =
                mint_for(signer, claim.run.id.as_str(), sandbox, expires_at).unwrap_or_default();
        }
    }
    claims
}

/// A grant for `sandbox` until `expires_at`, for the provider the sandbox is registered on. It
/// names the provider's own generation of the sandbox, which is not the record's (an attach
/// keeps it, a fresh provision starts it over); the record's is used only when none is stored.
fn mint_for(
    signer: &GrantSigner,
    run_id: &str,
    sandbox: &ClaimSandbox,
    expires_at: chrono::DateTime<chrono::Utc>,
) -> Option<String> {
    let generation = sandbox.grant_generation.unwrap_or(sandbox.generation);
    let Ok(generation) = u64::try_from(generation) else {
        tracing::error!(run_id, "a claimed sandbox has a negative generation");
        return None;
    };
    Some(
        signer
            .mint(
                &sandbox.grant_audience,
                &sandbox.r#ref.sandbox_id,
                generation,
                expires_at,
            )
            .token,
    )
}

/// A lease renewed by a heartbeat.
#[derive(Debug, Clone, PartialEq)]
pub struct Renewed {
    pub expires_at: chrono::DateTime<chrono::Utc>,
    /// A fresh grant ending with the renewed lease, while the run's sandbox is ready.
    pub grant: Option<String>,
}

/// Extends a live lease by `ttl` and mints a grant for its sandbox to match, so a runtime
/// that keeps its lease keeps its exec.
pub async fn heartbeat(
    store: &Store,
    signer: &GrantSigner,
    tenant: Option<&str>,
    lease_id: &LeaseId,
    fencing_token: i64,
    ttl: chrono::Duration,
) -> StoreResult<Renewed> {
    let renewal = store
        .heartbeat(tenant, lease_id, fencing_token, ttl)
        .await?;
    let grant = renewal
        .sandbox
        .as_ref()
        .and_then(|sandbox| mint_for(signer, lease_id.as_str(), sandbox, renewal.expires_at));
    Ok(Renewed {
        expires_at: renewal.expires_at,
        grant,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::claim::{ExpectedHashes, Lease};
    use crate::domain::run::{Run, RunState};
    use crate::domain::sandbox::SandboxRef;
    use crate::domain::{RunId, SessionId};
    use crate::providers::grant;
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

    fn sandbox(generation: i64, grant_generation: Option<i64>) -> ClaimSandbox {
        ClaimSandbox {
            r#ref: SandboxRef {
                sandbox_id: "sbx_1".into(),
                provider_id: "local".into(),
                provider_version: "0.1.0".into(),
                tenant_id: "acme".into(),
                owner_run_id: "run_1".into(),
                spec_hash: format!("sha256:{}", "1".repeat(64)),
                policy_hash: format!("sha256:{}", "2".repeat(64)),
            },
            generation,
            grant: String::new(),
            grant_generation,
            grant_audience: "local-a".into(),
        }
    }

    #[test]
    fn sandbox_claims_get_a_grant_that_ends_with_the_lease() {
        let claims = with_grants(
            vec![claim(Some(sandbox(2, None))), claim(None)],
            &GrantSigner::hmac(b"secret"),
        );
        let lease_end = claims[0].lease.expires_at;
        let token = &claims[0].sandbox.as_ref().unwrap().grant;
        let before_end = lease_end - chrono::Duration::milliseconds(1);
        let granted = grant::verify(b"secret", token, "local-a", "sbx_1", 2, before_end).unwrap();
        assert_eq!(granted.generation, 2);
        assert!(grant::verify(b"secret", token, "local-a", "sbx_1", 2, lease_end).is_err());
        assert!(grant::verify(b"secret", token, "local-a", "sbx_2", 2, before_end).is_err());
        assert!(grant::verify(b"secret", token, "local-b", "sbx_1", 2, before_end).is_err());
        assert!(claims[1].sandbox.is_none());
    }

    #[test]
    fn the_grant_names_the_stored_provider_generation() {
        let claims = with_grants(
            vec![claim(Some(sandbox(3, Some(1))))],
            &GrantSigner::hmac(b"secret"),
        );
        let before_end = claims[0].lease.expires_at - chrono::Duration::milliseconds(1);
        let token = &claims[0].sandbox.as_ref().unwrap().grant;
        assert!(grant::verify(b"secret", token, "local-a", "sbx_1", 1, before_end).is_ok());
        assert!(grant::verify(b"secret", token, "local-a", "sbx_1", 3, before_end).is_err());
    }
}
