//! A session's event log as a live feed: what is stored after a position, then each event as
//! it commits, on any replica.

use crate::domain::SessionId;
use crate::notify::TopicWatch;
use crate::service::shutdown::Shutdown;
use crate::store::{SessionEvent, Store, StoreResult};

/// Events read from the store at once: what one feed holds in memory at most.
const PAGE: u32 = 50;

/// Follows one session's events. It holds a subscription and at most one page of events; a
/// wait holds no database connection.
pub struct EventFeed {
    store: Store,
    shutdown: Shutdown,
    tenant: Option<String>,
    session_id: SessionId,
    /// The sequence of the last event handed out.
    after: i64,
    watch: TopicWatch,
    page: std::vec::IntoIter<SessionEvent>,
}

impl EventFeed {
    /// Subscribes first, then checks the session: every event committed from now on wakes
    /// the feed, and every earlier one is read from the store, so none falls between.
    pub async fn open(
        store: &Store,
        shutdown: &Shutdown,
        tenant: Option<&str>,
        session_id: &SessionId,
        after: i64,
    ) -> StoreResult<Self> {
        let watch = store.hub().subscribe_events(session_id.as_str());
        Box::pin(store.get_session(tenant, session_id)).await?;
        Ok(Self {
            store: store.clone(),
            shutdown: shutdown.clone(),
            tenant: tenant.map(str::to_owned),
            session_id: session_id.clone(),
            after,
            watch,
            page: Vec::new().into_iter(),
        })
    }

    /// The next event after the last one returned, waiting for it to commit; `None` once the
    /// server shuts down or the store fails (a client resumes from the last event's id).
    pub async fn next(&mut self) -> Option<SessionEvent> {
        loop {
            if let Some(event) = self.page.by_ref().find(|e| e.sequence > self.after) {
                self.after = event.sequence;
                return Some(event);
            }
            if self.shutdown.is_triggered() {
                return None;
            }
            let read =
                self.store
                    .list_events(self.tenant.as_deref(), &self.session_id, self.after, PAGE);
            match Box::pin(read).await {
                Ok(events) if !events.is_empty() => {
                    self.page = events.into_iter();
                    continue;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, session_id = %self.session_id, "event stream ends: the store failed");
                    return None;
                }
            }
            tokio::select! {
                _ = self.watch.changed() => {}
                _ = self.shutdown.wait() => return None,
            }
        }
    }
}
