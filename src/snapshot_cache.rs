//! What this replica knows of each session's current revision and of the snapshot at that
//! revision. A snapshot's bytes change if and only if its revision changes, so a snapshot read
//! at revision R stays valid for as long as R is current; every commit (local, or remote through
//! notifications) raises the known revision. Revisions read from the database or published by
//! a commit are trusted for a configured window: forever with SQLite (this process is the only
//! writer), briefly with PostgreSQL, so a missed cross-replica notification heals within that
//! window.
//!
//! Revisions are small and kept for up to `MAX_ENTRIES` sessions. Snapshot bodies are kept as
//! their JSON bytes only, within a byte budget: past it, the least recently read are dropped,
//! and their sessions' next `200` reads the database again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use crate::domain::snapshot::Snapshot;

const MAX_ENTRIES: usize = 100_000;
const NEVER: u64 = 0;
const FOREVER: u64 = u64::MAX;
/// Bytes of snapshot bodies kept unless configured otherwise.
pub const DEFAULT_BODY_BUDGET: usize = 32 << 20;
/// What a kept body costs beyond its JSON: its `Arc`, its `Bytes` and the allocator's rounding.
const BODY_OVERHEAD: usize = 96;

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

#[derive(Debug)]
struct Entries {
    map: HashMap<String, Entry>,
    /// Bumped on every clear, so a database read that started before it is not recorded.
    epoch: u64,
    /// What the kept bodies cost, and what they may cost.
    body_bytes: usize,
    body_budget: usize,
    /// Counts body reads: an entry's `used` is the count at its body's last read.
    clock: u64,
}

impl Default for Entries {
    fn default() -> Self {
        Self {
            map: HashMap::new(),
            epoch: 0,
            body_bytes: 0,
            body_budget: DEFAULT_BODY_BUDGET,
            clock: 0,
        }
    }
}

/// A snapshot's JSON body at one revision, encoded once: a `200` sends these bytes.
#[derive(Debug, PartialEq)]
pub struct Encoded {
    revision: i64,
    pub json: Bytes,
}

impl Encoded {
    pub fn new(snapshot: &Snapshot) -> serde_json::Result<Self> {
        Ok(Self {
            revision: snapshot.session.revision,
            json: serde_json::to_vec(snapshot)?.into(),
        })
    }

    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// The snapshot these bytes encode.
    pub fn decode(&self) -> serde_json::Result<Snapshot> {
        serde_json::from_slice(&self.json)
    }

    fn cost(&self) -> usize {
        self.json.len() + BODY_OVERHEAD
    }
}

#[derive(Debug)]
struct Entry {
    /// Unknown until a database read confirms the entry.
    tenant: Option<String>,
    revision: i64,
    confirmed: Instant,
    /// Only ever the body at `revision`.
    body: Option<Arc<Encoded>>,
    /// When the body was last read or kept (`Entries::clock`).
    used: u64,
}

impl Entry {
    fn new(revision: i64) -> Self {
        Self {
            tenant: None,
            revision,
            confirmed: Instant::now(),
            body: None,
            used: 0,
        }
    }
}

/// What the cache knows of a session, for one caller.
#[derive(Debug, Clone, PartialEq)]
pub enum Cached {
    /// The session belongs to a tenant the caller does not see.
    Hidden,
    /// The current revision, and the body at it when one is kept.
    Visible {
        revision: i64,
        snapshot: Option<Arc<Encoded>>,
    },
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

impl Entries {
    /// Puts `body` (or nothing) in place of `e`'s body, keeping the byte count.
    fn set_body(body_bytes: &mut usize, e: &mut Entry, body: Option<Arc<Encoded>>) {
        if let Some(old) = e.body.take() {
            *body_bytes -= old.cost();
        }
        if let Some(new) = &body {
            *body_bytes += new.cost();
        }
        e.body = body;
    }

    /// Past the budget, drops the least recently read bodies until they take three quarters
    /// of it, so that a sweep of the map is needed only every quarter budget of new bodies.
    fn fit_budget(&mut self) {
        if self.body_bytes <= self.body_budget {
            return;
        }
        let mut bodies: Vec<(u64, usize)> = self
            .map
            .values()
            .filter_map(|e| e.body.as_ref().map(|b| (e.used, b.cost())))
            .collect();
        bodies.sort_unstable();
        let target = self.body_budget / 4 * 3;
        let mut left = self.body_bytes;
        let mut oldest_kept = 0;
        for (used, cost) in bodies {
            if left <= target {
                oldest_kept = used;
                break;
            }
            left -= cost;
            oldest_kept = used + 1;
        }
        for e in self.map.values_mut() {
            if e.used < oldest_kept {
                if let Some(old) = e.body.take() {
                    self.body_bytes -= old.cost();
                }
            }
        }
    }

    /// The next tick of the clock that orders body reads.
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn clear(&mut self) {
        self.map.clear();
        self.body_bytes = 0;
        self.epoch += 1;
    }
}

impl SnapshotCache {
    /// `None`: trust database reads until a commit says otherwise (single writer).
    pub fn set_trust(&self, window: Option<Duration>) {
        let ms = window.map_or(FOREVER, |w| u64::try_from(w.as_millis()).unwrap_or(FOREVER));
        self.trust_ms.store(ms, Ordering::Relaxed);
    }

    /// How many bytes of snapshot bodies this replica keeps (0: none).
    pub fn set_body_budget(&self, bytes: usize) {
        let mut entries = self.lock();
        entries.body_budget = bytes;
        entries.fit_budget();
    }

    /// What the kept bodies cost now, in bytes.
    pub fn body_bytes(&self) -> usize {
        self.lock().body_bytes
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

    /// What is known of the session for a caller of `viewer` (`None`: every tenant), if
    /// trusted.
    pub fn get(&self, session_id: &str, viewer: Option<&str>) -> Option<Cached> {
        let trust = self.trust_ms.load(Ordering::Relaxed);
        if trust == NEVER {
            return None;
        }
        let mut entries = self.lock();
        let Entries { map, clock, .. } = &mut *entries;
        let e = map.get_mut(session_id)?;
        let owner = e.tenant.as_deref()?;
        let fresh = trust == FOREVER || e.confirmed.elapsed() < Duration::from_millis(trust);
        if !fresh {
            return None;
        }
        if viewer.is_some_and(|v| v != owner) {
            return Some(Cached::Hidden);
        }
        if e.body.is_some() {
            *clock += 1;
            e.used = *clock;
        }
        Some(Cached::Visible {
            revision: e.revision,
            snapshot: e.body.clone(),
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
        let budget = entries.body_budget;
        let now = entries.tick();
        let Entries {
            map, body_bytes, ..
        } = &mut *entries;
        let e = map
            .entry(session_id.to_owned())
            .or_insert_with(|| Entry::new(revision));
        if e.tenant.as_deref() != Some(tenant) {
            e.tenant = Some(tenant.to_owned());
        }
        // A commit published while this read was in flight may already know a newer revision.
        if revision < e.revision {
            return;
        }
        e.revision = revision;
        e.confirmed = Instant::now();
        let snapshot = snapshot.filter(|s| s.revision() == revision && s.cost() <= budget);
        if snapshot.is_some() {
            Entries::set_body(body_bytes, e, snapshot);
            e.used = now;
            entries.fit_budget();
        } else if e.body.as_ref().is_some_and(|s| s.revision() != revision) {
            Entries::set_body(body_bytes, e, None);
        }
    }

    /// A commit made `revision` current: as good as a database read that saw it.
    pub fn published(&self, session_id: &str, revision: i64) {
        let mut entries = self.lock();
        if entries.map.len() >= MAX_ENTRIES && !entries.map.contains_key(session_id) {
            entries.clear();
        }
        let Entries {
            map, body_bytes, ..
        } = &mut *entries;
        let e = map
            .entry(session_id.to_owned())
            .or_insert_with(|| Entry::new(revision));
        if revision > e.revision {
            e.revision = revision;
            e.confirmed = Instant::now();
            Entries::set_body(body_bytes, e, None);
        }
    }

    /// Forgets everything (after notifications may have been missed).
    pub fn clear(&self) {
        self.lock().clear();
    }
}

#[cfg(test)]
mod tests;
