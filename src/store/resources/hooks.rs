//! The execution-resource side of the other use cases (the record created with its run is
//! in `runs/create_batch.rs`): the hooks that make a record due again when something it depends on changes, and the reads
//! and the fenced write the coordinator needs.
//!
//! Every hook also bumps the record's `version`: a coordinator that planned from the earlier
//! state then fails its compare-and-set instead of overwriting the wake-up.

use sqlx::AnyConnection;

use crate::clock::to_millis;
use crate::domain::resource::ExecutionResourceRecord;
use crate::domain::resource::ResourceState;
use crate::store::engine::params::{bind_ids, params};
use crate::store::engine::rows::{self, RESOURCE_COLS};
use crate::store::engine::tx::WriteTx;
use crate::store::engine::{Store, StoreResult};

/// `due_at` becomes `$1` (now) unless it is already earlier.
pub(in crate::store) const DUE_NOW: &str =
    "CASE WHEN due_at IS NOT NULL AND due_at < $1 THEN due_at ELSE $1 END";

/// The states of a release that was asked for and has not been confirmed.
const RELEASING: &str = "'release_requested', 'release_failed', 'needs_attention'";

/// The session-log event type for a record entering `state`.
pub(in crate::store) fn lifecycle_event(state: ResourceState) -> &'static str {
    match state {
        ResourceState::Provisioning => "lifecycle.provisioning",
        ResourceState::Active => "lifecycle.active",
        ResourceState::ReleaseBlocked => "lifecycle.release_blocked",
        ResourceState::ReleaseRequested => "lifecycle.release_requested",
        ResourceState::ReleaseFailed => "lifecycle.release_failed",
        ResourceState::NeedsAttention => "lifecycle.needs_attention",
        ResourceState::Released => "lifecycle.released",
        ResourceState::RestoreRequested => "lifecycle.restore_requested",
    }
}

impl Store {
    /// The run changed in a way its compute must follow: its record (if any) is due now.
    pub(in crate::store) async fn resource_due(
        &self,
        tx: &mut WriteTx,
        run_id: &str,
    ) -> StoreResult<()> {
        self.resources_due(tx, &[run_id]).await
    }

    /// [`Self::resource_due`] for many runs in one statement.
    pub(in crate::store) async fn resources_due(
        &self,
        tx: &mut WriteTx,
        run_ids: &[&str],
    ) -> StoreResult<()> {
        if run_ids.is_empty() {
            return Ok(());
        }
        let sql = format!(
            "UPDATE execution_resources SET due_at = {DUE_NOW}, version = version + 1, \
             updated_at = $1 WHERE run_id IN ({})",
            params(2, run_ids.len())
        );
        let query = sqlx::query(&sql).bind(to_millis(tx.now));
        let done = bind_ids(query, run_ids).execute(tx.conn()).await?;
        if done.rows_affected() > 0 {
            tx.work();
        }
        Ok(())
    }

    /// Something that may hold `run_id`'s sandbox went away (a job finished, a descendant's
    /// compute was released): a `release_blocked` record is due now; an `active` one (whose
    /// coordinator may be deciding to block) gets a new version.
    pub(in crate::store) async fn resource_unblocked(
        &self,
        tx: &mut WriteTx,
        run_id: &str,
    ) -> StoreResult<()> {
        let sql = format!(
            "UPDATE execution_resources SET version = version + 1, updated_at = $1, \
             due_at = CASE WHEN state = 'release_blocked' THEN {DUE_NOW} ELSE due_at END \
             WHERE run_id = $2 AND state IN ('active', 'release_blocked') RETURNING state"
        );
        let row = sqlx::query(&sql)
            .bind(to_millis(tx.now))
            .bind(run_id)
            .fetch_optional(tx.conn())
            .await?;
        if let Some(row) = row {
            if rows::enumeration::<ResourceState>(&row, "state")? == ResourceState::ReleaseBlocked {
                tx.work();
            }
        }
        Ok(())
    }

    /// A run with a sandbox was created under `run_ids`: a release one of them requested
    /// must look at its new descendant first (due now), and a coordinator planning from an
    /// `active` record fails its compare-and-set and plans again.
    pub(in crate::store) async fn descendant_created(
        &self,
        tx: &mut WriteTx,
        run_ids: &[&str],
    ) -> StoreResult<()> {
        if run_ids.is_empty() {
            return Ok(());
        }
        let sql = format!(
            "UPDATE execution_resources SET version = version + 1, updated_at = $1, \
             due_at = CASE WHEN state IN ({RELEASING}) THEN {DUE_NOW} ELSE due_at END \
             WHERE run_id IN ({}) AND state IN ('active', 'release_blocked', {RELEASING})",
            params(2, run_ids.len())
        );
        let query = sqlx::query(&sql).bind(to_millis(tx.now));
        let done = bind_ids(query, run_ids).execute(tx.conn()).await?;
        if done.rows_affected() > 0 {
            tx.work();
        }
        Ok(())
    }

    pub(in crate::store) async fn load_resource(
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
}

impl Store {
    /// A provider answers again after it could not be reached: every run on it that someone
    /// waits on (resuming, or queued for its first sandbox) and that waits out a retry while
    /// nobody works on it is due now. Returns how many records were woken.
    pub async fn wake_waiting_on(&self, provider_id: &str) -> StoreResult<u64> {
        let mut tx = self.write_tx().await?;
        let result = async {
            let done = sqlx::query(
                "UPDATE execution_resources SET due_at = $1 \
                 WHERE provider_id = $2 AND next_retry_at > $1 AND due_at > $1 \
                   AND run_id IN (SELECT id FROM runs WHERE state IN ('resuming', 'queued') \
                     AND (lease_expires_at IS NULL OR lease_expires_at <= $1))",
            )
            .bind(to_millis(tx.now))
            .bind(provider_id)
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
