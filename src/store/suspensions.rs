//! Writing a suspension: the agent checkpoint, the optional interaction and the suspension.

use super::rows::to_json;
use super::tx::WriteTx;
use super::{Store, StoreResult};
use crate::clock::to_millis;
use crate::domain::commands::SuspendRun;
use crate::domain::run::Run;
use crate::domain::{CheckpointId, InteractionId, SuspensionId};

pub(super) struct SuspensionIds {
    pub checkpoint_id: CheckpointId,
    pub interaction_id: Option<InteractionId>,
    pub suspension_id: SuspensionId,
}

impl Store {
    pub(super) async fn insert_suspension(
        &self,
        tx: &mut WriteTx,
        run: &Run,
        cmd: &SuspendRun,
    ) -> StoreResult<SuspensionIds> {
        let now = to_millis(tx.now);
        let checkpoint_id = CheckpointId::new();
        sqlx::query(
            "INSERT INTO checkpoints (id, run_id, sequence, codec_version, state, \
             resolved_spec_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(checkpoint_id.as_str())
        .bind(run.id.as_str())
        .bind(cmd.checkpoint.sequence)
        .bind(&cmd.checkpoint.codec_version)
        .bind(to_json(&cmd.checkpoint.state)?)
        .bind(&cmd.checkpoint.resolved_spec_hash)
        .bind(now)
        .execute(tx.conn())
        .await?;
        let interaction_id = match &cmd.interaction {
            Some(i) => {
                let id = InteractionId::new();
                sqlx::query(
                    "INSERT INTO interactions (id, run_id, session_id, tenant_id, \
                     interaction_type, status, allowed_decisions, payload, revision, \
                     requested_at, expires_at) VALUES ($1, $2, $3, \
                     (SELECT tenant_id FROM sessions WHERE id = $3), $4, 'pending', $5, $6, 1, \
                     $7, $8)",
                )
                .bind(id.as_str())
                .bind(run.id.as_str())
                .bind(run.session_id.as_str())
                .bind(i.interaction_type.as_str())
                .bind(to_json(&i.allowed_decisions)?)
                .bind(to_json(&i.payload)?)
                .bind(now)
                .bind(i.expires_at.map(to_millis))
                .execute(tx.conn())
                .await?;
                Some(id)
            }
            None => None,
        };
        let suspension_id = SuspensionId::new();
        sqlx::query(
            "INSERT INTO suspensions (id, run_id, reason, status, checkpoint_id, interaction_id, \
             requested_at) VALUES ($1, $2, $3, 'pending', $4, $5, $6)",
        )
        .bind(suspension_id.as_str())
        .bind(run.id.as_str())
        .bind(cmd.reason.as_str())
        .bind(checkpoint_id.as_str())
        .bind(interaction_id.as_ref().map(|i| i.as_str()))
        .bind(now)
        .execute(tx.conn())
        .await?;
        Ok(SuspensionIds {
            checkpoint_id,
            interaction_id,
            suspension_id,
        })
    }
}
