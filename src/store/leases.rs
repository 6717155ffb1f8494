use std::sync::atomic::Ordering;

use chrono::{DateTime, Duration, Utc};
use serde_json::json;

use super::dialect::DueRuns;
use super::runops::{expected_hashes, invalid_state, latest_checkpoint, Outcome};
use super::tx::WriteTx;
use super::{Store, StoreError, StoreResult};
use crate::clock::to_millis;
use crate::domain::claim::{Claim, ClaimKind, ClaimSandbox, Lease};
use crate::domain::commands::{CompleteRun, ConfirmResumed, FailRun, SuspendRun};
use crate::domain::resource::ResourceState;
use crate::domain::run::{Run, RunEvent, RunState};
use crate::domain::validate::{self, ValidationError};
use crate::domain::{LeaseId, RunId};

pub(super) const MAX_CLAIMS: u32 = 100;

/// When a lease granted or renewed at `now` for `ttl` ends.
pub(super) fn lease_expiry(now: DateTime<Utc>, ttl: Duration) -> StoreResult<DateTime<Utc>> {
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
    ) -> StoreResult<DateTime<Utc>> {
        let now = self.now();
        let expires_at = lease_expiry(now, ttl)?;
        let done = sqlx::query(
            "UPDATE runs SET lease_expires_at = $4 \
             WHERE lease_id = $1 AND fencing_token = $2 AND lease_expires_at > $3 \
             AND ($5 IS NULL OR session_id IN (SELECT id FROM sessions WHERE tenant_id = $5))",
        )
        .bind(lease_id.as_str())
        .bind(fencing_token)
        .bind(to_millis(now))
        .bind(to_millis(expires_at))
        .bind(tenant)
        .execute(&self.inner.write)
        .await?;
        if done.rows_affected() == 0 {
            return Err(self.lease_lost());
        }
        Ok(expires_at)
    }

    /// Fenced: `running` → `suspended` with a new checkpoint (its sequence must be greater than
    /// the last one's: `Conflict` `checkpoint.sequence`; its hash must equal the run's:
    /// `Invalid` on `checkpoint.resolved_spec_hash`), an optional pending interaction and a
    /// `pending` suspension. Jobs with `cancel` become `killed`. The lease is handed back and
    /// the run's execution resource (if any) becomes due.
    pub async fn suspend_run(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        cmd: &SuspendRun,
    ) -> StoreResult<Run> {
        cmd.validate(self.now())?;
        let mut tx = self.write_tx().await?;
        let result: StoreResult<_> = async {
            let rec = self
                .fenced_run(&mut tx, tenant, run_id.as_str(), cmd.fencing_token)
                .await?;
            let to = rec
                .run
                .state
                .apply(RunEvent::Suspend)
                .map_err(invalid_state)?;
            if cmd.checkpoint.resolved_spec_hash != rec.run.resolved_spec_hash {
                return Err(ValidationError::new(
                    "checkpoint.resolved_spec_hash",
                    "must equal the run's resolved_spec_hash",
                )
                .into());
            }
            if let Some(last) = latest_checkpoint(tx.conn(), run_id.as_str()).await? {
                if cmd.checkpoint.sequence <= last.sequence {
                    return Err(StoreError::conflict(
                        "checkpoint.sequence",
                        format!(
                            "checkpoint sequence {} must be greater than the last one ({})",
                            cmd.checkpoint.sequence, last.sequence
                        ),
                    ));
                }
            }
            let session = rec.run.session_id.as_str().to_owned();
            let ids = self.insert_suspension(&mut tx, &rec.run, cmd).await?;
            let killed = sqlx::query(
                "UPDATE jobs SET state = 'killed', updated_at = $2 WHERE run_id = $1 \
                 AND pause_behavior = 'cancel' AND state IN ('created', 'running', 'orphaned') \
                 RETURNING id",
            )
            .bind(run_id.as_str())
            .bind(to_millis(tx.now))
            .fetch_all(tx.conn())
            .await?;
            for row in &killed {
                let job_id = super::rows::text(row, "id")?;
                tx.event(
                    &session,
                    "job.killed",
                    json!({ "job_id": job_id, "run_id": run_id }),
                );
            }
            let run = self
                .set_run_state(&mut tx, &rec, to, Some(cmd.fencing_token), None)
                .await?;
            self.drop_lease(&mut tx, run_id.as_str()).await?;
            self.resource_due(&mut tx, run_id.as_str()).await?;
            tx.event(
                &session,
                "run.suspended",
                json!({
                    "run_id": run_id,
                    "reason": cmd.reason,
                    "suspension_id": ids.suspension_id,
                    "checkpoint_id": ids.checkpoint_id,
                }),
            );
            if let (Some(interaction_id), Some(i)) = (&ids.interaction_id, &cmd.interaction) {
                tx.visible(&session);
                tx.event(
                    &session,
                    "interaction.created",
                    json!({
                        "interaction_id": interaction_id,
                        "run_id": run_id,
                        "interaction_type": i.interaction_type,
                    }),
                );
            }
            Ok(run)
        }
        .await;
        tx.finish(self, result).await
    }

    /// Fenced: `resuming` → `running` after checking the hashes the runtime computed against
    /// the run, its latest checkpoint and its sandbox spec. On a mismatch the run is failed
    /// (`sandbox.policy_stale`), committed, and `PolicyStale` is returned.
    pub async fn confirm_resumed(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        cmd: &ConfirmResumed,
    ) -> StoreResult<Run> {
        let mut tx = self.write_tx().await?;
        let result = self.confirm_resumed_in(&mut tx, tenant, run_id, cmd).await;
        // A stale policy is committed (the run is failed) and then reported.
        tx.finish(self, result)
            .await?
            .map_err(StoreError::PolicyStale)
    }

    /// Fenced: `running` → `completed` with the output; the lease is released.
    pub async fn complete_run(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        cmd: &CompleteRun,
    ) -> StoreResult<Run> {
        validate::json_object("output", &cmd.output)?;
        let mut tx = self.write_tx().await?;
        let result: StoreResult<_> = async {
            let rec = self
                .fenced_run(&mut tx, tenant, run_id.as_str(), cmd.fencing_token)
                .await?;
            let to = rec
                .run
                .state
                .apply(RunEvent::Complete)
                .map_err(invalid_state)?;
            let run = self
                .finish_run(
                    &mut tx,
                    &rec,
                    to,
                    Some(cmd.fencing_token),
                    Some(Outcome::Output(&cmd.output)),
                )
                .await?;
            Ok(run)
        }
        .await;
        tx.finish(self, result).await
    }

    /// Fenced: a non-terminal run → `failed` with the error; the lease is released.
    pub async fn fail_run(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        cmd: &FailRun,
    ) -> StoreResult<Run> {
        validate::json_object("error", &cmd.error)?;
        let mut tx = self.write_tx().await?;
        let result: StoreResult<_> = async {
            let rec = self
                .fenced_run(&mut tx, tenant, run_id.as_str(), cmd.fencing_token)
                .await?;
            let to = rec.run.state.apply(RunEvent::Fail).map_err(invalid_state)?;
            let run = self
                .finish_run(
                    &mut tx,
                    &rec,
                    to,
                    Some(cmd.fencing_token),
                    Some(Outcome::Error(&cmd.error)),
                )
                .await?;
            Ok(run)
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
}

impl Store {
    /// The checks and writes of `confirm_resumed`; `Ok(Err(message))` when the run was failed
    /// because its policy is stale.
    async fn confirm_resumed_in(
        &self,
        tx: &mut WriteTx,
        tenant: Option<&str>,
        run_id: &RunId,
        cmd: &ConfirmResumed,
    ) -> StoreResult<Result<Run, String>> {
        let rec = self
            .fenced_run(tx, tenant, run_id.as_str(), cmd.fencing_token)
            .await?;
        let to = rec
            .run
            .state
            .apply(RunEvent::Resumed)
            .map_err(invalid_state)?;
        let checkpoint = latest_checkpoint(tx.conn(), run_id.as_str()).await?;
        let expected = expected_hashes(&rec.run);
        let mut mismatches = Vec::new();
        if cmd.resolved_spec_hash != expected.resolved_spec_hash {
            mismatches.push("resolved_spec_hash differs from the run's");
        }
        if checkpoint
            .as_ref()
            .is_some_and(|c| c.resolved_spec_hash != cmd.resolved_spec_hash)
        {
            mismatches.push("resolved_spec_hash differs from the checkpoint's");
        }
        if expected.spec_hash.is_some() && cmd.spec_hash != expected.spec_hash {
            mismatches.push("spec_hash is missing or differs from the sandbox spec's");
        }
        if expected.policy_hash.is_some() && cmd.policy_hash != expected.policy_hash {
            mismatches.push("policy_hash is missing or differs from the sandbox spec's");
        }
        let session = rec.run.session_id.as_str().to_owned();
        if !mismatches.is_empty() {
            let message = format!(
                "the run was failed because its policy is stale: {}",
                mismatches.join("; ")
            );
            let error = json!({ "code": "sandbox.policy_stale", "message": message });
            self.finish_run(
                tx,
                &rec,
                RunState::Failed,
                Some(cmd.fencing_token),
                Some(Outcome::Error(&error)),
            )
            .await?;
            return Ok(Err(message));
        }
        let run = self
            .set_run_state(tx, &rec, to, Some(cmd.fencing_token), None)
            .await?;
        sqlx::query(
            "UPDATE suspensions SET status = 'resolved', resolved_at = $2 \
             WHERE run_id = $1 AND status = 'resolving'",
        )
        .bind(run_id.as_str())
        .bind(to_millis(tx.now))
        .execute(tx.conn())
        .await?;
        tx.event(&session, "run.running", json!({ "run_id": run_id }));
        Ok(Ok(run))
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
            let (kind, run) = match l.prev_state {
                RunState::Queued => {
                    let to = rec
                        .run
                        .state
                        .apply(RunEvent::Start)
                        .map_err(invalid_state)?;
                    let run = self
                        .set_run_state(tx, &rec, to, Some(l.fencing_token), None)
                        .await?;
                    tx.event(
                        &l.session_id,
                        "run.started",
                        json!({ "run_id": run.id, "worker_id": worker_id }),
                    );
                    (ClaimKind::Start, run)
                }
                RunState::Running if checkpoint.is_none() => (ClaimKind::Start, rec.run),
                _ => (ClaimKind::Resume, rec.run),
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
