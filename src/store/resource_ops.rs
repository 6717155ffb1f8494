//! The execution-resource side of the other use cases: the record created with its run, the
//! hooks that make a record due again when something it depends on changes, and the reads
//! and the fenced write the coordinator needs.
//!
//! Every hook also bumps the record's `version`: a coordinator that planned from the earlier
//! state then fails its compare-and-set instead of overwriting the wake-up.

use sqlx::AnyConnection;

use super::rows::{self, JOB_COLS, RESOURCE_COLS, SUSPENSION_COLS};
use super::tx::WriteTx;
use super::{Store, StoreResult};
use crate::clock::to_millis;
use crate::domain::interaction::Suspension;
use crate::domain::job::Job;
use crate::domain::validate::ValidationError;
use crate::domain::RunId;
use crate::lifecycle::machine::ResourceState;
use crate::lifecycle::record::ExecutionResourceRecord;
use crate::providers::spec::ResolvedSandboxSpec;

/// `due_at` becomes `$2` unless it is already earlier.
const DUE_NOW: &str = "CASE WHEN due_at IS NOT NULL AND due_at < $2 THEN due_at ELSE $2 END";

/// The session-log event type for a record entering `state`.
pub(super) fn lifecycle_event(state: ResourceState) -> &'static str {
    match state {
        ResourceState::Provisioning => "lifecycle.provisioning",
        ResourceState::Active => "lifecycle.active",
        ResourceState::ReleaseBlocked => "lifecycle.release_blocked",
        ResourceState::ReleaseRequested => "lifecycle.release_requested",
        ResourceState::ReleaseFailed => "lifecycle.release_failed",
        ResourceState::Released => "lifecycle.released",
        ResourceState::RestoreRequested => "lifecycle.restore_requested",
    }
}

fn bool_flag(value: bool) -> i64 {
    i64::from(value)
}

impl Store {
    /// A run's sandbox spec must name a registered provider.
    pub(super) async fn ensure_provider(
        &self,
        conn: &mut AnyConnection,
        provider_id: &str,
    ) -> StoreResult<()> {
        let found = sqlx::query("SELECT provider_id FROM providers WHERE provider_id = $1")
            .bind(provider_id)
            .fetch_optional(conn)
            .await?;
        match found {
            Some(_) => Ok(()),
            None => Err(ValidationError::new(
                "sandbox_spec.provider_id",
                format!("provider `{provider_id}` is not registered"),
            )
            .into()),
        }
    }

    /// The record of a new run: `provisioning`, generation 0, due now, version 1.
    pub(super) async fn insert_resource(
        &self,
        tx: &mut WriteTx,
        run_id: &RunId,
        spec: &ResolvedSandboxSpec,
        run_resolved_spec_hash: &str,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO execution_resources (run_id, generation, provider_id, sandbox_ref, \
             sandbox_spec, run_resolved_spec_hash, state, checkpoint_lost, blocking_job_ids, \
             blocking_child_run_ids, compute_released, retry_count, due_at, version, \
             state_since, created_at, updated_at) \
             VALUES ($1, 0, $2, NULL, $3, $4, 'provisioning', 0, '[]', '[]', 0, 0, $5, 1, \
             $5, $5, $5)",
        )
        .bind(run_id.as_str())
        .bind(&spec.provider_id)
        .bind(rows::to_json(spec)?)
        .bind(run_resolved_spec_hash)
        .bind(to_millis(tx.now))
        .execute(tx.conn())
        .await?;
        tx.work();
        Ok(())
    }

    /// The run changed in a way its compute must follow: its record (if any) is due now.
    pub(super) async fn resource_due(&self, tx: &mut WriteTx, run_id: &str) -> StoreResult<()> {
        let sql = format!(
            "UPDATE execution_resources SET due_at = {DUE_NOW}, version = version + 1, \
             updated_at = $2 WHERE run_id = $1"
        );
        let done = sqlx::query(&sql)
            .bind(run_id)
            .bind(to_millis(tx.now))
            .execute(tx.conn())
            .await?;
        if done.rows_affected() > 0 {
            tx.work();
        }
        Ok(())
    }

    /// Something that may hold `run_id`'s sandbox went away (a job finished, a descendant's
    /// compute was released): a `release_blocked` record is due now; an `active` one (whose
    /// coordinator may be deciding to block) gets a new version.
    pub(super) async fn resource_unblocked(
        &self,
        tx: &mut WriteTx,
        run_id: &str,
    ) -> StoreResult<()> {
        let sql = format!(
            "UPDATE execution_resources SET version = version + 1, updated_at = $2, \
             due_at = CASE WHEN state = 'release_blocked' THEN {DUE_NOW} ELSE due_at END \
             WHERE run_id = $1 AND state IN ('active', 'release_blocked') RETURNING state"
        );
        let row = sqlx::query(&sql)
            .bind(run_id)
            .bind(to_millis(tx.now))
            .fetch_optional(tx.conn())
            .await?;
        if let Some(row) = row {
            if rows::enumeration::<ResourceState>(&row, "state")? == ResourceState::ReleaseBlocked {
                tx.work();
            }
        }
        Ok(())
    }

    /// A run's compute was released: every ancestor's record is re-evaluated. Ancestors are
    /// locked nearest first, the order in which every writer climbs the tree from its own
    /// record, so two writers never wait on each other.
    pub(super) async fn wake_ancestors(&self, tx: &mut WriteTx, run_id: &str) -> StoreResult<()> {
        let ancestors = sqlx::query(
            "WITH RECURSIVE a (id, depth) AS (\
               SELECT parent_run_id, 1 FROM runs WHERE id = $1 AND parent_run_id IS NOT NULL \
               UNION ALL \
               SELECT r.parent_run_id, a.depth + 1 FROM runs r JOIN a ON r.id = a.id \
               WHERE r.parent_run_id IS NOT NULL) \
             SELECT id FROM a ORDER BY depth",
        )
        .bind(run_id)
        .fetch_all(tx.conn())
        .await?;
        for row in &ancestors {
            let id = rows::text(row, "id")?;
            self.resource_unblocked(tx, &id).await?;
        }
        Ok(())
    }

    pub(super) async fn load_resource(
        &self,
        conn: &mut AnyConnection,
        run_id: &str,
        lock: bool,
    ) -> StoreResult<Option<ExecutionResourceRecord>> {
        let sql = format!(
            "SELECT {RESOURCE_COLS} FROM execution_resources WHERE run_id = $1{}",
            if lock { self.lock_row() } else { "" }
        );
        let row = sqlx::query(&sql).bind(run_id).fetch_optional(conn).await?;
        row.as_ref().map(rows::resource).transpose()
    }

    /// Writes every mutable field of `record` where the stored version still equals
    /// `record.version` and `fencing_token` still holds the run's live lease, in one
    /// statement. `None` when nothing was written.
    pub(super) async fn write_resource(
        &self,
        tx: &mut WriteTx,
        record: &ExecutionResourceRecord,
        fencing_token: i64,
    ) -> StoreResult<Option<ExecutionResourceRecord>> {
        let sql = format!(
            "UPDATE execution_resources SET generation = $3, sandbox_ref = $4, state = $5, \
             disposition = $6, sandbox_checkpoint = $7, checkpoint_lost = $8, \
             suspension_id = $9, suspension_reason = $10, blocking_job_ids = $11, \
             blocking_child_run_ids = $12, release_idempotency_key = $13, \
             release_purpose = $14, release_requested_at = $15, released_at = $16, \
             compute_released = $17, bind_idempotency_key = $18, retry_count = $19, \
             next_retry_at = $20, due_at = $21, error = $22, version = version + 1, \
             state_since = CASE WHEN state = $5 THEN state_since ELSE $23 END, \
             updated_at = $23, provider_generation = $25 \
             WHERE run_id = $1 AND version = $2 AND EXISTS (SELECT 1 FROM runs \
               WHERE id = $1 AND fencing_token = $24 AND lease_expires_at > $23) \
             RETURNING {RESOURCE_COLS}"
        );
        let row = sqlx::query(&sql)
            .bind(record.run_id.as_str())
            .bind(record.version)
            .bind(record.generation)
            .bind(record.sandbox_ref.as_ref().map(rows::to_json).transpose()?)
            .bind(record.state.as_str())
            .bind(record.disposition.map(|d| d.as_str()))
            .bind(
                record
                    .sandbox_checkpoint
                    .as_ref()
                    .map(rows::to_json)
                    .transpose()?,
            )
            .bind(bool_flag(record.checkpoint_lost))
            .bind(record.suspension_id.as_ref().map(|s| s.as_str()))
            .bind(record.suspension_reason.map(|r| r.as_str()))
            .bind(rows::to_json(&record.blocking_job_ids)?)
            .bind(rows::to_json(&record.blocking_child_run_ids)?)
            .bind(record.release_idempotency_key.as_deref())
            .bind(record.release_purpose.map(|p| p.as_str()))
            .bind(record.release_requested_at.map(to_millis))
            .bind(record.released_at.map(to_millis))
            .bind(bool_flag(record.compute_released))
            .bind(record.bind_idempotency_key.as_deref())
            .bind(record.retry_count)
            .bind(record.next_retry_at.map(to_millis))
            .bind(record.due_at.map(to_millis))
            .bind(record.error.as_ref().map(rows::to_json).transpose()?)
            .bind(to_millis(tx.now))
            .bind(fencing_token)
            .bind(record.provider_generation)
            .fetch_optional(tx.conn())
            .await?;
        row.as_ref().map(rows::resource).transpose()
    }

    /// The run's jobs, oldest first.
    pub(super) async fn jobs_of(
        &self,
        conn: &mut AnyConnection,
        run_id: &str,
    ) -> StoreResult<Vec<Job>> {
        let sql = format!(
            "SELECT {JOB_COLS} FROM jobs j WHERE j.run_id = $1 ORDER BY j.created_at, j.id"
        );
        sqlx::query(&sql)
            .bind(run_id)
            .fetch_all(conn)
            .await?
            .iter()
            .map(rows::job)
            .collect()
    }

    /// Every descendant run (any depth) that has a record, with the record's state.
    pub(super) async fn descendant_resources(
        &self,
        conn: &mut AnyConnection,
        run_id: &str,
    ) -> StoreResult<Vec<(RunId, ResourceState)>> {
        let descendants = sqlx::query(
            "WITH RECURSIVE d (id) AS (\
               SELECT id FROM runs WHERE parent_run_id = $1 \
               UNION ALL \
               SELECT r.id FROM runs r JOIN d ON r.parent_run_id = d.id) \
             SELECT e.run_id, e.state FROM d CROSS JOIN execution_resources e \
             WHERE e.run_id = d.id",
        )
        .bind(run_id)
        .fetch_all(conn)
        .await?;
        // SQLite keeps a CROSS JOIN's left side outer; otherwise it may scan every record and
        // probe `d`. Sorted here: an ORDER BY lets SQLite scan every record in key order too.
        let mut found = descendants
            .iter()
            .map(|row| {
                Ok((
                    RunId::from_trusted(rows::text(row, "run_id")?),
                    rows::enumeration(row, "state")?,
                ))
            })
            .collect::<StoreResult<Vec<_>>>()?;
        found.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(found)
    }

    pub(super) async fn latest_suspension(
        &self,
        conn: &mut AnyConnection,
        run_id: &str,
    ) -> StoreResult<Option<Suspension>> {
        let sql = format!(
            "SELECT {SUSPENSION_COLS} FROM suspensions WHERE run_id = $1 \
             ORDER BY requested_at DESC, id DESC LIMIT 1"
        );
        let row = sqlx::query(&sql).bind(run_id).fetch_optional(conn).await?;
        row.as_ref().map(rows::suspension).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_has_its_own_event() {
        let kinds: std::collections::HashSet<_> = ResourceState::ALL
            .iter()
            .map(|s| lifecycle_event(*s))
            .collect();
        assert_eq!(kinds.len(), ResourceState::ALL.len());
        for s in ResourceState::ALL {
            assert_eq!(lifecycle_event(*s), format!("lifecycle.{s}"));
        }
    }
}
