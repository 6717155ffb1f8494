//! A write transaction that also collects what the commit must announce: session revision
//! bumps, event-log entries and new work. Sessions are bumped at the end, in id order, so
//! concurrent transactions always lock them in the same order.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sqlx::AnyConnection;
use sqlx::{Any, Row, Transaction};

use super::rows::to_json;
use super::{Store, StoreResult};
use crate::clock::to_millis;
use crate::notify;

#[derive(Default)]
struct Touch {
    visible: bool,
    events: Vec<(&'static str, serde_json::Value)>,
}

pub(super) struct WriteTx {
    tx: Transaction<'static, Any>,
    pub now: DateTime<Utc>,
    sessions: BTreeMap<String, Touch>,
    work: bool,
}

impl Store {
    pub(super) async fn write_tx(&self) -> StoreResult<WriteTx> {
        let tx = self.begin_write().await?;
        Ok(WriteTx {
            tx,
            now: self.now(),
            sessions: BTreeMap::new(),
            work: false,
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

    /// Something became claimable.
    pub fn work(&mut self) {
        self.work = true;
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
        let now = to_millis(self.now);
        let mut revisions = Vec::new();
        let sessions = std::mem::take(&mut self.sessions);
        for (session_id, touch) in &sessions {
            let n = touch.events.len() as i64;
            let row = if touch.visible {
                sqlx::query(
                    "UPDATE sessions SET revision = revision + 1, updated_at = $2, \
                     event_seq = event_seq + $3 WHERE id = $1 RETURNING revision, event_seq",
                )
                .bind(session_id)
                .bind(now)
                .bind(n)
                .fetch_one(&mut *self.tx)
                .await?
            } else if n > 0 {
                sqlx::query(
                    "UPDATE sessions SET event_seq = event_seq + $2 WHERE id = $1 \
                     RETURNING revision, event_seq",
                )
                .bind(session_id)
                .bind(n)
                .fetch_one(&mut *self.tx)
                .await?
            } else {
                continue;
            };
            let revision: i64 = row.try_get("revision")?;
            let last_seq: i64 = row.try_get("event_seq")?;
            for (i, (kind, data)) in touch.events.iter().enumerate() {
                sqlx::query(
                    "INSERT INTO session_events (session_id, sequence, type, data, created_at) \
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(session_id)
                .bind(last_seq - n + 1 + i as i64)
                .bind(*kind)
                .bind(to_json(data)?)
                .bind(now)
                .execute(&mut *self.tx)
                .await?;
            }
            if touch.visible {
                let payload = notify::session_payload(session_id, revision);
                store.notify_replicas(&mut self.tx, &payload).await?;
                revisions.push((session_id.clone(), revision));
            }
        }
        if self.work {
            store
                .notify_replicas(&mut self.tx, notify::WORK_PAYLOAD)
                .await?;
        }
        self.tx.commit().await?;
        let hub = store.hub();
        for (session_id, revision) in &revisions {
            hub.publish_session(session_id, *revision);
        }
        if self.work {
            hub.publish_work();
        }
        Ok(revisions)
    }
}
