//! Run reads and writes shared by the use cases: loading (and locking) a run, the fence,
//! state writes that keep revisions honest, and closing what a finished run leaves open.

use serde_json::{json, Value};
use sqlx::AnyConnection;
use sqlx::Row;

use crate::clock::to_millis;
use crate::domain::decide::finish;
use crate::domain::interaction::Checkpoint;
use crate::domain::run::{Run, RunState};
use crate::metrics::Metrics;
use crate::store::engine::records::RunRecord;
use crate::store::engine::rows::{self, CHECKPOINT_COLS, RUN_RETURNING};
use crate::store::engine::tx::WriteTx;
use crate::store::engine::visible::sees;
use crate::store::engine::{Store, StoreError, StoreResult};

/// What a run ends with, stored alongside its new state.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) enum Outcome<'a> {
    Output(&'a Value),
    Error(&'a Value),
}

pub(in crate::store) async fn latest_checkpoint(
    conn: &mut AnyConnection,
    run_id: &str,
) -> StoreResult<Option<Checkpoint>> {
    let sql = format!(
        "SELECT {CHECKPOINT_COLS} FROM checkpoints c WHERE c.run_id = $1 \
         ORDER BY c.sequence DESC LIMIT 1"
    );
    let row = sqlx::query(&sql).bind(run_id).fetch_optional(conn).await?;
    row.as_ref().map(rows::checkpoint).transpose()
}

impl Store {
    /// The run with its lease and tenant; locked for the rest of the transaction if `lock`.
    pub(in crate::store) async fn load_run(
        &self,
        conn: &mut AnyConnection,
        run_id: &str,
        lock: bool,
    ) -> StoreResult<Option<RunRecord>> {
        let sql = format!(
            "{} WHERE r.id = $1{}",
            self.select_run_record(),
            if lock { self.lock_run() } else { "" }
        );
        let row = sqlx::query(&sql).bind(run_id).fetch_optional(conn).await?;
        row.as_ref().map(rows::run_record).transpose()
    }

    /// The run locked, if the caller may see it (`NotFound("run")` otherwise).
    pub(in crate::store) async fn visible_run(
        &self,
        conn: &mut AnyConnection,
        tenant: Option<&str>,
        run_id: &str,
        lock: bool,
    ) -> StoreResult<RunRecord> {
        match self.load_run(conn, run_id, lock).await? {
            Some(rec) if sees(tenant, &rec.tenant_id) => Ok(rec),
            _ => Err(StoreError::NotFound("run")),
        }
    }

    pub(in crate::store) fn lease_lost(&self) -> StoreError {
        Metrics::inc(&self.inner.metrics.fenced_rejections);
        StoreError::LeaseLost
    }

    /// The run locked, after checking that `token` holds its live lease.
    pub(in crate::store) async fn fenced_run(
        &self,
        tx: &mut WriteTx,
        tenant: Option<&str>,
        run_id: &str,
        token: i64,
    ) -> StoreResult<RunRecord> {
        let rec = self.visible_run(tx.conn(), tenant, run_id, true).await?;
        rec.lease
            .check(token, tx.now)
            .map_err(|_| self.lease_lost())?;
        Ok(rec)
    }

    /// Writes the run's new state (and output or error), bumping its revision. With a
    /// `fence`, the write lands only while that token still holds the run. Returns the run.
    pub(in crate::store) async fn set_run_state(
        &self,
        tx: &mut WriteTx,
        rec: &RunRecord,
        to: RunState,
        fence: Option<i64>,
        outcome: Option<Outcome<'_>>,
    ) -> StoreResult<Run> {
        let status_changes = rec.run.state.status() != to.status();
        let updated_at = if status_changes {
            tx.now
        } else {
            rec.run.updated_at
        };
        let (output, error) = match outcome {
            Some(Outcome::Output(v)) => (Some(rows::to_json(v)?), None),
            Some(Outcome::Error(v)) => (None, Some(rows::to_json(v)?)),
            None => (None, None),
        };
        let sql = format!(
            "UPDATE runs SET state = $2, revision = revision + 1, updated_at = $3, \
             output = COALESCE($4, output), error = COALESCE($5, error) \
             WHERE id = $1 AND ($6 IS NULL OR fencing_token = $6) RETURNING {RUN_RETURNING}"
        );
        let row = sqlx::query(&sql)
            .bind(rec.run.id.as_str())
            .bind(to.as_str())
            .bind(to_millis(updated_at))
            .bind(output)
            .bind(error)
            .bind(fence)
            .fetch_optional(tx.conn())
            .await?;
        let run = match row {
            Some(row) => rows::run(&row)?,
            None if fence.is_some() => return Err(self.lease_lost()),
            None => return Err(StoreError::NotFound("run")),
        };
        if status_changes {
            tx.visible(rec.run.session_id.as_str());
        }
        Ok(run)
    }

    pub(in crate::store) async fn drop_lease(
        &self,
        tx: &mut WriteTx,
        run_id: &str,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE runs SET lease_id = NULL, lease_holder = NULL, fencing_token = NULL, \
             lease_expires_at = NULL WHERE id = $1",
        )
        .bind(run_id)
        .execute(tx.conn())
        .await?;
        Ok(())
    }

    /// Ends a run (`completed`, `failed` or `cancelled`): writes the state, drops the lease,
    /// makes its execution resource due (no compute outlives its run), cancels its pending
    /// interactions and its open suspension, and logs it all.
    pub(in crate::store) async fn finish_run(
        &self,
        tx: &mut WriteTx,
        rec: &RunRecord,
        to: RunState,
        fence: Option<i64>,
        outcome: Option<Outcome<'_>>,
    ) -> StoreResult<Run> {
        let run = self.set_run_state(tx, rec, to, fence, outcome).await?;
        self.drop_lease(tx, run.id.as_str()).await?;
        self.resource_due(tx, run.id.as_str()).await?;
        let session = run.session_id.as_str().to_owned();
        let sql = format!(
            "UPDATE interactions SET status = 'cancelled', revision = revision + 1 \
             WHERE run_id = $1 AND status = '{}' RETURNING id",
            finish::CANCELLED_INTERACTIONS
        );
        let cancelled = sqlx::query(&sql)
            .bind(run.id.as_str())
            .fetch_all(tx.conn())
            .await?;
        for row in &cancelled {
            let id: String = row.try_get("id")?;
            tx.inbox(&session);
            tx.event(
                &session,
                "interaction.cancelled",
                json!({ "interaction_id": id, "run_id": run.id }),
            );
        }
        let open: Vec<String> = finish::CANCELLED_SUSPENSIONS
            .iter()
            .map(|s| format!("'{s}'"))
            .collect();
        let sql = format!(
            "UPDATE suspensions SET status = 'cancelled', resolved_at = $2 \
             WHERE run_id = $1 AND status IN ({}) RETURNING id",
            open.join(", ")
        );
        let suspensions = sqlx::query(&sql)
            .bind(run.id.as_str())
            .bind(to_millis(tx.now))
            .fetch_all(tx.conn())
            .await?;
        for row in &suspensions {
            let id: String = row.try_get("id")?;
            tx.event(
                &session,
                "suspension.cancelled",
                json!({ "suspension_id": id, "run_id": run.id }),
            );
        }
        let kind = finish::ended_event(to);
        let mut data = json!({ "run_id": run.id, "from": rec.run.state, "state": to });
        if let (Some(Outcome::Error(err)), Some(obj)) = (outcome, data.as_object_mut()) {
            if let Some(code) = finish::error_code(err) {
                obj.insert("code".into(), code.clone());
            }
        }
        tx.event(&session, kind, data);
        Ok(run)
    }
}
