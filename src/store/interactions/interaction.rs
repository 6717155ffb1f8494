use serde_json::json;
use sqlx::AnyConnection;

use crate::clock::to_millis;
use crate::domain::audit::AuditEntry;
use crate::domain::commands::ReplyInteraction;
use crate::domain::decide::expiry::{self, Expiry};
use crate::domain::interaction::{Resolution, Resolver, RESOLVED_BY_EXPIRY};
use crate::domain::run::RunState;
use crate::domain::{InteractionId, SessionId};
use crate::store::engine::records::{InteractionRecord, ReplyOutcome, RunRecord};
use crate::store::engine::rows::{self, INTERACTION_COLS};
use crate::store::engine::tx::WriteTx;
use crate::store::engine::{Store, StoreResult};
use crate::store::interactions::reply_batch::{ReplyItem, Resolving};
use crate::store::runs::fence::Outcome;

/// How many expired interactions one sweep handles at most.
const EXPIRY_BATCH: i64 = 100;
const EXPIRY_BATCHES: usize = 10;

impl Store {
    async fn find_interaction(
        &self,
        conn: &mut AnyConnection,
        id: &str,
        lock: bool,
    ) -> StoreResult<Option<InteractionRecord>> {
        let sql = format!(
            "SELECT {INTERACTION_COLS} FROM interactions i WHERE i.id = $1{}",
            if lock { self.lock_row() } else { "" }
        );
        let row = sqlx::query(&sql).bind(id).fetch_optional(conn).await?;
        row.as_ref().map(rows::interaction_record).transpose()
    }

    /// Interaction → `resolved` (decision must be allowed: `Invalid` on `decision`), its
    /// suspension → `resolving`, its run → `resuming`; revision bump, event, publish session and
    /// work. Written through the group commit with the replies queued beside it. A replay
    /// with the same decision and payload returns the first answer unchanged; any other reply
    /// to a non-pending interaction → `Conflict` `interaction.not_pending`. A stale
    /// `expected_revision` → `Conflict` `interaction.revision_mismatch`; past `expires_at` →
    /// `Conflict` `interaction.expired`.
    pub async fn reply_interaction(
        &self,
        tenant: Option<&str>,
        session_id: &SessionId,
        interaction_id: &InteractionId,
        cmd: &ReplyInteraction,
        by: impl Into<Resolver>,
    ) -> StoreResult<ReplyOutcome> {
        cmd.validate()?;
        self.grouped(ReplyItem {
            tenant: tenant.map(str::to_owned),
            session_id: session_id.clone(),
            interaction_id: interaction_id.clone(),
            cmd: cmd.clone(),
            by: by.into(),
        })
        .await
    }

    /// Pending interactions past `expires_at`: each expires as its policy says (its run
    /// fails, is cancelled, or resumes with the policy's decision by `system:expiry`). Each is
    /// decided again under its run's lock, so replicas sweeping at once expire it once.
    /// Returns how many expired.
    pub async fn expire_interactions(&self) -> StoreResult<u64> {
        let mut expired = 0;
        for _ in 0..EXPIRY_BATCHES {
            let due = sqlx::query(
                "SELECT id FROM interactions WHERE status = 'pending' \
                 AND expires_at IS NOT NULL AND expires_at <= $1 \
                 ORDER BY expires_at, id LIMIT $2",
            )
            .bind(to_millis(self.now()))
            .bind(EXPIRY_BATCH)
            .fetch_all(&self.inner.read)
            .await?;
            for row in &due {
                if self.expire_one(&rows::text(row, "id")?).await? {
                    expired += 1;
                }
            }
            if (due.len() as i64) < EXPIRY_BATCH {
                break;
            }
        }
        Ok(expired)
    }

    /// Announces the deadlines whose warning is due (`interaction.expiring`), each once: the
    /// warning instant is cleared in the statement that finds it. Returns how many.
    pub async fn warn_expiring(&self) -> StoreResult<u64> {
        let any = sqlx::query(
            "SELECT id FROM interactions WHERE status = 'pending' \
             AND warn_at IS NOT NULL AND warn_at <= $1 LIMIT 1",
        )
        .bind(to_millis(self.now()))
        .fetch_optional(&self.inner.read)
        .await?;
        if any.is_none() {
            return Ok(0);
        }
        let mut tx = self.write_tx().await?;
        let result: StoreResult<u64> = async {
            let due = "status = 'pending' AND warn_at IS NOT NULL AND warn_at <= $1";
            let sql = format!(
                "UPDATE interactions SET warn_at = NULL WHERE {due} AND id IN \
                 (SELECT id FROM interactions WHERE {due} ORDER BY warn_at, id LIMIT $2) \
                 RETURNING id, run_id, session_id, expires_at, on_expiry, expiry_decision"
            );
            let warned = sqlx::query(&sql)
                .bind(to_millis(tx.now))
                .bind(EXPIRY_BATCH * EXPIRY_BATCHES as i64)
                .fetch_all(tx.conn())
                .await?;
            for row in &warned {
                let session = rows::text(row, "session_id")?;
                let expires_at = rows::opt_time(row, "expires_at")?;
                tx.event(
                    &session,
                    "interaction.expiring",
                    json!({
                        "interaction_id": rows::text(row, "id")?,
                        "run_id": rows::text(row, "run_id")?,
                        "expires_at": expires_at,
                        "on_expiry": {
                            "action": rows::text(row, "on_expiry")?,
                            "decision": rows::opt_text(row, "expiry_decision")?,
                        },
                    }),
                );
            }
            Ok(warned.len() as u64)
        }
        .await;
        tx.finish(self, result).await
    }

    /// Expires one interaction if it is still pending and past its deadline.
    async fn expire_one(&self, id: &str) -> StoreResult<bool> {
        let mut tx = self.write_tx().await?;
        let result: StoreResult<_> = async {
            let Some(found) = self.find_interaction(tx.conn(), id, false).await? else {
                return Ok(false);
            };
            let Some(rec) = self
                .load_run(tx.conn(), found.interaction.run_id.as_str(), true)
                .await?
            else {
                return Ok(false);
            };
            let Some(current) = self.find_interaction(tx.conn(), id, true).await? else {
                return Ok(false);
            };
            let session = current.session_id.as_str();
            let policy = &current.interaction.on_expiry;
            let expired = json!({
                "interaction_id": id,
                "run_id": rec.run.id,
                "on_expiry": policy,
            });
            let decided = expiry::decide(&current.interaction, &rec.run, tx.now);
            if decided != Expiry::NotDue {
                tx.audit(expired_record(&current, &rec, &decided));
            }
            match decided {
                Expiry::NotDue => return Ok(false),
                Expiry::Expire { end } => {
                    sqlx::query(
                        "UPDATE interactions SET status = 'expired', revision = revision + 1 \
                         WHERE id = $1",
                    )
                    .bind(id)
                    .execute(tx.conn())
                    .await?;
                    tx.inbox(session);
                    tx.event(session, "interaction.expired", expired);
                    if let Some((to, error)) = end {
                        let outcome = Some(Outcome::Error(&error));
                        self.finish_run(&mut tx, &rec, to, None, outcome).await?;
                    }
                }
                Expiry::Resolve { resolution, to } => {
                    tx.event(session, "interaction.expired", expired);
                    self.resolve_by_expiry(&mut tx, &current, &rec, resolution, to)
                        .await?;
                }
            }
            Ok(true)
        }
        .await;
        tx.finish(self, result).await
    }

    /// Writes the policy's decision as a reply would: interaction `resolved`, suspension
    /// `resolving`, run → `to`, its record due.
    async fn resolve_by_expiry(
        &self,
        tx: &mut WriteTx,
        current: &InteractionRecord,
        rec: &RunRecord,
        resolution: Resolution,
        to: RunState,
    ) -> StoreResult<()> {
        let resolving = [Resolving {
            index: 0,
            current: current.interaction.clone(),
            rec,
            resolution,
            to,
        }];
        self.write_resolutions(tx, &resolving).await?;
        self.write_run_states(tx, &resolving).await?;
        let run_id = rec.run.id.as_str();
        self.resource_due(tx, run_id).await?;
        let session = current.session_id.as_str();
        if rec.run.state.status() != to.status() {
            tx.visible(session);
        }
        tx.inbox(session);
        let [r] = resolving;
        tx.event(
            session,
            "interaction.resolved",
            json!({
                "interaction_id": r.current.id,
                "run_id": run_id,
                "decision": r.resolution.decision,
                "resolved_by": r.resolution.resolved_by,
                "resolved_by_name": null,
                "comment": null,
                "by_expiry": true,
            }),
        );
        tx.event(
            session,
            "run.resuming",
            json!({ "run_id": run_id, "interaction_id": r.current.id }),
        );
        tx.runtime_work();
        Ok(())
    }
}

/// The audit record of an expiry: the policy, and what it did to the run.
fn expired_record(current: &InteractionRecord, rec: &RunRecord, decided: &Expiry) -> AuditEntry {
    let (decision, run_state) = match decided {
        Expiry::Resolve { resolution, to } => (Some(resolution.decision.as_str()), Some(*to)),
        Expiry::Expire { end } => (None, end.as_ref().map(|(to, _)| *to)),
        Expiry::NotDue => (None, None),
    };
    AuditEntry {
        tenant: rec.tenant_id.clone(),
        kind: "interaction.expired",
        actor: RESOLVED_BY_EXPIRY.to_owned(),
        actor_name: None,
        subject: current.interaction.id.to_string(),
        data: json!({
            "session_id": current.session_id,
            "run_id": rec.run.id,
            "expires_at": current.interaction.expires_at,
            "on_expiry": current.interaction.on_expiry,
            "decision": decision,
            "run_state": run_state,
            "payload_sha256": current.interaction.payload_sha256,
        }),
    }
}
