//! Suspensions written in groups: every run is locked and fenced first, each suspension
//! checked on its own, then all written with one statement per table.

use std::collections::HashMap;

use serde_json::json;

use crate::clock::to_millis;
use crate::domain::commands::SuspendRun;
use crate::domain::decide::{suspend, Refusal};
use crate::domain::run::{Run, RunState};
use crate::domain::tenant;
use crate::domain::{CheckpointId, InteractionId, RunId, SuspensionId};
use crate::store::engine::group::{Answers, GroupedWrite};
use crate::store::engine::params::{bind_ids, pairs, params, value_rows};
use crate::store::engine::records::RunRecord;
use crate::store::engine::rows::{self, RUN_RETURNING};
use crate::store::engine::tx::WriteTx;
use crate::store::engine::visible::sees;
use crate::store::engine::{Store, StoreError, StoreResult};

/// Parameters per row of the interactions insert (`$1` is the shared `now`).
const INTERACTION_PARAMS: usize = 11;

/// One queued suspension, as the runtime asked it.
#[derive(Debug)]
pub(in crate::store) struct SuspendItem {
    pub tenant: Option<String>,
    pub run_id: RunId,
    pub cmd: SuspendRun,
}

/// A suspension that passed its checks, with the ids of the rows it writes.
struct Suspending<'a> {
    index: usize,
    item: &'a SuspendItem,
    rec: &'a RunRecord,
    to: RunState,
    checkpoint_id: CheckpointId,
    interaction_id: Option<InteractionId>,
    suspension_id: SuspensionId,
}

impl GroupedWrite for SuspendItem {
    type Answer = Run;
    /// First: a group locks the runs it suspends before it writes anything else.
    const ORDER: u8 = 0;
    const TRANSACTION: u8 = 0;

    fn key(&self) -> &str {
        self.run_id.as_str()
    }

    async fn write_batch<'a>(
        store: &'a Store,
        tx: &'a mut WriteTx,
        items: &'a [&'a Self],
    ) -> StoreResult<Answers<Run>> {
        let answers = store.suspend_runs_in(tx, items).await?;
        Ok(answers.into_iter().map(Some).collect())
    }
}

impl Store {
    /// The suspensions of `items` (one per run) in `tx`: each one's answer, in order.
    pub(in crate::store) async fn suspend_runs_in(
        &self,
        tx: &mut WriteTx,
        items: &[&SuspendItem],
    ) -> StoreResult<Vec<StoreResult<Run>>> {
        let mut ids: Vec<&str> = items.iter().map(|i| i.run_id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        let runs = self.load_runs(tx.conn(), &ids, true).await?;
        let sequences = last_sequences(tx, &ids).await?;

        let mut answers: Vec<Option<StoreResult<Run>>> = Vec::with_capacity(items.len());
        let mut suspending = Vec::new();
        for (index, item) in items.iter().enumerate() {
            let rec = runs
                .get(item.run_id.as_str())
                .filter(|rec| sees(item.tenant.as_deref(), &rec.tenant_id));
            let checked = match rec {
                None => Err(StoreError::NotFound("run")),
                Some(rec) => self
                    .check_suspend(item, rec, sequences.get(item.run_id.as_str()), tx)
                    .map(|to| (rec, to)),
            };
            match checked {
                Err(e) => answers.push(Some(Err(e))),
                Ok((rec, to)) => {
                    answers.push(None);
                    suspending.push(Suspending {
                        index,
                        item,
                        rec,
                        to,
                        checkpoint_id: CheckpointId::new(),
                        interaction_id: item.cmd.interaction.as_ref().map(|_| InteractionId::new()),
                        suspension_id: SuspensionId::new(),
                    });
                }
            }
        }
        if !suspending.is_empty() {
            self.insert_suspensions(tx, &suspending).await?;
            self.kill_cancelled_jobs(tx, &suspending).await?;
            let mut written = self.write_suspended(tx, &suspending).await?;
            let due: Vec<&str> = suspending.iter().map(|s| s.item.run_id.as_str()).collect();
            self.resources_due(tx, &due).await?;
            for s in &suspending {
                let run = written
                    .remove(s.item.run_id.as_str())
                    .ok_or_else(|| self.lease_lost())?;
                suspended_events(tx, s);
                answers[s.index] = Some(Ok(run));
            }
        }
        Ok(answers
            .into_iter()
            .map(|a| a.unwrap_or(Err(StoreError::NotFound("run"))))
            .collect())
    }

    /// The checks of one suspension (`suspend::decide`: the fence, the transition, the
    /// checkpoint's hash and sequence); a lost lease is counted.
    fn check_suspend(
        &self,
        item: &SuspendItem,
        rec: &RunRecord,
        last_sequence: Option<&i64>,
        tx: &WriteTx,
    ) -> StoreResult<RunState> {
        let found = suspend::Found {
            run: &rec.run,
            lease: &rec.lease,
            last_sequence: last_sequence.copied(),
        };
        suspend::decide(found, &item.cmd, tx.now).map_err(|r| match r {
            Refusal::LeaseLost => self.lease_lost(),
            r => r.into(),
        })
    }

    /// The checkpoints, the interactions and the suspensions: one statement each.
    async fn insert_suspensions(
        &self,
        tx: &mut WriteTx,
        suspending: &[Suspending<'_>],
    ) -> StoreResult<()> {
        let now = to_millis(tx.now);
        let sql = format!(
            "INSERT INTO checkpoints (id, run_id, sequence, codec_version, state, \
             resolved_spec_hash, created_at) VALUES {}",
            tuples(suspending.len(), 6)
        );
        let mut insert = sqlx::query(&sql).bind(now);
        for s in suspending {
            let c = &s.item.cmd.checkpoint;
            insert = insert
                .bind(s.checkpoint_id.as_str())
                .bind(s.item.run_id.as_str())
                .bind(c.sequence)
                .bind(c.codec_version.as_str())
                .bind(rows::to_json(&c.state)?)
                .bind(c.resolved_spec_hash.as_str());
        }
        insert.execute(tx.conn()).await?;

        let asking: Vec<&Suspending> = suspending
            .iter()
            .filter(|s| s.interaction_id.is_some())
            .collect();
        if !asking.is_empty() {
            let sql = format!(
                "INSERT INTO interactions (id, run_id, session_id, tenant_id, interaction_type, \
                 status, allowed_decisions, payload, revision, requested_at, expires_at, \
                 on_expiry, expiry_decision, warn_at) VALUES {}",
                (0..asking.len())
                    .map(|r| {
                        let p = |k: usize| format!("${}", 2 + r * INTERACTION_PARAMS + k);
                        format!(
                            "({}, {}, {}, {}, {}, 'pending', {}, {}, 1, $1, {}, {}, {}, {})",
                            p(0),
                            p(1),
                            p(2),
                            p(3),
                            p(4),
                            p(5),
                            p(6),
                            p(7),
                            p(8),
                            p(9),
                            p(10)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let mut tenants: Vec<&str> = asking
                .iter()
                .filter(|s| {
                    s.item
                        .cmd
                        .interaction
                        .as_ref()
                        .is_some_and(|i| !i.names_expiry())
                })
                .map(|s| s.rec.tenant_id.as_str())
                .collect();
            tenants.sort_unstable();
            tenants.dedup();
            let defaults = self.expiry_defaults(tx, &tenants).await?;
            let mut insert = sqlx::query(&sql).bind(now);
            for s in asking {
                let (Some(id), Some(asked)) = (&s.interaction_id, &s.item.cmd.interaction) else {
                    continue;
                };
                let i = &tenant::with_default_expiry(asked, defaults.get(&s.rec.tenant_id));
                let policy = i.on_expiry.clone().unwrap_or_default();
                insert = insert
                    .bind(id.as_str())
                    .bind(s.item.run_id.as_str())
                    .bind(s.rec.run.session_id.as_str())
                    .bind(s.rec.tenant_id.as_str())
                    .bind(i.interaction_type.as_str())
                    .bind(rows::to_json(&i.allowed_decisions)?)
                    .bind(rows::to_json(&i.payload)?)
                    .bind(i.deadline(tx.now).map(to_millis))
                    .bind(policy.action.as_str())
                    .bind(policy.decision)
                    .bind(i.warn_at(tx.now).map(to_millis));
            }
            insert.execute(tx.conn()).await?;
        }

        let sql = format!(
            "INSERT INTO suspensions (id, run_id, reason, status, checkpoint_id, interaction_id, \
             requested_at) VALUES {}",
            (0..suspending.len())
                .map(|r| {
                    let p = |k: usize| format!("${}", 2 + r * 5 + k);
                    format!(
                        "({}, {}, {}, 'pending', {}, {}, $1)",
                        p(0),
                        p(1),
                        p(2),
                        p(3),
                        p(4)
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut insert = sqlx::query(&sql).bind(now);
        for s in suspending {
            insert = insert
                .bind(s.suspension_id.as_str())
                .bind(s.item.run_id.as_str())
                .bind(s.item.cmd.reason.as_str())
                .bind(s.checkpoint_id.as_str())
                .bind(s.interaction_id.as_ref().map(InteractionId::as_str));
        }
        insert.execute(tx.conn()).await?;
        Ok(())
    }

    /// Jobs of the runs whose pause behaviour is `cancel` → `killed`, each logged.
    async fn kill_cancelled_jobs(
        &self,
        tx: &mut WriteTx,
        suspending: &[Suspending<'_>],
    ) -> StoreResult<()> {
        let ids: Vec<&str> = suspending.iter().map(|s| s.item.run_id.as_str()).collect();
        let killed_states: Vec<String> =
            suspend::killed_states().map(|s| format!("'{s}'")).collect();
        let sql = format!(
            "UPDATE jobs SET state = 'killed', updated_at = $1 WHERE run_id IN ({}) \
             AND pause_behavior = '{}' AND state IN ({}) \
             RETURNING id, run_id",
            params(2, ids.len()),
            suspend::KILLED_ON_SUSPEND,
            killed_states.join(", ")
        );
        let query = sqlx::query(&sql).bind(to_millis(tx.now));
        let killed = bind_ids(query, &ids).fetch_all(tx.conn()).await?;
        let sessions: HashMap<&str, &str> = suspending
            .iter()
            .map(|s| (s.item.run_id.as_str(), s.rec.run.session_id.as_str()))
            .collect();
        for row in &killed {
            let job_id = rows::text(row, "id")?;
            let run_id = rows::text(row, "run_id")?;
            if let Some(session) = sessions.get(run_id.as_str()) {
                tx.event(
                    session,
                    "job.killed",
                    json!({ "job_id": job_id, "run_id": run_id }),
                );
            }
        }
        Ok(())
    }

    /// The runs → `suspended`, their leases handed back, in one statement fenced on each
    /// run's token; the runs as written, by id.
    async fn write_suspended(
        &self,
        tx: &mut WriteTx,
        suspending: &[Suspending<'_>],
    ) -> StoreResult<HashMap<String, Run>> {
        let sql = format!(
            "UPDATE runs SET state = v.column2, revision = revision + 1, \
             updated_at = CASE WHEN v.column3 = 1 THEN $1 ELSE updated_at END, \
             lease_id = NULL, lease_holder = NULL, fencing_token = NULL, \
             lease_expires_at = NULL FROM (VALUES {}) AS v \
             WHERE runs.id = v.column1 AND runs.fencing_token = v.column4 \
             RETURNING {RUN_RETURNING}",
            value_rows(2, suspending.len(), 4)
        );
        let mut update = sqlx::query(&sql).bind(to_millis(tx.now));
        for s in suspending {
            let status_changes = s.rec.run.state.status() != s.to.status();
            update = update
                .bind(s.item.run_id.as_str())
                .bind(s.to.as_str())
                .bind(i64::from(status_changes))
                .bind(s.item.cmd.fencing_token);
        }
        let mut written = HashMap::new();
        for row in update.fetch_all(tx.conn()).await? {
            let run = rows::run(&row)?;
            written.insert(run.id.as_str().to_owned(), run);
        }
        for s in suspending {
            if s.rec.run.state.status() != s.to.status() {
                tx.visible(s.rec.run.session_id.as_str());
            }
        }
        Ok(written)
    }
}

/// `($2, …, $n+1, $1), …`: `rows` tuples of `cols` parameters each, then the time in `$1`.
fn tuples(rows: usize, cols: usize) -> String {
    (0..rows)
        .map(|r| format!("({}, $1)", params(2 + r * cols, cols)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The last checkpoint sequence of each run among `ids` that has one.
async fn last_sequences(tx: &mut WriteTx, ids: &[&str]) -> StoreResult<HashMap<String, i64>> {
    let sql = format!(
        "SELECT run_id, MAX(sequence) AS sequence FROM checkpoints WHERE run_id IN ({}) \
         GROUP BY run_id",
        params(1, ids.len())
    );
    pairs(tx.conn(), &sql, ids, |row| {
        Ok((rows::text(row, "run_id")?, rows::int(row, "sequence")?))
    })
    .await
}

fn suspended_events(tx: &mut WriteTx, s: &Suspending<'_>) {
    let session = s.rec.run.session_id.as_str();
    let run_id = s.item.run_id.as_str();
    tx.event(
        session,
        "run.suspended",
        json!({
            "run_id": run_id,
            "reason": s.item.cmd.reason,
            "suspension_id": s.suspension_id,
            "checkpoint_id": s.checkpoint_id,
        }),
    );
    if let (Some(interaction_id), Some(i)) = (&s.interaction_id, &s.item.cmd.interaction) {
        tx.inbox(session);
        tx.event(
            session,
            "interaction.created",
            json!({
                "interaction_id": interaction_id,
                "run_id": run_id,
                "interaction_type": i.interaction_type,
            }),
        );
    }
}
