//! Wake-ups: session revision changes (snapshot long-polls), new session events (event
//! streams), changes to a tenant's pending interactions (inbox long-polls) and new claimable
//! work. Local publishes wake waiters on this replica at once; with PostgreSQL the same events
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
    /// Bumped by every publish of work: runtimes' claim long-polls wait on it.
    work: watch::Sender<u64>,
    /// Bumped only when an execution resource may have become due: the lifecycle pool.
    lifecycle_work: watch::Sender<u64>,
    /// Per session: the last event sequence published.
    events: Arc<Topics>,
    /// Per tenant: bumped whenever one of its interactions becomes or stops being pending.
    inboxes: Arc<Topics>,
    /// Known revisions and snapshots, kept current by every publish.
    pub cache: SnapshotCache,
}

impl Default for ChangeHub {
    fn default() -> Self {
        Self {
            sessions: Mutex::new(HashMap::new()),
            work: watch::channel(0).0,
            lifecycle_work: watch::channel(0).0,
            events: Arc::default(),
            inboxes: Arc::default(),
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

/// Watch channels by key, created on first subscription and freed with the last one.
#[derive(Debug, Default)]
pub struct Topics(Mutex<HashMap<String, watch::Sender<i64>>>);

/// A subscription to one key of a [`Topics`].
pub struct TopicWatch {
    topics: Arc<Topics>,
    key: String,
    rx: watch::Receiver<i64>,
}

impl TopicWatch {
    /// Resolves once something was published for the key (or a resync) since the last call.
    pub async fn changed(&mut self) {
        if self.rx.changed().await.is_err() {
            // The sender lives in the map while this receiver does; never reached.
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for TopicWatch {
    fn drop(&mut self) {
        let mut map = self.topics.lock();
        if map
            .get(&self.key)
            .is_some_and(|tx| tx.receiver_count() <= 1)
        {
            map.remove(&self.key);
        }
    }
}

impl Topics {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<i64>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn subscribe(self: &Arc<Self>, key: &str) -> TopicWatch {
        let rx = self
            .lock()
            .entry(key.to_owned())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe();
        TopicWatch {
            topics: self.clone(),
            key: key.to_owned(),
            rx,
        }
    }

    fn publish(&self, key: &str, value: i64) {
        if let Some(tx) = self.lock().get(key) {
            tx.send_replace(value);
        }
    }

    fn wake_all(&self) {
        for tx in self.lock().values() {
            tx.send_modify(|_| {});
        }
    }

    fn len(&self) -> usize {
        self.lock().len()
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

    /// Whether a long-poll on this replica waits for the session to change.
    pub fn watched(&self, session_id: &str) -> bool {
        let map = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        map.get(session_id)
            .is_some_and(|tx| tx.receiver_count() > 0)
    }

    /// Wakes on every event committed to the session's log.
    pub fn subscribe_events(&self, session_id: &str) -> TopicWatch {
        self.events.subscribe(session_id)
    }

    pub fn publish_events(&self, session_id: &str, last_sequence: i64) {
        self.events.publish(session_id, last_sequence);
    }

    /// Wakes whenever an interaction of the tenant becomes or stops being pending.
    pub fn subscribe_inbox(&self, tenant: &str) -> TopicWatch {
        self.inboxes.subscribe(tenant)
    }

    pub fn publish_inbox(&self, tenant: &str) {
        self.inboxes.publish(tenant, 0);
    }

    /// Event streams and inbox long-polls held on this replica (subscribed keys).
    pub fn streams_and_inboxes(&self) -> (usize, usize) {
        (self.events.len(), self.inboxes.len())
    }

    /// Every publish of work: a run may have become claimable.
    pub fn subscribe_work(&self) -> watch::Receiver<u64> {
        self.work.subscribe()
    }

    /// Only the work of the lifecycle pool: an execution resource may have become due.
    pub fn subscribe_lifecycle_work(&self) -> watch::Receiver<u64> {
        self.lifecycle_work.subscribe()
    }

    pub fn publish_work(&self, work: Work) {
        let bump = |n: &mut u64| *n = n.wrapping_add(1);
        if work >= Work::Runtimes {
            self.work.send_modify(bump);
        }
        if work == Work::All {
            self.lifecycle_work.send_modify(bump);
        }
    }

    /// Wakes every waiter so it re-reads the database (after a missed-notification window).
    pub fn resync(&self) {
        self.cache.clear();
        let map = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        for tx in map.values() {
            tx.send_modify(|_| {});
        }
        drop(map);
        self.events.wake_all();
        self.inboxes.wake_all();
        self.publish_work(Work::All);
    }

    pub fn waiting_sessions(&self) -> usize {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Applies a payload received from another replica (`s:<session_id>:<revision>`,
    /// `e:<session_id>:<sequence>`, `t:<tenant>`, `w` or `r`); unknown payloads are ignored.
    pub fn apply_remote(&self, payload: &str) {
        let numbered = |rest: &str| {
            rest.rsplit_once(':')
                .and_then(|(id, n)| Some((id.to_owned(), n.parse::<i64>().ok()?)))
        };
        if let Some(work) = Work::from_payload(payload) {
            self.publish_work(work);
        } else if let Some((id, rev)) = payload.strip_prefix("s:").and_then(numbered) {
            self.publish_session(&id, rev);
        } else if let Some((id, seq)) = payload.strip_prefix("e:").and_then(numbered) {
            self.publish_events(&id, seq);
        } else if let Some(tenant) = payload.strip_prefix("t:") {
            self.publish_inbox(tenant);
        }
    }
}

pub fn session_payload(session_id: &str, revision: i64) -> String {
    format!("s:{session_id}:{revision}")
}

pub fn events_payload(session_id: &str, last_sequence: i64) -> String {
    format!("e:{session_id}:{last_sequence}")
}

pub fn inbox_payload(tenant: &str) -> String {
    format!("t:{tenant}")
}

/// New work a commit announces, by who may want it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Work {
    #[default]
    None,
    /// A run may have become claimable by runtimes; no execution resource became due.
    Runtimes,
    /// Anything, the lifecycle pool's work included.
    All,
}

impl Work {
    /// What other replicas hear: `w` wakes every worker, `r` the runtimes' claims only.
    pub fn payload(self) -> Option<&'static str> {
        match self {
            Work::None => None,
            Work::Runtimes => Some("r"),
            Work::All => Some("w"),
        }
    }

    fn from_payload(payload: &str) -> Option<Work> {
        match payload {
            "r" => Some(Work::Runtimes),
            "w" => Some(Work::All),
            _ => None,
        }
    }
}

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
    async fn event_and_inbox_topics_wake_their_own_waiters_only() {
        let hub = ChangeHub::new();
        let mut events = hub.subscribe_events("ses_a");
        let mut inbox = hub.subscribe_inbox("acme");
        let quick = Duration::from_millis(20);
        hub.apply_remote(&inbox_payload("other"));
        hub.apply_remote(&events_payload("ses_b", 9));
        assert!(tokio::time::timeout(quick, events.changed()).await.is_err());
        assert!(tokio::time::timeout(quick, inbox.changed()).await.is_err());
        hub.apply_remote(&events_payload("ses_a", 9));
        hub.apply_remote(&inbox_payload("acme"));
        assert!(tokio::time::timeout(quick, events.changed()).await.is_ok());
        assert!(tokio::time::timeout(quick, inbox.changed()).await.is_ok());
        hub.resync();
        assert!(tokio::time::timeout(quick, inbox.changed()).await.is_ok());
        assert_eq!(hub.streams_and_inboxes(), (1, 1));
        drop((events, inbox));
        assert_eq!(hub.streams_and_inboxes(), (0, 0));
    }

    #[tokio::test]
    async fn work_wakeups() {
        let hub = ChangeHub::new();
        let mut rx = hub.subscribe_work();
        let mut lifecycle = hub.subscribe_lifecycle_work();
        hub.apply_remote(Work::All.payload().unwrap());
        assert!(rx.has_changed().unwrap());
        assert!(lifecycle.has_changed().unwrap());
        rx.borrow_and_update();
        lifecycle.borrow_and_update();
        hub.resync();
        assert!(rx.has_changed().unwrap());
        assert!(lifecycle.has_changed().unwrap());
    }

    #[tokio::test]
    async fn runtimes_work_leaves_the_lifecycle_pool_asleep() {
        let hub = ChangeHub::new();
        let mut rx = hub.subscribe_work();
        let lifecycle = hub.subscribe_lifecycle_work();
        hub.apply_remote(Work::Runtimes.payload().unwrap());
        assert!(rx.has_changed().unwrap());
        assert!(!lifecycle.has_changed().unwrap());
        rx.borrow_and_update();
        hub.publish_work(Work::None);
        assert!(!rx.has_changed().unwrap());
        assert_eq!(Work::None.max(Work::Runtimes).max(Work::All), Work::All);
    }
}
