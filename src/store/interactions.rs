use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::AnyConnection;
use utoipa::ToSchema;

use super::rows::{self, InteractionRecord, INTERACTION_COLS};
use super::run_fence::Outcome;
use super::sessions::sees;
use super::{Store, StoreError, StoreResult};
use crate::clock::to_millis;
use crate::domain::commands::ReplyInteraction;
use crate::domain::interaction::{InteractionRequest, InteractionStatus, Resolution};
use crate::domain::run::{RunEvent, RunState, RunStatus};
use crate::domain::validate::ValidationError;
use crate::domain::{InteractionId, SessionId};

/// How many expired interactions one sweep handles at most.
const EXPIRY_BATCH: i64 = 100;
const EXPIRY_BATCHES: usize = 10;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReplyOutcome {
    pub interaction: InteractionRequest,
    pub run_status: RunStatus,
}

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

    /// In one transaction: interaction → `resolved` (decision must be allowed: `Invalid` on
    /// `decision`), its suspension → `resolving`, its run → `resuming`; revision bump, event,
    /// publish session + work. A replay with the same decision and payload returns the first
    /// answer unchanged; any other reply to a non-pending interaction → `Conflict`
    /// `interaction.not_pending`. A stale `expected_revision` → `Conflict`
    /// `interaction.revision_mismatch`; past `expires_at` → `Conflict` `interaction.expired`.
    pub async fn reply_interaction(
        &self,
        tenant: Option<&str>,
        session_id: &SessionId,
        interaction_id: &InteractionId,
        cmd: &ReplyInteraction,
        resolved_by: &str,
    ) -> StoreResult<ReplyOutcome> {
        cmd.validate()?;
        let mut tx = self.write_tx().await?;
        let result: StoreResult<_> = async {
            let not_found = || StoreError::NotFound("interaction");
            let found = self
                .find_interaction(tx.conn(), interaction_id.as_str(), false)
                .await?
                .filter(|i| &i.session_id == session_id)
                .ok_or_else(not_found)?;
            // Lock the run before the interaction: every writer takes them in that order.
            let rec = self
                .load_run(tx.conn(), found.interaction.run_id.as_str(), true)
                .await?
                .filter(|r| sees(tenant, &r.tenant_id))
                .ok_or_else(not_found)?;
            let current = self
                .find_interaction(tx.conn(), interaction_id.as_str(), true)
                .await?
                .ok_or_else(not_found)?
                .interaction;
            if current.status != InteractionStatus::Pending {
                let replay = current.status == InteractionStatus::Resolved
                    && current
                        .resolution
                        .as_ref()
                        .is_some_and(|r| r.decision == cmd.decision && r.payload == cmd.payload);
                if replay {
                    return Ok(ReplyOutcome {
                        interaction: current,
                        run_status: rec.run.state.status(),
                    });
                }
                return Err(StoreError::conflict(
                    "interaction.not_pending",
                    format!("the interaction is {}, not pending", current.status),
                ));
            }
            if !current.allowed_decisions.contains(&cmd.decision) {
                return Err(ValidationError::new(
                    "decision",
                    format!("must be one of: {}", current.allowed_decisions.join(", ")),
                )
                .into());
            }
            if cmd.expected_revision.is_some_and(|r| r != current.revision) {
                return Err(StoreError::conflict(
                    "interaction.revision_mismatch",
                    format!(
                        "the interaction is at revision {}, not the expected one",
                        current.revision
                    ),
                ));
            }
            if current.expires_at.is_some_and(|at| at <= tx.now) {
                return Err(StoreError::conflict(
                    "interaction.expired",
                    "the interaction has expired",
                ));
            }
            let to = rec.run.state.apply(RunEvent::Resume).map_err(|_| {
                StoreError::conflict(
                    "run.not_suspended",
                    format!("the run is {}, not suspended", rec.run.state),
                )
            })?;
            let resolution = Resolution {
                decision: cmd.decision.clone(),
                payload: cmd.payload.clone(),
                resolved_by: resolved_by.to_owned(),
                resolved_at: tx.now,
            };
            sqlx::query(
                "UPDATE interactions SET status = 'resolved', revision = revision + 1, \
                 decision = $2, resolution_payload = $3, resolved_by = $4, resolved_at = $5 \
                 WHERE id = $1",
            )
            .bind(interaction_id.as_str())
            .bind(&resolution.decision)
            .bind(rows::to_json(&resolution.payload)?)
            .bind(&resolution.resolved_by)
            .bind(to_millis(resolution.resolved_at))
            .execute(tx.conn())
            .await?;
            sqlx::query(
                "UPDATE suspensions SET status = 'resolving' \
                 WHERE interaction_id = $1 AND status = 'pending'",
            )
            .bind(interaction_id.as_str())
            .execute(tx.conn())
            .await?;
            let run = self.set_run_state(&mut tx, &rec, to, None, None).await?;
            self.resource_due(&mut tx, run.id.as_str()).await?;
            tx.inbox(session_id.as_str());
            tx.event(
                session_id.as_str(),
                "interaction.resolved",
                json!({
                    "interaction_id": interaction_id,
                    "run_id": run.id,
                    "decision": resolution.decision,
                    "resolved_by": resolved_by,
                }),
            );
            tx.event(
                session_id.as_str(),
                "run.resuming",
                json!({ "run_id": run.id, "interaction_id": interaction_id }),
            );
            tx.work();
            Ok(ReplyOutcome {
                interaction: InteractionRequest {
                    status: InteractionStatus::Resolved,
                    revision: current.revision + 1,
                    resolution: Some(resolution),
                    ..current
                },
                run_status: run.state.status(),
            })
        }
        .await;
        tx.finish(self, result).await
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
            let due = current.interaction.status == InteractionStatus::Pending
                && current
                    .interaction
                    .expires_at
                    .is_some_and(|at| at <= tx.now);
            if !due {
                return Ok(false);
            }
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
            if let Ok(RunState::Failed) = rec.run.state.apply(RunEvent::Fail) {
                let error = json!({
                    "code": "interaction.expired",
                    "message": format!("interaction {id} expired before anyone replied"),
                });
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
