//! What this replica knows of each session's current revision and of the snapshot at that
//! revision. A snapshot's bytes change if and only if its revision changes, so a snapshot read
//! at revision R stays valid for as long as R is current; every commit (local, or remote through
//! notifications) raises the known revision. Revisions read from the database are trusted for
//! a configured window: forever with SQLite (this process is the only writer), briefly with
//! PostgreSQL, so a missed cross-replica notification heals within that window.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::domain::snapshot::Snapshot;

const MAX_ENTRIES: usize = 100_000;
const NEVER: u64 = 0;
const FOREVER: u64 = u64::MAX;

#[derive(Debug)]
pub struct SnapshotCache {
    entries: Mutex<Entries>,
    trust_ms: AtomicU64,
    /// One turn per session being read from the database; readers that find one wait for it.
    reads: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// A reader's turn at reading one session from the database (see `read_turn`).
pub struct ReadTurn<'a> {
    cache: &'a SnapshotCache,
    session_id: String,
    _turn: tokio::sync::OwnedMutexGuard<()>,
}

impl Drop for ReadTurn<'_> {
    fn drop(&mut self) {
        let mut reads = self.cache.reads.lock().unwrap_or_else(|e| e.into_inner());
        // Held by the map and by this turn only: nobody waits, the turn is forgotten.
        if reads
            .get(&self.session_id)
            .is_some_and(|turn| Arc::strong_count(turn) <= 2)
        {
            reads.remove(&self.session_id);
        }
    }
}

#[derive(Debug, Default)]
struct Entries {
    map: HashMap<String, Entry>,
    /// Bumped on every clear, so a database read that started before it is not recorded.
    epoch: u64,
}

/// A snapshot and its JSON body, encoded once per revision read: a `200` sends these bytes.
#[derive(Debug, PartialEq)]
pub struct Encoded {
    pub snapshot: Snapshot,
    pub json: Bytes,
}

impl Encoded {
    pub fn new(snapshot: Snapshot) -> serde_json::Result<Self> {
        let json = serde_json::to_vec(&snapshot)?.into();
        Ok(Self { snapshot, json })
    }

    pub fn revision(&self) -> i64 {
        self.snapshot.session.revision
    }
}

#[derive(Debug)]
struct Entry {
    /// Unknown until a database read confirms the entry.
    tenant: Option<String>,
    revision: i64,
    confirmed: Instant,
    snapshot: Option<Arc<Encoded>>,
}

/// A cached view, valid for the caller only if its tenant matches.
pub struct Known {
    pub tenant: String,
    pub revision: i64,
    pub snapshot: Option<Arc<Encoded>>,
}

impl Default for SnapshotCache {
    fn default() -> Self {
        Self {
            entries: Mutex::new(Entries::default()),
            trust_ms: AtomicU64::new(NEVER),
            reads: Mutex::new(HashMap::new()),
        }
    }
}

impl SnapshotCache {
    /// `None`: trust database reads until a commit says otherwise (single writer).
    pub fn set_trust(&self, window: Option<Duration>) {
        let ms = window.map_or(FOREVER, |w| u64::try_from(w.as_millis()).unwrap_or(FOREVER));
        self.trust_ms.store(ms, Ordering::Relaxed);
    }

    /// Stops trusting anything (notifications can no longer be relied on).
    pub fn disable(&self) {
        self.trust_ms.store(NEVER, Ordering::Relaxed);
        self.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for this reader's turn at reading `session_id` from the database, so that
    /// concurrent readers of a session make one read and the others find it cached. `None`
    /// while nothing read is trusted, or while a full cache could not keep this session's
    /// read: then every reader reads, without waiting.
    pub async fn read_turn(&self, session_id: &str) -> Option<ReadTurn<'_>> {
        if self.trust_ms.load(Ordering::Relaxed) == NEVER {
            return None;
        }
        {
            let entries = self.lock();
            if entries.map.len() >= MAX_ENTRIES && !entries.map.contains_key(session_id) {
                return None;
            }
        }
        let turn = {
            let mut reads = self.reads.lock().unwrap_or_else(|e| e.into_inner());
            if reads.len() >= MAX_ENTRIES {
                // Turns left behind by readers that gave up while waiting.
                reads.retain(|_, turn| Arc::strong_count(turn) > 1);
            }
            reads.entry(session_id.to_owned()).or_default().clone()
        };
        Some(ReadTurn {
            cache: self,
            session_id: session_id.to_owned(),
            _turn: turn.lock_owned().await,
        })
    }

    /// Call before reading from the database; pass the result to `confirm`.
    pub fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// The session's current revision (and snapshot, when one was read at it), if trusted.
    pub fn get(&self, session_id: &str) -> Option<Known> {
        let trust = self.trust_ms.load(Ordering::Relaxed);
        if trust == NEVER {
            return None;
        }
        let entries = self.lock();
        let e = entries.map.get(session_id)?;
        let tenant = e.tenant.clone()?;
        let fresh = trust == FOREVER || e.confirmed.elapsed() < Duration::from_millis(trust);
        fresh.then(|| Known {
            tenant,
            revision: e.revision,
            snapshot: e.snapshot.clone(),
        })
    }

    /// Records a revision read from the database (with the snapshot, if one was read).
    pub fn confirm(
        &self,
        epoch: u64,
        session_id: &str,
        tenant: &str,
        revision: i64,
        snapshot: Option<Arc<Encoded>>,
    ) {
        if self.trust_ms.load(Ordering::Relaxed) == NEVER {
            return;
        }
        let mut entries = self.lock();
        if entries.epoch != epoch {
            return;
        }
        if entries.map.len() >= MAX_ENTRIES && !entries.map.contains_key(session_id) {
            return;
        }
        let e = entries
            .map
            .entry(session_id.to_owned())
            .or_insert_with(|| Entry {
                tenant: None,
                revision,
                confirmed: Instant::now(),
                snapshot: None,
            });
        e.tenant = Some(tenant.to_owned());
        // A commit published while this read was in flight may already know a newer revision.
        if revision >= e.revision {
            e.revision = revision;
            e.confirmed = Instant::now();
            if snapshot.is_some()
                || e.snapshot
                    .as_ref()
                    .is_some_and(|s| s.revision() != revision)
            {
                e.snapshot = snapshot;
            }
        }
    }

    /// A commit made `revision` current.
    pub fn published(&self, session_id: &str, revision: i64) {
        let mut entries = self.lock();
        if entries.map.len() >= MAX_ENTRIES && !entries.map.contains_key(session_id) {
            entries.map.clear();
            entries.epoch += 1;
        }
        let e = entries
            .map
            .entry(session_id.to_owned())
            .or_insert_with(|| Entry {
                tenant: None,
                revision,
                confirmed: Instant::now(),
                snapshot: None,
            });
        if revision > e.revision {
            e.revision = revision;
            e.snapshot = None;
        }
    }

    /// Forgets everything (after notifications may have been missed).
    pub fn clear(&self) {
        let mut entries = self.lock();
        entries.map.clear();
        entries.epoch += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untrusted_until_configured() {
        let c = SnapshotCache::default();
        c.confirm(c.epoch(), "s", "t", 3, None);
        assert!(c.get("s").is_none());
        c.set_trust(None);
        c.confirm(c.epoch(), "s", "t", 3, None);
        assert_eq!(c.get("s").map(|k| k.revision), Some(3));
    }

    #[test]
    fn a_publish_wins_over_an_older_read_in_flight() {
        let c = SnapshotCache::default();
        c.set_trust(None);
        let before_read = c.epoch();
        // A commit lands while a read of revision 4 is in flight, before anything is cached.
        c.published("s", 5);
        assert!(c.get("s").is_none(), "the tenant is not known yet");
        c.confirm(before_read, "s", "t", 4, None);
        let k = c.get("s").unwrap();
        assert_eq!((k.tenant.as_str(), k.revision), ("t", 5));
        let stale = c.epoch();
        c.clear();
        c.confirm(stale, "s", "t", 4, None);
        assert!(
            c.get("s").is_none(),
            "a read from before a clear is not recorded"
        );
    }

    #[test]
    fn reads_never_grow_the_map_past_its_bound() {
        let c = SnapshotCache::default();
        c.set_trust(None);
        for n in 0..MAX_ENTRIES + 10 {
            c.confirm(c.epoch(), &format!("s{n}"), "t", 1, None);
        }
        assert_eq!(c.lock().map.len(), MAX_ENTRIES);
        assert!(c.get("s0").is_some());
        assert!(c.get(&format!("s{}", MAX_ENTRIES + 1)).is_none());
    }

    #[tokio::test]
    async fn readers_take_turns_only_where_the_read_can_be_kept() {
        let c = SnapshotCache::default();
        assert!(c.read_turn("s0").await.is_none(), "nothing trusted yet");
        c.set_trust(None);
        let first = c.read_turn("s0").await;
        assert!(first.is_some());
        assert!(c.read_turn("s1").await.is_some(), "turns are per session");
        drop(first);
        assert!(
            c.reads.lock().unwrap().is_empty(),
            "a turn nobody waits for is forgotten"
        );
        for n in 0..MAX_ENTRIES {
            c.confirm(c.epoch(), &format!("s{n}"), "t", 1, None);
        }
        assert!(c.read_turn("s0").await.is_some());
        assert!(
            c.read_turn("elsewhere").await.is_none(),
            "a full cache would not keep that read: no turns"
        );
    }

    #[test]
    fn a_short_trust_window_expires() {
        let c = SnapshotCache::default();
        c.set_trust(Some(Duration::from_millis(0)));
        c.confirm(c.epoch(), "s", "t", 3, None);
        assert!(c.get("s").is_none());
    }
}
