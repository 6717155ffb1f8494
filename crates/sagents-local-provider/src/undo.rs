//! Undoing a creation that was interrupted: what it started is killed, its state and
//! (isolated) files removed.

use std::collections::HashMap;

use super::process::Leader;
use super::state::{CreateIntent, Layout};
use sagents_plugin_api::spec::WorkspaceMode;

/// Kills what an interrupted creation started and removes its state and (isolated) files;
/// an active workspace's host folder is left alone. `leaders` are the tagged live leaders.
pub(super) fn undo(
    layout: &Layout,
    intent: &CreateIntent,
    leaders: &HashMap<String, Leader>,
) -> std::io::Result<()> {
    let id = &intent.sandbox_id;
    let recorded = layout.load_sandbox(id)?.and_then(|rec| rec.leader);
    for leader in recorded.iter().chain(leaders.get(id)) {
        leader.kill_group_blocking()?;
    }
    layout.remove_sandbox(id)?;
    if intent.workspace_mode == WorkspaceMode::Isolated {
        match std::fs::remove_dir_all(layout.sandbox_dirs().join(id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    layout.save_intent(&CreateIntent {
        undone: true,
        ..intent.clone()
    })
}
