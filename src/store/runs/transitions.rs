//! Run transitions the runtime makes under its lease: suspend with a checkpoint (and an
//! interaction), confirm a resume against the bound hashes, complete and fail.

use serde_json::json;

use crate::clock::to_millis;
use crate::domain::commands::{CompleteRun, ConfirmResumed, FailRun, SuspendRun};
use crate::domain::decide::transition::{self, Confirmation};
use crate::domain::decide::{finish, Refusal};
use crate::domain::run::{Run, RunState};
use crate::domain::RunId;
use crate::store::engine::tx::WriteTx;
use crate::store::engine::{Store, StoreResult};
use crate::store::runs::fence::{latest_checkpoint, Outcome};
use crate::store::runs::suspend_batch::SuspendItem;
use crate::store::runs::transition_batch::{Transition, TransitionItem};

/// A rule that ends a run: the state it moves to, or why not.
type Rule = fn(&Run) -> Result<RunState, Refusal>;

impl Store {
    /// Fenced: `running` → `suspended` with a new checkpoint (its sequence must be greater than
    /// the last one's: `Conflict` `checkpoint.sequence`; its hash must equal the run's:
    /// `Invalid` on `checkpoint.resolved_spec_hash`), an optional pending interaction and a
    /// `pending` suspension. Jobs with `cancel` become `killed`. The lease is handed back and
    /// the run's execution resource (if any) becomes due. Written through the group commit
    /// with the writes queued beside it.
    pub async fn suspend_run(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        cmd: &SuspendRun,
    ) -> StoreResult<Run> {
        cmd.validate(self.now())?;
        self.grouped(SuspendItem {
            tenant: tenant.map(str::to_owned),
            run_id: run_id.clone(),
            cmd: cmd.clone(),
        })
        .await
    }

    /// Fenced: `resuming` → `running` after checking the hashes the runtime computed against
    /// the run, its latest checkpoint and its sandbox spec. On a mismatch the run is failed
    /// (`sandbox.policy_stale`), committed, and `PolicyStale` is returned. Written through the
    /// group commit with the writes queued beside it.
    pub async fn confirm_resumed(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        cmd: &ConfirmResumed,
    ) -> StoreResult<Run> {
        cmd.validate()?;
        self.write_transition(TransitionItem {
            tenant: tenant.map(str::to_owned),
            run_id: run_id.clone(),
            kind: Transition::Resumed(cmd.clone()),
        })
        .await
    }

    /// Fenced: `running` → `completed` with the output; the lease is released.
    pub async fn complete_run(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        cmd: &CompleteRun,
    ) -> StoreResult<Run> {
        cmd.validate()?;
        let ending = (finish::complete as Rule, Outcome::Output(&cmd.output));
        self.end_run(tenant, run_id, cmd.fencing_token, ending)
            .await
    }

    /// Fenced: a non-terminal run → `failed` with the error; the lease is released.
    pub async fn fail_run(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        cmd: &FailRun,
    ) -> StoreResult<Run> {
        cmd.validate()?;
        let ending = (finish::fail as Rule, Outcome::Error(&cmd.error));
        self.end_run(tenant, run_id, cmd.fencing_token, ending)
            .await
    }

    /// The run under `token`, ended as `rule` decides, with `outcome`.
    async fn end_run(
        &self,
        tenant: Option<&str>,
        run_id: &RunId,
        token: i64,
        (rule, outcome): (Rule, Outcome<'_>),
    ) -> StoreResult<Run> {
        let mut tx = self.write_tx().await?;
        let result: StoreResult<_> = async {
            let rec = self
                .fenced_run(&mut tx, tenant, run_id.as_str(), token)
                .await?;
            let to = rule(&rec.run)?;
            self.finish_run(&mut tx, &rec, to, Some(token), Some(outcome))
                .await
        }
        .await;
        tx.finish(self, result).await
    }
}

impl Store {
    /// The checks and writes of `confirm_resumed`; `Ok(Err(message))` when the run was failed
    /// because its policy is stale.
    pub(in crate::store) async fn confirm_resumed_in(
        &self,
        tx: &mut WriteTx,
        tenant: Option<&str>,
        run_id: &RunId,
        cmd: &ConfirmResumed,
    ) -> StoreResult<Result<Run, String>> {
        let rec = self
            .fenced_run(tx, tenant, run_id.as_str(), cmd.fencing_token)
            .await?;
        let to = transition::confirm_resumed(&rec.run)?;
        let checkpoint = latest_checkpoint(tx.conn(), run_id.as_str()).await?;
        let session = rec.run.session_id.as_str().to_owned();
        if let Confirmation::PolicyStale { message, error } =
            transition::check_hashes(&rec.run, checkpoint.as_ref(), cmd)
        {
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
}
