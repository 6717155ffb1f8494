use serde_json::json;
use sqlx::AnyConnection;

use crate::clock::to_millis;
use crate::domain::commands::ReplyInteraction;
use crate::domain::decide::expiry::{self, Expiry};
use crate::domain::run::RunState;
use crate::domain::{InteractionId, SessionId};
use crate::store::engine::records::{InteractionRecord, ReplyOutcome};
use crate::store::engine::rows::{self, INTERACTION_COLS};
use crate::store::engine::{Store, StoreResult};
use crate::store::interactions::reply_batch::ReplyItem;
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
        resolved_by: &str,
    ) -> StoreResult<ReplyOutcome> {
        cmd.validate()?;
        self.grouped(ReplyItem {
            tenant: tenant.map(str::to_owned),
            session_id: session_id.clone(),
            interaction_id: interaction_id.clone(),
            cmd: cmd.clone(),
            resolved_by: resolved_by.to_owned(),
        })
        .await
    }

    /// Pending interactions past `expires_at` → `expired`; their runs fail with
    /// `interaction.expired`, their suspensions are cancelled. Returns how many expired.
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
            let Expiry::Expire { fail_run } =
                expiry::decide(&current.interaction, &rec.run, tx.now)
            else {
                return Ok(false);
            };
            sqlx::query(
                "UPDATE interactions SET status = 'expired', revision = revision + 1 WHERE id = $1",
            )
            .bind(id)
            .execute(tx.conn())
            .await?;
            let session = current.session_id.as_str();
            tx.inbox(session);
            tx.event(
                session,
                "interaction.expired",
                json!({ "interaction_id": id, "run_id": rec.run.id }),
            );
            if let Some(error) = fail_run {
                self.finish_run(
                    &mut tx,
                    &rec,
                    RunState::Failed,
                    None,
                    Some(Outcome::Error(&error)),
                )
                .await?;
            }
            Ok(true)
        }
        .await;
        tx.finish(self, result).await
    }
}
