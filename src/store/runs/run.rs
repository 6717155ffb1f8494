use serde_json::json;

use crate::domain::audit::AuditEntry;
use crate::domain::commands::CreateRun;
use crate::domain::decide::transition;
use crate::domain::interaction::Resolver;
use crate::domain::run::{LeaseHolder, Run, RunReadBack};
use crate::domain::{RunId, SessionId, SuspensionId};
use crate::store::admin::idempotency::IdempotencyClaim;
use crate::store::engine::records::{OpenSuspension, RunRecord};
use crate::store::engine::rows::{self};
use crate::store::engine::tx::WriteTx;
use crate::store::engine::{Store, StoreError, StoreResult};
use crate::store::runs::create_batch::RunItem;
use crate::store::runs::transition_batch::{Transition, TransitionItem};

impl Store {
    /// Creates a `queued` run (the spec is already validated by the caller). The session must
    /// be visible to `tenant` (`NotFound("session")`); a `parent_run_id` must be a run of the
    /// same session (`Invalid` on `parent_run_id`); a spec's provider must be registered
    /// (`Invalid` on `sandbox_spec.provider_id`), and the run gets its execution-resource
    /// record (`provisioning`, due now). Bumps the session revision, logs `run.created`,
    /// publishes the session change and new work. Written through the group commit with the
    /// writes queued beside it.
    pub async fn create_run(
        &self,
        tenant: &str,
        session_id: &SessionId,
        cmd: &CreateRun,
    ) -> StoreResult<Run> {
        self.create_run_keyed(tenant, session_id, cmd, None).await
    }

    /// [`Self::create_run`] under an `Idempotency-Key`: the answer is stored under the key
    /// in the transaction that creates the run.
    pub async fn create_run_keyed(
        &self,
        tenant: &str,
        session_id: &SessionId,
        cmd: &CreateRun,
        key: Option<&IdempotencyClaim>,
    ) -> StoreResult<Run> {
        cmd.validate()?;
        self.grouped(RunItem {
            id: RunId::new(),
            tenant: tenant.to_owned(),
            session_id: session_id.clone(),
            cmd: cmd.clone(),
            key: key.cloned(),
        })
        .await
    }

    pub async fn get_run(&self, tenant: Option<&str>, run_id: &RunId) -> StoreResult<Run> {
        let mut conn = self.inner.read.acquire().await?;
        let rec = self
            .visible_run(&mut conn, tenant, run_id.as_str(), false)
            .await?;
        Ok(rec.run)
    }

    /// The run as its runtime reads it back after a lost answer: its live lease holder and
    /// its latest suspension.
    pub async fn read_back_run(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
    ) -> StoreResult<RunReadBack> {
        let mut conn = self.inner.read.acquire().await?;
        let rec = self
            .visible_run(&mut conn, tenant, run_id.as_str(), false)
            .await?;
        let row = sqlx::query(
            "SELECT r.lease_holder, r.lease_expires_at, (SELECT s.id FROM suspensions s \
             WHERE s.run_id = r.id ORDER BY s.requested_at DESC, s.id DESC LIMIT 1) AS suspension \
             FROM runs r WHERE r.id = $1",
        )
        .bind(run_id.as_str())
        .fetch_one(&mut *conn)
        .await?;
        let holder = rows::opt_text(&row, "lease_holder")?;
        let expires_at = rows::opt_time(&row, "lease_expires_at")?;
        let lease = match (holder, expires_at) {
            (Some(worker_id), Some(expires_at)) if expires_at > self.now() => Some(LeaseHolder {
                worker_id,
                expires_at,
            }),
            _ => None,
        };
        Ok(RunReadBack {
            run: rec.run,
            lease,
            latest_suspension_id: rows::opt_text(&row, "suspension")?
                .map(SuspensionId::from_trusted),
        })
    }

    /// Frontend cancel: any non-terminal run → `cancelled` (a terminal one → `Conflict`
    /// `run.terminal`). Its pending interactions become `cancelled`, its open suspension
    /// `cancelled`, its lease is dropped. Revision bump, event, publish. Written through the
    /// group commit with the writes queued beside it.
    pub async fn cancel_run(
        &self,
        tenant: Option<&str>,
        session_id: &SessionId,
        run_id: &RunId,
        by: impl Into<Resolver>,
    ) -> StoreResult<Run> {
        self.write_transition(TransitionItem {
            tenant: tenant.map(str::to_owned),
            run_id: run_id.clone(),
            kind: Transition::Cancel {
                session_id: session_id.clone(),
                by: by.into(),
            },
        })
        .await
    }

    /// Explicit resume of a `suspended` run whose suspension has no pending interaction
    /// (`Conflict` `interaction.pending` if it has one, `run.not_suspended` if not suspended):
    /// suspension → `resolving`, run → `resuming`. Revision bump, event, publish session + work.
    /// Written through the group commit with the writes queued beside it.
    pub async fn resume_run(
        &self,
        tenant: Option<&str>,
        session_id: &SessionId,
        run_id: &RunId,
        resolved_by: &str,
    ) -> StoreResult<Run> {
        self.write_transition(TransitionItem {
            tenant: tenant.map(str::to_owned),
            run_id: run_id.clone(),
            kind: Transition::Resume {
                session_id: session_id.clone(),
                resolved_by: resolved_by.to_owned(),
            },
        })
        .await
    }

    /// The run, locked, if it is visible to `tenant` and belongs to `session_id`.
    async fn session_run(
        &self,
        tx: &mut WriteTx,
        tenant: Option<&str>,
        session_id: &SessionId,
        run_id: &RunId,
    ) -> StoreResult<RunRecord> {
        let rec = self
            .visible_run(tx.conn(), tenant, run_id.as_str(), true)
            .await?;
        if &rec.run.session_id != session_id {
            return Err(StoreError::NotFound("run"));
        }
        Ok(rec)
    }

    /// The checks and writes of `cancel_run` in `tx`.
    pub(in crate::store) async fn cancel_in(
        &self,
        tx: &mut WriteTx,
        tenant: Option<&str>,
        session_id: &SessionId,
        run_id: &RunId,
        by: &Resolver,
    ) -> StoreResult<Run> {
        let rec = self.session_run(tx, tenant, session_id, run_id).await?;
        let to = transition::cancel(&rec.run)?;
        let run = self.finish_run(tx, &rec, to, None, None).await?;
        tx.audit(AuditEntry {
            tenant: rec.tenant_id.clone(),
            kind: "run.cancelled",
            actor: by.id.clone(),
            actor_name: by.name.clone(),
            subject: run_id.to_string(),
            data: json!({ "session_id": session_id, "from": rec.run.state }),
        });
        Ok(run)
    }

    /// The checks and writes of `resume_run` in `tx`.
    pub(in crate::store) async fn resume_in(
        &self,
        tx: &mut WriteTx,
        tenant: Option<&str>,
        session_id: &SessionId,
        run_id: &RunId,
        resolved_by: &str,
    ) -> StoreResult<Run> {
        let rec = self.session_run(tx, tenant, session_id, run_id).await?;
        let to = transition::resume(&rec.run)?;
        let suspension = self.open_suspension(tx, run_id.as_str()).await?;
        if let Some(OpenSuspension {
            interaction_id: Some(interaction_id),
            ..
        }) = &suspension
        {
            let pending =
                sqlx::query("SELECT id FROM interactions WHERE id = $1 AND status = 'pending'")
                    .bind(interaction_id.as_str())
                    .fetch_optional(tx.conn())
                    .await?;
            transition::resume_waiting_for(pending.is_some().then_some(interaction_id))?;
        }
        if let Some(s) = &suspension {
            sqlx::query("UPDATE suspensions SET status = 'resolving' WHERE id = $1")
                .bind(s.id.as_str())
                .execute(tx.conn())
                .await?;
        }
        let run = self.set_run_state(tx, &rec, to, None, None).await?;
        self.resource_due(tx, run_id.as_str()).await?;
        tx.event(
            session_id.as_str(),
            "run.resuming",
            json!({
                "run_id": run.id,
                "suspension_id": suspension.as_ref().map(|s| s.id.as_str()),
                "resolved_by": resolved_by,
            }),
        );
        tx.runtime_work();
        Ok(run)
    }

    /// The run's `pending` suspension, if any.
    pub(in crate::store) async fn open_suspension(
        &self,
        tx: &mut WriteTx,
        run_id: &str,
    ) -> StoreResult<Option<OpenSuspension>> {
        let row = sqlx::query(
            "SELECT id, interaction_id FROM suspensions WHERE run_id = $1 AND status = 'pending' \
             ORDER BY requested_at DESC, id DESC LIMIT 1",
        )
        .bind(run_id)
        .fetch_optional(tx.conn())
        .await?;
        row.as_ref().map(rows::open_suspension_row).transpose()
    }
}
