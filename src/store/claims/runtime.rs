//! Runtime claims: leasing ready runs to runtime workers with a fresh fencing token, lease
//! renewal, and handing every lease of a worker back at shutdown.

use std::sync::atomic::Ordering;

use chrono::{DateTime, Duration, Utc};
use serde_json::json;

use crate::clock::to_millis;
use crate::domain::claim::{Claim, ClaimKind, ClaimSandbox, Lease};
use crate::domain::decide::claim;
use crate::domain::decide::transition::expected_hashes;
use crate::domain::resource::ResourceState;
use crate::domain::validate::{self, ValidationError};
use crate::domain::LeaseId;
use crate::store::engine::dialect::DueRuns;
use crate::store::engine::tx::WriteTx;
use crate::store::engine::{rows, Store, StoreError, StoreResult};
use crate::store::runs::fence::latest_checkpoint;

pub(in crate::store) const MAX_CLAIMS: u32 = 100;

/// A renewed lease: its new end and, while the run's compute is ready, the sandbox a fresh
/// grant is minted for (by the caller).
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseRenewal {
    pub expires_at: DateTime<Utc>,
    pub sandbox: Option<ClaimSandbox>,
}

/// When a lease granted or renewed at `now` for `ttl` ends.
pub(in crate::store) fn lease_expiry(
    now: DateTime<Utc>,
    ttl: Duration,
) -> StoreResult<DateTime<Utc>> {
    now.checked_add_signed(ttl)
        .filter(|_| ttl > Duration::zero())
        .ok_or_else(|| {
            ValidationError::new("ttl", "must be a positive, reasonable duration").into()
        })
}

impl Store {
    /// Claims up to `max` runs of `tenant` (None: any tenant) that are ready and have no live
    /// lease: `queued` → `start` (state becomes `running`), `resuming` → `resume` (state stays
    /// `resuming`), a `running` run whose lease expired → taken over (`start`, or `resume`
    /// when it has a checkpoint). Each grant gets a new lease id and a fencing token from
    /// the monotonic source, expiring `ttl` from now. A run with a sandbox spec is ready only
    /// while its execution resource is `active` and not due; its claim carries the sandbox
    /// ref, generation and the provider's generation (the grant is minted by the caller, naming
    /// the latter). Longest available first (since its lease expired, or since its creation).
    /// Counts claims and take-overs in the metrics.
    pub async fn claim_runs(
        &self,
        tenant: Option<&str>,
        worker_id: &str,
        max: u32,
        ttl: Duration,
    ) -> StoreResult<Vec<Claim>> {
        validate::name("worker_id", worker_id)?;
        let max = max.min(MAX_CLAIMS);
        if max == 0 {
            return Ok(Vec::new());
        }
        let mut tx = self.write_tx().await?;
        let result = self
            .grant_leases(&mut tx, tenant, worker_id, max, ttl)
            .await;
        let (mut claims, takeovers) = tx.finish(self, result).await?;
        let metrics = self.metrics();
        metrics
            .lease_claims
            .fetch_add(claims.len() as u64, Ordering::Relaxed);
        metrics
            .lease_takeovers
            .fetch_add(takeovers, Ordering::Relaxed);
        claims.sort_by(|a, b| (a.run.created_at, &a.run.id).cmp(&(b.run.created_at, &b.run.id)));
        Ok(claims)
    }

    /// Extends a live lease by `ttl` from now; `LeaseLost` if the token is stale or expired.
    pub async fn heartbeat(
        &self,
        tenant: Option<&str>,
        lease_id: &LeaseId,
        fencing_token: i64,
        ttl: Duration,
    ) -> StoreResult<LeaseRenewal> {
        let mut tx = self.write_tx().await?;
        let now = tx.now;
        let result: StoreResult<_> = async {
            let expires_at = lease_expiry(now, ttl)?;
            let renewed = sqlx::query(
                "UPDATE runs SET lease_expires_at = $4 \
                 WHERE lease_id = $1 AND fencing_token = $2 AND lease_expires_at > $3 \
                 AND ($5 IS NULL OR session_id IN (SELECT id FROM sessions WHERE tenant_id = $5)) \
                 RETURNING id",
            )
            .bind(lease_id.as_str())
            .bind(fencing_token)
            .bind(to_millis(now))
            .bind(to_millis(expires_at))
            .bind(tenant)
            .fetch_optional(tx.conn())
            .await?;
            let Some(row) = renewed else {
                return Err(self.lease_lost());
            };
            let run_id = rows::text(&row, "id")?;
            let sandbox = self.ready_sandbox(&mut tx, &run_id).await?;
            Ok(LeaseRenewal {
                expires_at,
                sandbox,
            })
        }
        .await;
        tx.finish(self, result).await
    }

    /// Drops every lease held by `holder` (graceful shutdown); returns how many.
    pub async fn release_leases_of(&self, holder: &str) -> StoreResult<u64> {
        let mut tx = self.write_tx().await?;
        let result: StoreResult<_> = async {
            let done = sqlx::query(
                "UPDATE runs SET lease_id = NULL, lease_holder = NULL, fencing_token = NULL, \
                 lease_expires_at = NULL WHERE lease_holder = $1",
            )
            .bind(holder)
            .execute(tx.conn())
            .await?;
            if done.rows_affected() > 0 {
                tx.work();
            }
            Ok(done.rows_affected())
        }
        .await;
        tx.finish(self, result).await
    }

    /// Leases due runs and describes each grant as a claim; returns the take-over count.
    async fn grant_leases(
        &self,
        tx: &mut WriteTx,
        tenant: Option<&str>,
        worker_id: &str,
        max: u32,
        ttl: Duration,
    ) -> StoreResult<(Vec<Claim>, u64)> {
        let now = tx.now;
        let expires_at = lease_expiry(now, ttl)?;
        let leased = self
            .lease_due_runs(
                tx.conn(),
                DueRuns::Runtime,
                tenant,
                worker_id,
                max,
                now,
                expires_at,
            )
            .await?;
        let mut claims = Vec::with_capacity(leased.len());
        let mut takeovers = 0;
        for l in &leased {
            let Some(rec) = self.load_run(tx.conn(), &l.run_id, false).await? else {
                return Err(StoreError::Database(sqlx::Error::RowNotFound));
            };
            let sandbox = match rec.run.sandbox_spec {
                None => None,
                Some(_) => match self.ready_sandbox(tx, &l.run_id).await? {
                    Some(sandbox) => Some(sandbox),
                    None => {
                        // PostgreSQL re-checks only the locked run row: compute not ready.
                        self.drop_lease(tx, &l.run_id).await?;
                        continue;
                    }
                },
            };
            let checkpoint = latest_checkpoint(tx.conn(), &l.run_id).await?;
            let claimed = claim::decide(l.prev_state, &rec.run, checkpoint.is_some())?;
            let (kind, run) = match claimed.start {
                Some(to) => {
                    let run = self
                        .set_run_state(tx, &rec, to, Some(l.fencing_token), None)
                        .await?;
                    tx.event(
                        &l.session_id,
                        "run.started",
                        json!({ "run_id": run.id, "worker_id": worker_id }),
                    );
                    (claimed.kind, run)
                }
                None => (claimed.kind, rec.run),
            };
            if l.had_lease {
                takeovers += 1;
                tx.event(
                    &l.session_id,
                    "lease.taken_over",
                    json!({ "run_id": run.id, "state": run.state, "worker_id": worker_id }),
                );
            }
            claims.push(Claim {
                kind,
                expected: expected_hashes(&run),
                checkpoint: if kind == ClaimKind::Resume {
                    checkpoint
                } else {
                    None
                },
                lease: Lease {
                    lease_id: LeaseId::from_trusted(l.lease_id.clone()),
                    fencing_token: l.fencing_token,
                    expires_at,
                },
                run,
                sandbox,
            });
        }
        Ok((claims, takeovers))
    }

    /// The sandbox a runtime claim operates in, when the run's compute is ready: its record
    /// is `active` and not due. The grant is left empty for the service to mint.
    async fn ready_sandbox(
        &self,
        tx: &mut WriteTx,
        run_id: &str,
    ) -> StoreResult<Option<ClaimSandbox>> {
        let record = self.load_resource(tx.conn(), run_id, false).await?;
        let Some(record) =
            record.filter(|r| r.state == ResourceState::Active && r.due_at.is_none())
        else {
            return Ok(None);
        };
        let Some(sandbox_ref) = record.sandbox_ref else {
            return Ok(None);
        };
        Ok(Some(ClaimSandbox {
            r#ref: sandbox_ref,
            generation: record.generation,
            grant: String::new(),
            grant_generation: record.provider_generation,
            grant_audience: record.provider_id,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_expiry_refuses_empty_and_overflowing_ttls() {
        let now = Utc::now();
        assert_eq!(
            lease_expiry(now, Duration::seconds(30)).unwrap(),
            now + Duration::seconds(30)
        );
        for bad in [Duration::zero(), Duration::seconds(-1), Duration::MAX] {
            assert!(
                matches!(lease_expiry(now, bad), Err(StoreError::Invalid(e)) if e.field == "ttl"),
                "{bad:?}"
            );
        }
    }
}
