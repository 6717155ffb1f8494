//! The commit's writes to the changed sessions: their counters and their new events. On
//! PostgreSQL one statement (a data-modifying `WITH`) does both; SQLite takes two.

use std::collections::HashMap;

use sqlx::Row;

use super::{Touch, WriteTx, EVENTS_PER_INSERT};
use crate::clock::to_millis;
use crate::store::engine::error::StoreResult;
use crate::store::engine::handle::Store;
use crate::store::engine::params::{padded, value_column, value_rows, with_last_repeated};
use crate::store::engine::rows::to_json;

/// A new event of a session: its sequence is the session's last one, after the update,
/// less `back`.
struct NewEvent<'a> {
    session: &'a str,
    back: i64,
    kind: &'static str,
    data: String,
}

/// A session's counters after the update: revision, last event sequence, tenant.
type Counters = HashMap<String, (i64, i64, String)>;

impl WriteTx {
    /// One statement per kind of write whatever the number of sessions. Sessions are locked
    /// in id order first.
    pub(super) async fn touch_sessions(
        &mut self,
        store: &Store,
        touched: &[(&String, &Touch)],
    ) -> StoreResult<Vec<(String, i64)>> {
        if touched.is_empty() {
            return Ok(Vec::new());
        }
        if touched.len() > 1 {
            let ids: Vec<&str> = touched.iter().map(|(id, _)| id.as_str()).collect();
            store.lock_sessions(&mut self.tx, &ids).await?;
        }
        let mut events = Vec::new();
        for (id, touch) in touched {
            let n = touch.events.len() as i64;
            for (i, (kind, data)) in touch.events.iter().enumerate() {
                events.push(NewEvent {
                    session: id.as_str(),
                    back: n - 1 - i as i64,
                    kind,
                    data: to_json(data)?,
                });
            }
        }
        // The events the update inserts itself; the rest (all of them on SQLite) follow it.
        let (along, pad) = if store.writes_in_with() {
            (events.len().min(EVENTS_PER_INSERT), true)
        } else {
            (0, false)
        };
        let counters = self.update_sessions(touched, &events[..along], pad).await?;
        let rows = events
            .drain(along..)
            .map(|e| {
                let (_, last_seq, _) = counters.get(e.session).ok_or(sqlx::Error::RowNotFound)?;
                Ok((e.session, last_seq - e.back, e.kind, e.data))
            })
            .collect::<StoreResult<Vec<_>>>()?;
        self.insert_events("session_events", "session_id", &rows)
            .await?;

        let mut revisions = Vec::new();
        for (id, touch) in touched {
            let (revision, last_seq, tenant) =
                counters.get(id.as_str()).ok_or(sqlx::Error::RowNotFound)?;
            if !touch.events.is_empty() {
                self.announce.events.push(((*id).clone(), *last_seq));
            }
            if touch.inbox && !self.announce.inbox_tenants.contains(tenant) {
                self.announce.inbox_tenants.push(tenant.clone());
            }
            if touch.visible {
                revisions.push(((*id).clone(), *revision));
            }
        }
        Ok(revisions)
    }

    /// The sessions' revisions and event counters moved, with `events` inserted by the same
    /// statement (PostgreSQL only: SQLite passes none). With `pad`, the rows are padded to
    /// the statement sizes of `padded`: the last session again (updated once all the same),
    /// and events of no session (joined to none).
    async fn update_sessions(
        &mut self,
        touched: &[(&String, &Touch)],
        events: &[NewEvent<'_>],
        pad: bool,
    ) -> StoreResult<Counters> {
        let size = |n: usize| if pad { padded(n) } else { n };
        let (sessions, rows) = (size(touched.len()), size(events.len()));
        let sql = update_sql(sessions, rows);
        let mut update = sqlx::query(&sql).bind(to_millis(self.now));
        for (id, touch) in with_last_repeated(touched, sessions) {
            update = update
                .bind(id.as_str())
                .bind(i64::from(touch.visible))
                .bind(touch.events.len() as i64);
        }
        for e in events {
            update = update
                .bind(e.session)
                .bind(e.back)
                .bind(e.kind)
                .bind(e.data.as_str());
        }
        for _ in events.len()..rows {
            update = update.bind("").bind(0_i64).bind("").bind("");
        }
        let mut counters = Counters::new();
        for row in update.fetch_all(&mut *self.tx).await? {
            let id: String = row.try_get("id")?;
            let revision: i64 = row.try_get("revision")?;
            let last_seq: i64 = row.try_get("event_seq")?;
            let tenant: String = row.try_get("tenant_id")?;
            counters.insert(id, (revision, last_seq, tenant));
        }
        Ok(counters)
    }
}

/// `$1` = now, then three parameters per session and four per event. The ids are also listed
/// as an `IN` of the same parameters: PostgreSQL plans the join with the `VALUES` alone as a
/// sequential scan once a group has a few dozen sessions.
fn update_sql(sessions: usize, events: usize) -> String {
    let ids = value_column(2, sessions, 3, 0);
    let update = format!(
        "UPDATE sessions SET revision = revision + v.column2, \
         updated_at = CASE WHEN v.column2 = 1 THEN $1 ELSE updated_at END, \
         event_seq = event_seq + v.column3 FROM (VALUES {}) AS v \
         WHERE sessions.id = v.column1 AND sessions.id IN ({ids}) \
         RETURNING sessions.id, sessions.tenant_id, sessions.revision, sessions.event_seq",
        value_rows(2, sessions, 3)
    );
    if events == 0 {
        return update;
    }
    format!(
        "WITH s AS ({update}), e AS (INSERT INTO session_events \
         (session_id, sequence, type, data, created_at) \
         SELECT s.id, s.event_seq - ev.column2, ev.column3, ev.column4, $1 \
         FROM (VALUES {}) AS ev JOIN s ON s.id = ev.column1) \
         SELECT id, tenant_id, revision, event_seq FROM s",
        value_rows(2 + sessions * 3, events, 4)
    )
}
