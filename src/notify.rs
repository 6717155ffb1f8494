//! Wake-ups: session revision changes (snapshot long-polls) and new claimable work.
//! Local publishes wake waiters on this replica at once; with PostgreSQL the same events
//! travel between replicas through LISTEN/NOTIFY on one channel.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::snapshot_cache::SnapshotCache;

pub const PG_CHANNEL: &str = "sagents_changes";
/// How long a revision read from PostgreSQL is trusted without a notification confirming it.
const REMOTE_TRUST: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct ChangeHub {
    sessions: Mutex<HashMap<String, watch::Sender<i64>>>,
    work: watch::Sender<u64>,
    /// Known revisions and snapshots, kept current by every publish.
    pub cache: SnapshotCache,
}

impl Default for ChangeHub {
    fn default() -> Self {
        Self {
            sessions: Mutex::new(HashMap::new()),
            work: watch::channel(0).0,
            cache: SnapshotCache::default(),
        }
    }
}

/// A subscription to one session's revision; dropping the last one frees the slot.
pub struct SessionWatch {
    hub: Arc<ChangeHub>,
    session_id: String,
    rx: watch::Receiver<i64>,
}

impl SessionWatch {
    /// Waits until something is published for this session (or a resync), or the timeout.
    /// Returns false on timeout.
    pub async fn changed(&mut self, timeout: Duration) -> bool {
        matches!(
            tokio::time::timeout(timeout, self.rx.changed()).await,
            Ok(Ok(()))
        )
    }
}

impl Drop for SessionWatch {
    fn drop(&mut self) {
        let mut map = self.hub.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = map.get(&self.session_id) {
            // This receiver is still counted while it is being dropped.
            if tx.receiver_count() <= 1 {
                map.remove(&self.session_id);
            }
        }
    }
}

impl ChangeHub {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn subscribe_session(self: &Arc<Self>, session_id: &str) -> SessionWatch {
        let mut map = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let rx = match map.get(session_id) {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = watch::channel(0);
                map.insert(session_id.to_owned(), tx);
                rx
            }
        };
        SessionWatch {
            hub: self.clone(),
            session_id: session_id.to_owned(),
            rx,
        }
    }

    pub fn publish_session(&self, session_id: &str, revision: i64) {
        self.cache.published(session_id, revision);
        let map = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = map.get(session_id) {
            tx.send_replace(revision);
        }
    }

    pub fn subscribe_work(&self) -> watch::Receiver<u64> {
        self.work.subscribe()
    }

    pub fn publish_work(&self) {
        self.work.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Wakes every waiter so it re-reads the database (after a missed-notification window).
    pub fn resync(&self) {
        self.cache.clear();
        let map = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        for tx in map.values() {
            tx.send_modify(|_| {});
        }
        drop(map);
        self.publish_work();
    }

    pub fn waiting_sessions(&self) -> usize {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Applies a payload received from another replica (`s:<session_id>:<revision>` or `w`).
    pub fn apply_remote(&self, payload: &str) {
        if payload == "w" {
            self.publish_work();
        } else if let Some(rest) = payload.strip_prefix("s:") {
            if let Some((id, rev)) = rest.rsplit_once(':') {
                if let Ok(rev) = rev.parse() {
                    self.publish_session(id, rev);
                }
            }
        }
    }
}

pub fn session_payload(session_id: &str, revision: i64) -> String {
    format!("s:{session_id}:{revision}")
}

pub const WORK_PAYLOAD: &str = "w";

/// Forwards PostgreSQL notifications to the local hub until `shutdown` fires; on a lost
/// connection it resyncs every waiter and reconnects.
pub async fn run_pg_listener(
    url: String,
    hub: Arc<ChangeHub>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let listener = async {
            let mut l = sqlx::postgres::PgListener::connect(&url).await?;
            l.listen(PG_CHANNEL).await?;
            Ok::<_, sqlx::Error>(l)
        };
        let mut listener = tokio::select! {
            r = listener => r,
            _ = shutdown.changed() => return,
        };
        match listener.as_mut() {
            Ok(l) => {
                backoff = Duration::from_millis(100);
                hub.resync();
                hub.cache.set_trust(Some(REMOTE_TRUST));
                loop {
                    tokio::select! {
                        msg = l.try_recv() => match msg {
                            Ok(Some(n)) => hub.apply_remote(n.payload()),
                            Ok(None) => { hub.resync(); }
                            Err(e) => { tracing::warn!(error = %e, "change listener failed"); break; }
                        },
                        _ = shutdown.changed() => return,
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "change listener could not connect"),
        }
        hub.cache.disable();
        hub.resync();
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn publish_wakes_a_session_waiter_and_slots_are_freed() {
        let hub = ChangeHub::new();
        let mut w = hub.subscribe_session("ses_a");
        hub.publish_session("ses_b", 3);
        assert!(!w.changed(Duration::from_millis(20)).await);
        hub.apply_remote(&session_payload("ses_a", 4));
        assert!(w.changed(Duration::from_millis(20)).await);
        assert_eq!(hub.waiting_sessions(), 1);
        drop(w);
        assert_eq!(hub.waiting_sessions(), 0);
    }

    #[tokio::test]
    async fn work_wakeups() {
        let hub = ChangeHub::new();
        let mut rx = hub.subscribe_work();
        hub.apply_remote(WORK_PAYLOAD);
        assert!(rx.has_changed().unwrap());
        rx.borrow_and_update();
        hub.resync();
        assert!(rx.has_changed().unwrap());
    }
}
