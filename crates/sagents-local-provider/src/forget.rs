//! Losing one sandbox's state, as a provider whose state folder is gone would (the `forget`
//! fault): from then on the sandbox is unknown.

use super::engine::Engine;
use sagents_plugin_api::spec::WorkspaceMode;

impl Engine {
    /// Kills the sandbox's processes and removes its record, the idempotency records that
    /// name it and, for an isolated sandbox, its files (an active workspace's host folder is
    /// left alone). Returns whether the sandbox was known.
    pub async fn forget(&self, id: &str) -> bool {
        let Ok(slot) = self.slot(id) else {
            return false;
        };
        let mut rec = slot.lock().await;
        if rec.forgotten {
            return false;
        }
        rec.forgotten = true;
        self.remove_slot(id);
        if let Some(leader) = rec.leader.take() {
            if let Err(e) = leader.kill_group().await {
                tracing::warn!(sandbox_id = %id, error = %e, "could not kill a forgotten sandbox");
            }
        }
        self.drop_bounds(id);
        let removed = self
            .layout
            .remove_sandbox(id)
            .and_then(|_| self.layout.remove_requests_for(id));
        if let Err(e) = removed {
            tracing::warn!(sandbox_id = %id, error = %e, "could not remove a forgotten sandbox's state");
        }
        if rec.workspace_mode == WorkspaceMode::Isolated {
            self.discard_dir(&rec);
        }
        true
    }
}
