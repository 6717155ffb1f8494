//! A resume's stages as the coordinator sees them (lifecycle claim, provider call sent and
//! answered, bind saved), handed to the metrics for the runtime claim that offers the run.

use std::time::Instant;

use super::{Coordinator, Work};
use crate::domain::resource::{ResourceState, RunEffect};
use crate::domain::run::RunState;
use crate::lifecycle::outcome::{BindKind, Next};
use crate::metrics::BoundResume;

impl Coordinator {
    /// Notes a successful bind of a resuming run before its save; true when noted.
    pub(super) fn note_bind_answered(
        &self,
        w: &Work,
        kind: BindKind,
        next: &Next,
        sent: Instant,
        answered: Instant,
    ) -> bool {
        let bound = next.effect == RunEffect::None && next.record.state == ResourceState::Active;
        if w.run.state != RunState::Resuming || !bound {
            return false;
        }
        let reply_to_claim = (w.claimed_at - w.run.updated_at)
            .to_std()
            .unwrap_or_default();
        self.store.metrics().resume.answered(
            w.run.id.as_str(),
            BoundResume {
                kind: kind.as_str(),
                reply_to_claim,
                claimed: w.claimed,
                sent,
                answered,
                saved: None,
            },
        );
        true
    }

    /// The bind's save landed and left the run claimable by its runtime, or not.
    pub(super) fn note_bind_saved(&self, w: &Work, saved: bool) {
        let claimable =
            saved && w.record.state == ResourceState::Active && w.record.due_at.is_none();
        self.store
            .metrics()
            .resume
            .saved(w.run.id.as_str(), claimable);
    }
}
