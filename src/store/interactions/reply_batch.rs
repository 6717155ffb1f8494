//! Replies written in groups: every reply queued while another group is being written is
//! checked on its own and written with the others in one transaction and a fixed number of
//! statements. Each keeps its own answer (a refusal, a replay or its resolution).

use std::collections::{HashMap, HashSet};
use std::future::Future;

use serde_json::json;
use sqlx::Row;

use crate::clock::to_millis;
use crate::domain::audit::AuditEntry;
use crate::domain::commands::ReplyInteraction;
use crate::domain::decide::reply::{self, Decision};
use crate::domain::interaction::{InteractionRequest, InteractionStatus, Resolution, Resolver};
use crate::domain::run::RunState;
use crate::domain::{InteractionId, SessionId};
use crate::store::engine::group::{Answers, GroupedWrite};
use crate::store::engine::params::{
    bind_ids, padded, params, value_column, value_rows, with_last_repeated,
};
use crate::store::engine::records::{ReplyOutcome, RunRecord};
use crate::store::engine::rows::{self, RUN_RETURNING};
use crate::store::engine::tx::WriteTx;
use crate::store::engine::visible::sees;
use crate::store::engine::{Store, StoreError, StoreResult};
use crate::store::resources::hooks::DUE_NOW;

/// One queued reply, as the caller asked it.
#[derive(Debug)]
pub(in crate::store) struct ReplyItem {
    pub tenant: Option<String>,
    pub session_id: SessionId,
    pub interaction_id: InteractionId,
    pub cmd: ReplyInteraction,
    pub by: Resolver,
}

/// The audit record of a decision: what was answered, to what payload, by whom.
pub(in crate::store) fn decided(
    interaction: &InteractionRequest,
    rec: &RunRecord,
    resolution: &Resolution,
) -> AuditEntry {
    AuditEntry {
        tenant: rec.tenant_id.clone(),
        kind: "interaction.resolved",
        actor: resolution.resolved_by.clone(),
        actor_name: resolution.resolved_by_name.clone(),
        subject: interaction.id.to_string(),
        data: json!({
            "session_id": rec.run.session_id,
            "run_id": rec.run.id,
            "interaction_type": interaction.interaction_type,
            "decision": resolution.decision,
            "comment": resolution.comment,
            "payload_sha256": interaction.payload_sha256,
            "revision": interaction.revision,
        }),
    }
}

/// A resolution to write: the item's index, the interaction as found, its run.
pub(in crate::store) struct Resolving<'a> {
    pub index: usize,
    pub current: InteractionRequest,
    pub rec: &'a RunRecord,
    pub resolution: Resolution,
    pub to: RunState,
}

impl GroupedWrite for ReplyItem {
    type Answer = ReplyOutcome;
    const ORDER: u8 = 4;
    const TRANSACTION: u8 = 2;

    fn key(&self) -> &str {
        self.interaction_id.as_str()
    }

    /// A reply to a run another reply of the group resolves is answered `None`: it is
    /// written after the group, alone, so it sees that one.
    fn write_batch<'a>(
        store: &'a Store,
        tx: &'a mut WriteTx,
        items: &'a [&'a Self],
    ) -> impl Future<Output = StoreResult<Answers<ReplyOutcome>>> + Send + 'a {
        store.reply_in(tx, items)
    }
}

impl Store {
    async fn reply_in(
        &self,
        tx: &mut WriteTx,
        items: &[&ReplyItem],
    ) -> StoreResult<Vec<Option<StoreResult<ReplyOutcome>>>> {
        let ids: Vec<&str> = items.iter().map(|i| i.interaction_id.as_str()).collect();
        let mut found = self.load_interactions(tx.conn(), &ids, false).await?;
        // Lock the runs before the interactions: every writer takes them in that order.
        let mut run_ids: Vec<String> = found
            .values()
            .map(|f| f.interaction.run_id.as_str().to_owned())
            .collect();
        run_ids.sort_unstable();
        run_ids.dedup();
        let run_refs: Vec<&str> = run_ids.iter().map(String::as_str).collect();
        let runs = self.load_runs(tx.conn(), &run_refs, true).await?;
        if self.has_row_locks() {
            found = self.load_interactions(tx.conn(), &ids, true).await?;
        }

        let mut answers: Vec<Option<StoreResult<ReplyOutcome>>> = Vec::new();
        let mut resolving = Vec::new();
        let mut taken = HashSet::new();
        for (index, item) in items.iter().enumerate() {
            let not_found = || StoreError::NotFound("interaction");
            let target = found
                .get(item.interaction_id.as_str())
                .filter(|f| f.session_id == item.session_id)
                .and_then(|f| Some((f, runs.get(f.interaction.run_id.as_str())?)))
                .filter(|(_, rec)| sees(item.tenant.as_deref(), &rec.tenant_id));
            let Some((f, rec)) = target else {
                answers.push(Some(Err(not_found())));
                continue;
            };
            if !taken.insert(rec.run.id.as_str()) {
                answers.push(None);
                continue;
            }
            let found = reply::Found {
                interaction: &f.interaction,
                run: &rec.run,
            };
            let asked = reply::Reply {
                cmd: &item.cmd,
                by: &item.by,
            };
            match reply::decide(found, asked, tx.now) {
                Ok(Decision::Replay) => answers.push(Some(Ok(ReplyOutcome {
                    interaction: f.interaction.clone(),
                    run_status: rec.run.state.status(),
                }))),
                Ok(Decision::Resolve { resolution, to }) => {
                    answers.push(None);
                    resolving.push(Resolving {
                        index,
                        current: f.interaction.clone(),
                        rec,
                        resolution,
                        to,
                    });
                }
                Err(e) => answers.push(Some(Err(e.into()))),
            }
        }
        if resolving.is_empty() {
            return Ok(answers);
        }
        let runs_after = if self.writes_in_with() {
            self.write_replies_together(tx, &resolving).await?
        } else {
            self.write_resolutions(tx, &resolving).await?;
            let runs_after = self.write_run_states(tx, &resolving).await?;
            let due: Vec<&str> = resolving.iter().map(|r| r.rec.run.id.as_str()).collect();
            self.resources_due(tx, &due).await?;
            runs_after
        };
        for r in &resolving {
            if r.rec.run.state.status() != r.to.status() {
                tx.visible(r.rec.run.session_id.as_str());
            }
        }
        for r in resolving {
            let item = items[r.index];
            let run = runs_after
                .get(r.rec.run.id.as_str())
                .ok_or(StoreError::NotFound("run"))?;
            let session = item.session_id.as_str();
            tx.inbox(session);
            tx.event(
                session,
                "interaction.resolved",
                json!({
                    "interaction_id": item.interaction_id,
                    "run_id": run.id,
                    "decision": r.resolution.decision,
                    "resolved_by": item.by.id,
                    "resolved_by_name": item.by.name,
                    "comment": r.resolution.comment,
                }),
            );
            tx.event(
                session,
                "run.resuming",
                json!({ "run_id": run.id, "interaction_id": item.interaction_id }),
            );
            tx.audit(decided(&r.current, r.rec, &r.resolution));
            answers[r.index] = Some(Ok(ReplyOutcome {
                interaction: InteractionRequest {
                    status: InteractionStatus::Resolved,
                    revision: r.current.revision + 1,
                    resolution: Some(r.resolution),
                    ..r.current
                },
                run_status: run.state.status(),
            }));
        }
        tx.runtime_work();
        Ok(answers)
    }

    /// The interactions → `resolved`, their pending suspensions → `resolving`.
    pub(in crate::store) async fn write_resolutions(
        &self,
        tx: &mut WriteTx,
        resolving: &[Resolving<'_>],
    ) -> StoreResult<()> {
        let sql = format!(
            "UPDATE interactions SET status = 'resolved', revision = revision + 1, \
             decision = v.column2, resolution_payload = v.column3, resolved_by = v.column4, \
             resolution_comment = v.column5, resolved_by_name = v.column6, resolved_at = $1 \
             FROM (VALUES {}) AS v WHERE interactions.id = v.column1",
            value_rows(2, resolving.len(), 6)
        );
        let mut update = sqlx::query(&sql).bind(to_millis(tx.now));
        for r in resolving {
            update = update
                .bind(r.current.id.as_str())
                .bind(r.resolution.decision.clone())
                .bind(rows::to_json(&r.resolution.payload)?)
                .bind(r.resolution.resolved_by.clone())
                .bind(r.resolution.comment.clone())
                .bind(r.resolution.resolved_by_name.clone());
        }
        update.execute(tx.conn()).await?;
        let ids: Vec<&str> = resolving.iter().map(|r| r.current.id.as_str()).collect();
        let sql = format!(
            "UPDATE suspensions SET status = 'resolving' \
             WHERE status = 'pending' AND interaction_id IN ({})",
            params(1, ids.len())
        );
        bind_ids(sqlx::query(&sql), &ids).execute(tx.conn()).await?;
        Ok(())
    }

    /// The runs → their new states; the runs as written, by id.
    pub(in crate::store) async fn write_run_states(
        &self,
        tx: &mut WriteTx,
        resolving: &[Resolving<'_>],
    ) -> StoreResult<HashMap<String, crate::domain::run::Run>> {
        let sql = format!(
            "UPDATE runs SET state = v.column2, revision = revision + 1, \
             updated_at = CASE WHEN v.column3 = 1 THEN $1 ELSE updated_at END \
             FROM (VALUES {}) AS v WHERE runs.id = v.column1 RETURNING {RUN_RETURNING}",
            value_rows(2, resolving.len(), 3)
        );
        let mut update = sqlx::query(&sql).bind(to_millis(tx.now));
        for r in resolving {
            let status_changes = r.rec.run.state.status() != r.to.status();
            update = update
                .bind(r.rec.run.id.as_str())
                .bind(r.to.as_str())
                .bind(i64::from(status_changes));
        }
        let mut written = HashMap::new();
        for row in update.fetch_all(tx.conn()).await? {
            let run = rows::run(&row)?;
            written.insert(run.id.as_str().to_owned(), run);
        }
        Ok(written)
    }

    /// PostgreSQL: what `write_resolutions`, `write_run_states` and `resources_due` do, in one
    /// statement (SQLite has no data-modifying `WITH`).
    async fn write_replies_together(
        &self,
        tx: &mut WriteTx,
        resolving: &[Resolving<'_>],
    ) -> StoreResult<HashMap<String, crate::domain::run::Run>> {
        // The ids again as lists of the same parameters: a semi-join over `v` is planned as a
        // sequential scan of the table once a group has a few dozen rows.
        let n = padded(resolving.len());
        let (interaction_ids, run_ids) = (value_column(2, n, 9, 0), value_column(2, n, 9, 4));
        let sql = format!(
            "WITH v AS (VALUES {}), \
             i AS (UPDATE interactions SET status = 'resolved', revision = revision + 1, \
             decision = v.column2, resolution_payload = v.column3, resolved_by = v.column4, \
             resolution_comment = v.column8, resolved_by_name = v.column9, resolved_at = $1 \
             FROM v \
             WHERE interactions.id = v.column1 \
             AND interactions.id IN ({interaction_ids})), \
             p AS (UPDATE suspensions SET status = 'resolving' \
             WHERE status = 'pending' AND interaction_id IN ({interaction_ids})), \
             d AS (UPDATE execution_resources SET due_at = {DUE_NOW}, version = version + 1, \
             updated_at = $1 WHERE run_id IN ({run_ids}) RETURNING 1), \
             r AS (UPDATE runs SET state = v.column6, revision = revision + 1, \
             updated_at = CASE WHEN v.column7 = 1 THEN $1 ELSE updated_at END \
             FROM v WHERE runs.id = v.column5 AND runs.id IN ({run_ids}) \
             RETURNING {RUN_RETURNING}) \
             SELECT r.*, (SELECT count(*) FROM d) AS due FROM r",
            value_rows(2, n, 9)
        );
        let mut update = sqlx::query(&sql).bind(to_millis(tx.now));
        // Padded with the last row: an `UPDATE … FROM` writes a row matched twice once.
        for r in with_last_repeated(resolving, n) {
            let status_changes = r.rec.run.state.status() != r.to.status();
            update = update
                .bind(r.current.id.as_str())
                .bind(r.resolution.decision.clone())
                .bind(rows::to_json(&r.resolution.payload)?)
                .bind(r.resolution.resolved_by.clone())
                .bind(r.rec.run.id.as_str())
                .bind(r.to.as_str())
                .bind(i64::from(status_changes))
                .bind(r.resolution.comment.clone())
                .bind(r.resolution.resolved_by_name.clone());
        }
        let found = update.fetch_all(tx.conn()).await?;
        if let Some(row) = found.first() {
            if row.try_get::<i64, _>("due")? > 0 {
                tx.work();
            }
        }
        let mut written = HashMap::new();
        for row in &found {
            let run = rows::run(row)?;
            written.insert(run.id.as_str().to_owned(), run);
        }
        Ok(written)
    }
}
