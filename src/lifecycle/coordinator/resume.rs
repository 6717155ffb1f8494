//! What a resuming run's human waits on: the resume cadence, and the failed release that
//! is dropped only when the provider reports the sandbox ready.

use chrono::{DateTime, Utc};

use super::calls::call_status;
use super::{jitter, waiting_for_retry, Coordinator, CoordinatorError, Step, Work};
use crate::lifecycle::outcome::{self, Next};
use crate::lifecycle::rules::Cadence;

impl Work {
    pub(super) fn cadence(&self) -> Cadence {
        Cadence::of(self.run.state, self.run.updated_at)
    }

    /// Whether a pending retry holds the record now. A run someone waits on (resuming, or
    /// queued for its first sandbox) is not held by a retry scheduled before something woke
    /// the record (the reply, its provider answering again): it never waits out a backoff
    /// from before.
    pub(super) fn held(&self, now: DateTime<Utc>) -> bool {
        waiting_for_retry(&self.record, now)
            && !(self.cadence() != Cadence::Release && self.woken())
    }

    /// Something made the record due before its pending retry (a reply, a new child).
    fn woken(&self) -> bool {
        let r = &self.record;
        r.due_at
            .is_some_and(|due| r.next_retry_at.is_some_and(|at| due < at))
    }
}

impl Coordinator {
    /// A definitely failed release is dropped only when the provider reports
    /// the sandbox ready; one it reports not running is finished first; and when it cannot be
    /// asked, the next try waits the resume cadence.
    pub(super) async fn abandon_release(
        &self,
        w: &mut Work,
        now: DateTime<Utc>,
    ) -> Result<Step, CoordinatorError> {
        // Only a wake-up (a reply, a new child) plans this: it is not held by an older retry.
        if waiting_for_retry(&w.record, now) && !w.woken() {
            return self.defer(w).await;
        }
        let ready = self.sandbox_ready(w).await;
        self.noted(&w.record.provider_id, &ready).await;
        let counters = &self.store.metrics().lifecycle;
        counters.provider_call("inspect", &call_status(&ready));
        if let (Ok(false), Some(next)) = (&ready, outcome::broken_while_resuming(&w.record)) {
            tracing::warn!("resuming: the provider calls the sandbox broken and cannot terminate it; the run fails");
            return self.commit(w, next).await;
        }
        let record = match ready {
            Ok(true) => {
                let disposition = w.record.disposition.map_or("none", |d| d.as_str());
                tracing::info!(disposition, "resuming: the failed release is dropped");
                counters.release(disposition, "abandoned");
                outcome::abandon_release(w.record.clone())?
            }
            Ok(false) => {
                // An earlier attempt may have released it (its answer or its write lost).
                tracing::info!("resuming: the sandbox is not running; finishing the release");
                outcome::release_unsettled(w.record.clone())
            }
            Err(e) => {
                tracing::warn!(error = %e, "resuming: the sandbox could not be inspected");
                self.forget_client_on(&w.record.provider_id, &e);
                counters.retry("inspect");
                let now = self.now();
                outcome::inspect_failed(w.record.clone(), &e, now, jitter(), w.cadence())
            }
        };
        self.commit(w, Next::plain(record)).await
    }
}
