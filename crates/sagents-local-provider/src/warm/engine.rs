//! Where the engine meets the warm cache: keeping a snapshot's files after its kill, and
//! taking them back for a restore.

use std::path::Path;

use super::{Kept, Taken, WarmStats};
use crate::engine::Engine;
use crate::state::{SandboxRecord, StoredCheckpoint};
use sagents_plugin_api::wire::CheckpointRef;

impl Engine {
    /// What the warm cache did and holds.
    pub fn warm_stats(&self) -> WarmStats {
        self.warm.stats()
    }

    /// Keeps the killed sandbox's files for `checkpoint`, or discards them. Under the
    /// checkpoint's lock, so a delete of it either comes first (nothing is kept) or drops
    /// what was kept.
    pub(crate) async fn keep_or_discard(&self, rec: &SandboxRecord, checkpoint: &CheckpointRef) {
        if !self.warm.enabled() {
            return self.discard_dir(rec);
        }
        let id = checkpoint.checkpoint_id.clone();
        let _checkpoint = self.locks.lock(&format!("checkpoint:{id}")).await;
        let recorded = matches!(self.layout.load_checkpoint(&id), Ok(Some(_)));
        let (warm, dir, digest) = (
            self.warm.clone(),
            rec.dir.clone(),
            checkpoint.digest.clone(),
        );
        let kept = recorded
            && tokio::task::spawn_blocking(move || warm.keep(&id, digest.as_deref(), &dir))
                .await
                .unwrap_or(false);
        if !kept {
            self.discard_dir(rec);
        }
    }

    /// Puts the checkpoint's kept files at `dir` (which must not exist); `None` when the
    /// archive must be unpacked instead. The caller holds the checkpoint's lock.
    pub(crate) async fn restore_warm(&self, stored: &StoredCheckpoint, dir: &Path) -> Option<Kept> {
        if !self.warm.enabled() {
            return None;
        }
        let ckp = &stored.checkpoint;
        if !self.layout.checkpoint_data(stored).exists() {
            // A checkpoint whose files are gone answers as it always did.
            self.warm.forget(&ckp.checkpoint_id);
            return None;
        }
        let (warm, id, digest, target) = (
            self.warm.clone(),
            ckp.checkpoint_id.clone(),
            ckp.digest.clone(),
            dir.to_path_buf(),
        );
        match tokio::task::spawn_blocking(move || warm.take(&id, digest.as_deref(), &target)).await
        {
            Ok(Taken::Hit(kept)) => Some(kept),
            _ => None,
        }
    }
}
