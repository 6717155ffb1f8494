use serde_json::json;

use crate::clock::to_millis;
use crate::domain::commands::CreateJob;
use crate::domain::decide::jobs;
use crate::domain::job::{Job, JobState};
use crate::domain::{JobId, RunId};
use crate::store::admin::idempotency::IdempotencyClaim;
use crate::store::engine::rows::{self, JOB_COLS};
use crate::store::engine::visible::sees;
use crate::store::engine::{Store, StoreError, StoreResult};
use crate::store::sessions::create_batch::CREATED;

impl Store {
    /// Fenced: a `running` job for a run in `running` state (defaults: detach, sandbox).
    pub async fn create_job(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        cmd: &CreateJob,
    ) -> StoreResult<Job> {
        self.create_job_keyed(tenant, run_id, cmd, None).await
    }

    /// [`Self::create_job`] under an `Idempotency-Key`: the answer is stored under the key
    /// in the transaction that creates the job.
    pub async fn create_job_keyed(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        cmd: &CreateJob,
        key: Option<&IdempotencyClaim>,
    ) -> StoreResult<Job> {
        cmd.validate()?;
        let mut tx = self.write_tx().await?;
        let result: StoreResult<_> = async {
            let rec = self
                .fenced_run(&mut tx, tenant, run_id.as_str(), cmd.fencing_token)
                .await?;
            let new = jobs::create(&rec.run, cmd)?;
            let id = JobId::new();
            // The fence is part of the insert itself: no row is written unless the token holds.
            let sql = format!(
                "INSERT INTO jobs (id, run_id, kind, payload, pause_behavior, execution_affinity, \
                 state, created_at, updated_at) \
                 SELECT $1, r.id, $3, $4, $5, $6, 'running', $7, $7 FROM runs r \
                 WHERE r.id = $2 AND r.fencing_token = $8 AND r.lease_expires_at > $7 \
                 RETURNING {}",
                rows::JOB_RETURNING
            );
            let row = sqlx::query(&sql)
                .bind(id.as_str())
                .bind(run_id.as_str())
                .bind(&cmd.kind)
                .bind(rows::to_json(&cmd.payload)?)
                .bind(new.pause_behavior.as_str())
                .bind(new.execution_affinity.as_str())
                .bind(to_millis(tx.now))
                .bind(cmd.fencing_token)
                .fetch_optional(tx.conn())
                .await?;
            let Some(row) = row else {
                return Err(self.lease_lost());
            };
            let job = rows::job(&row)?;
            tx.event(
                rec.run.session_id.as_str(),
                "job.created",
                json!({
                    "job_id": job.id,
                    "run_id": run_id,
                    "kind": job.kind,
                    "pause_behavior": job.pause_behavior,
                    "execution_affinity": job.execution_affinity,
                }),
            );
            if let Some(key) = key {
                self.idempotency_answer_in(&mut tx, CREATED, &[(key, &job)])
                    .await?;
            }
            Ok(job)
        }
        .await;
        tx.finish(self, result).await
    }

    /// Not fenced (jobs outlive leases). Forward moves only: `Conflict` `job.finished` /
    /// `job.invalid_transition` otherwise. Setting the current state again is a no-op. A job
    /// that finishes makes its run's `release_blocked` execution resource due.
    pub async fn update_job(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        job_id: &JobId,
        state: JobState,
    ) -> StoreResult<Job> {
        let mut tx = self.write_tx().await?;
        let result: StoreResult<_> = async {
            let sql = format!(
                "SELECT {JOB_COLS}, r.session_id, s.tenant_id FROM jobs j \
                 JOIN runs r ON r.id = j.run_id JOIN sessions s ON s.id = r.session_id \
                 WHERE j.id = $1 AND j.run_id = $2{}",
                self.lock_job()
            );
            let row = sqlx::query(&sql)
                .bind(job_id.as_str())
                .bind(run_id.as_str())
                .fetch_optional(tx.conn())
                .await?;
            let Some(row) = row else {
                return Err(StoreError::NotFound("job"));
            };
            if !sees(tenant, &rows::text(&row, "tenant_id")?) {
                return Err(StoreError::NotFound("job"));
            }
            let job = rows::job(&row)?;
            let session_id = rows::text(&row, "session_id")?;
            let unblocks = match jobs::update(&job, state)? {
                jobs::Update::Unchanged => return Ok(job),
                jobs::Update::Move { unblocks } => unblocks,
            };
            sqlx::query("UPDATE jobs SET state = $2, updated_at = $3 WHERE id = $1")
                .bind(job_id.as_str())
                .bind(state.as_str())
                .bind(to_millis(tx.now))
                .execute(tx.conn())
                .await?;
            if unblocks {
                self.resource_unblocked(&mut tx, run_id.as_str()).await?;
            }
            tx.event(
                &session_id,
                "job.updated",
                json!({ "job_id": job_id, "run_id": run_id, "from": job.state, "state": state }),
            );
            let updated_at = tx.now;
            Ok(Job {
                state,
                updated_at,
                ..job
            })
        }
        .await;
        tx.finish(self, result).await
    }

    pub async fn list_jobs(&self, tenant: Option<&str>, run_id: &RunId) -> StoreResult<Vec<Job>> {
        let mut tx = self.begin_consistent_read().await?;
        self.visible_run(&mut tx, tenant, run_id.as_str(), false)
            .await?;
        let sql = format!(
            "SELECT {JOB_COLS} FROM jobs j WHERE j.run_id = $1 ORDER BY j.created_at, j.id"
        );
        let jobs = sqlx::query(&sql)
            .bind(run_id.as_str())
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(rows::job)
            .collect::<StoreResult<Vec<_>>>()?;
        tx.commit().await?;
        Ok(jobs)
    }
}
