//! A write transaction that also collects what the commit must announce: session revision
//! bumps, event-log entries, changes to pending interactions and new work. Sessions are bumped at the end, in id order, so
//! concurrent transactions always lock them in the same order.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::AnyConnection;
use sqlx::{Any, Transaction};

use super::error::StoreResult;
use super::handle::Store;
use super::params::params;
use super::rows::to_json;
use super::snapshot_read::{read_snapshot, OwnedSnapshot};
use crate::clock::to_millis;
use crate::domain::audit::AuditEntry;
use crate::metrics::Metrics;
use crate::notify::{self, Work};
use crate::snapshot_cache::Encoded;

mod audit;
mod touch;

/// Rows per multi-row event insert (five parameters each).
const EVENTS_PER_INSERT: usize = 200;

/// Changed sessions, at most, whose new snapshot one commit reads for its waiters.
const PREFETCH_MAX: usize = 4;

#[derive(Default)]
struct Touch {
    visible: bool,
    /// An interaction of the session became or stopped being pending.
    inbox: bool,
    events: Vec<(&'static str, serde_json::Value)>,
}

pub(in crate::store) struct WriteTx {
    tx: Transaction<'static, Any>,
    pub now: DateTime<Utc>,
    sessions: BTreeMap<String, Touch>,
    /// `(run_id, sequence, type, data)` for the operators' resource history.
    resource_events: Vec<(String, i64, &'static str, serde_json::Value)>,
    audit: Vec<AuditEntry>,
    work: Work,
    /// Grouped writes this transaction carries (see `GroupedWrite`).
    writes: usize,
    /// Filled by the commit: what to announce on this replica once it has committed.
    announce: Announce,
}

/// What the transaction had collected before one write of a group began (see `savepoint`).
pub(in crate::store) struct Staged {
    sessions: BTreeMap<String, Touch>,
    resource_events: Vec<(String, i64, &'static str, serde_json::Value)>,
    audit: Vec<AuditEntry>,
    work: Work,
}

#[derive(Default)]
struct Announce {
    /// `(session_id, last event sequence)`.
    events: Vec<(String, i64)>,
    inbox_tenants: Vec<String>,
}

/// A changed session's new snapshot, read in the transaction that changed it.
struct Prefetched {
    epoch: u64,
    session_id: String,
    tenant_id: String,
    encoded: Arc<Encoded>,
}

impl Store {
    pub(in crate::store) async fn write_tx(&self) -> StoreResult<WriteTx> {
        self.write_tx_on(&self.inner.write).await
    }

    /// A write transaction of the group commit, on its own connections.
    pub(in crate::store) async fn group_tx(&self) -> StoreResult<WriteTx> {
        self.write_tx_on(&self.inner.grouped).await
    }

    async fn write_tx_on(&self, pool: &sqlx::AnyPool) -> StoreResult<WriteTx> {
        let tx = self.begin_write(pool).await?;
        Ok(WriteTx {
            tx,
            now: self.now(),
            sessions: BTreeMap::new(),
            resource_events: Vec::new(),
            audit: Vec::new(),
            work: Work::None,
            writes: 0,
            announce: Announce::default(),
        })
    }
}

impl WriteTx {
    pub fn conn(&mut self) -> &mut AnyConnection {
        &mut self.tx
    }

    /// Something a frontend sees changed in this session: its revision goes up by one.
    pub fn visible(&mut self, session_id: &str) {
        self.sessions
            .entry(session_id.to_owned())
            .or_default()
            .visible = true;
    }

    /// Appends an entry to the session's event log.
    pub fn event(&mut self, session_id: &str, kind: &'static str, data: serde_json::Value) {
        self.sessions
            .entry(session_id.to_owned())
            .or_default()
            .events
            .push((kind, data));
    }

    /// An interaction of the session became or stopped being pending: the tenant's inbox
    /// changed (also visible in the session).
    pub fn inbox(&mut self, session_id: &str) {
        let touch = self.sessions.entry(session_id.to_owned()).or_default();
        touch.visible = true;
        touch.inbox = true;
    }

    /// Appends an entry to a run's execution-resource history (operators only).
    pub fn resource_event(
        &mut self,
        run_id: &str,
        sequence: i64,
        kind: &'static str,
        data: serde_json::Value,
    ) {
        self.resource_events
            .push((run_id.to_owned(), sequence, kind, data));
    }

    /// Something became claimable, or an execution resource became due.
    pub fn work(&mut self) {
        self.work = Work::All;
    }

    /// A run became claimable by runtimes; no execution resource became due.
    pub fn runtime_work(&mut self) {
        self.work = self.work.max(Work::Runtimes);
    }

    /// The work the commit will announce; `set_work` puts back what it was.
    pub fn announces_work(&self) -> Work {
        self.work
    }

    pub fn set_work(&mut self, work: Work) {
        self.work = work;
    }

    pub fn set_writes(&mut self, writes: usize) {
        self.writes = writes;
    }

    /// The transaction carries one grouped write and nothing else: its refusal may be the
    /// transaction's.
    pub fn holds_one_write(&self) -> bool {
        self.writes <= 1
    }

    /// Begins one write of a group behind a savepoint: what it collects is kept apart until
    /// `keep` adds it to the rest, or `discard` undoes its rows and drops it.
    pub async fn savepoint(&mut self) -> StoreResult<Staged> {
        sqlx::query("SAVEPOINT grouped_write")
            .execute(&mut *self.tx)
            .await?;
        Ok(Staged {
            sessions: std::mem::take(&mut self.sessions),
            resource_events: std::mem::take(&mut self.resource_events),
            audit: std::mem::take(&mut self.audit),
            work: std::mem::take(&mut self.work),
        })
    }

    pub async fn keep(&mut self, mut staged: Staged) -> StoreResult<()> {
        sqlx::query("RELEASE SAVEPOINT grouped_write")
            .execute(&mut *self.tx)
            .await?;
        for (id, touch) in std::mem::take(&mut self.sessions) {
            let into = staged.sessions.entry(id).or_default();
            into.visible |= touch.visible;
            into.inbox |= touch.inbox;
            into.events.extend(touch.events);
        }
        staged.resource_events.append(&mut self.resource_events);
        staged.audit.append(&mut self.audit);
        self.sessions = staged.sessions;
        self.resource_events = staged.resource_events;
        self.audit = staged.audit;
        self.work = self.work.max(staged.work);
        Ok(())
    }

    pub async fn discard(&mut self, staged: Staged) -> StoreResult<()> {
        sqlx::query("ROLLBACK TO SAVEPOINT grouped_write")
            .execute(&mut *self.tx)
            .await?;
        sqlx::query("RELEASE SAVEPOINT grouped_write")
            .execute(&mut *self.tx)
            .await?;
        self.sessions = staged.sessions;
        self.resource_events = staged.resource_events;
        self.audit = staged.audit;
        self.work = staged.work;
        Ok(())
    }

    /// Commits on success; on failure rolls back before returning, so no row lock outlives
    /// the call (a dropped transaction is only rolled back later, in the background).
    pub async fn finish<T>(self, store: &Store, result: StoreResult<T>) -> StoreResult<T> {
        match result {
            Ok(value) => {
                self.commit(store).await?;
                Ok(value)
            }
            Err(e) => {
                // The caller gets the original error; a failed rollback closes the connection.
                let _ = self.tx.rollback().await;
                Err(e)
            }
        }
    }

    /// Bumps revisions, writes the events, commits, then wakes local waiters. Returns the new
    /// revision of every session that changed visibly.
    pub async fn commit(mut self, store: &Store) -> StoreResult<Vec<(String, i64)>> {
        let sessions = std::mem::take(&mut self.sessions);
        let touched: Vec<(&String, &Touch)> = sessions
            .iter()
            .filter(|(_, t)| t.visible || !t.events.is_empty())
            .collect();
        let revisions = self.touch_sessions(store, &touched).await?;
        let resource_events = std::mem::take(&mut self.resource_events);
        let rows: Vec<(&str, i64, &str, String)> = resource_events
            .iter()
            .map(|(run, seq, kind, data)| Ok((run.as_str(), *seq, *kind, to_json(data)?)))
            .collect::<StoreResult<_>>()?;
        self.insert_events("execution_resource_events", "run_id", &rows)
            .await?;
        let payloads = self.replica_payloads(&revisions);
        store.notify_replicas(&mut self.tx, &payloads).await?;
        let prefetched = self.prefetch(store, &revisions).await?;
        // Last: a chain's head stays locked only until the commit.
        self.append_audit(store).await?;
        self.tx.commit().await?;
        let hub = store.hub();
        for p in prefetched {
            let revision = p.encoded.revision();
            hub.cache.confirm(
                p.epoch,
                &p.session_id,
                &p.tenant_id,
                revision,
                Some(p.encoded),
            );
        }
        for (session_id, revision) in &revisions {
            hub.publish_session(session_id, *revision);
        }
        for (session_id, last_sequence) in &self.announce.events {
            hub.publish_events(session_id, *last_sequence);
        }
        for tenant in &self.announce.inbox_tenants {
            hub.publish_inbox(tenant);
        }
        hub.publish_work(self.work);
        Ok(revisions)
    }

    /// The new snapshot of the changed sessions that long-polls on this replica wait on.
    /// Read before the commit, it sees this transaction's writes and nothing else (the
    /// sessions' rows are locked), so the waiters wake to it without a read of their own.
    async fn prefetch(
        &mut self,
        store: &Store,
        revisions: &[(String, i64)],
    ) -> StoreResult<Vec<Prefetched>> {
        let hub = store.hub();
        let mut prefetched = Vec::new();
        for (id, revision) in revisions
            .iter()
            .filter(|(id, _)| hub.watched(id))
            .take(PREFETCH_MAX)
        {
            let epoch = hub.cache.epoch();
            Metrics::inc(&store.metrics().snapshot_reads);
            let Some(OwnedSnapshot {
                snapshot,
                tenant_id,
            }) = read_snapshot(&mut self.tx, None, id).await?
            else {
                continue;
            };
            let Ok(encoded) = Encoded::new(&snapshot) else {
                continue;
            };
            if encoded.revision() == *revision {
                prefetched.push(Prefetched {
                    epoch,
                    session_id: id.clone(),
                    tenant_id,
                    encoded: Arc::new(encoded),
                });
            }
        }
        Ok(prefetched)
    }

    /// What the other replicas hear of this commit: the new revisions, the new events, the
    /// changed inboxes and new work.
    fn replica_payloads(&self, revisions: &[(String, i64)]) -> Vec<String> {
        let a = &self.announce;
        revisions
            .iter()
            .map(|(id, revision)| notify::session_payload(id, *revision))
            .chain(
                a.events
                    .iter()
                    .map(|(id, seq)| notify::events_payload(id, *seq)),
            )
            .chain(a.inbox_tenants.iter().map(|t| notify::inbox_payload(t)))
            .chain(self.work.payload().map(str::to_owned))
            .collect()
    }

    /// `(key, sequence, type, data)` rows into an event table, a few hundred per statement.
    async fn insert_events(
        &mut self,
        table: &str,
        key: &str,
        events: &[(&str, i64, &str, String)],
    ) -> StoreResult<()> {
        let now = to_millis(self.now);
        for chunk in events.chunks(EVENTS_PER_INSERT) {
            let sql = format!(
                "INSERT INTO {table} ({key}, sequence, type, data, created_at) VALUES {}",
                (0..chunk.len())
                    .map(|r| format!("({}, $1)", params(2 + r * 4, 4)))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let mut insert = sqlx::query(&sql).bind(now);
            for (id, sequence, kind, data) in chunk {
                insert = insert
                    .bind(*id)
                    .bind(*sequence)
                    .bind(*kind)
                    .bind(data.as_str());
            }
            insert.execute(&mut *self.tx).await?;
        }
        Ok(())
    }
}
