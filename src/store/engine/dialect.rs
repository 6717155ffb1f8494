//! Every place where SQLite and PostgreSQL differ: how transactions begin, row locks,
//! placeholders, the fencing-token source, claiming due runs with a fencing token,
//! cross-replica notifications, migrations and group writers. Where `writes_in_with`,
//! PostgreSQL folds a group's writes into one data-modifying `WITH`
//! (`Store::write_replies_together`, `tx::touch`).

use chrono::{DateTime, Utc};
use sqlx::migrate::Migrator;
use sqlx::AnyConnection;
use sqlx::{Any, Row, Transaction};

use super::error::{StoreError, StoreResult};
use super::handle::{Backend, Store};
use super::params::{bind_ids, padded, padded_ids, params, value_rows, with_last_repeated};
use super::rows;
use crate::clock::to_millis;
use crate::domain::run::RunState;
use crate::domain::LeaseId;
use crate::notify;

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/postgres");

/// A run that a claim has just leased.
#[derive(Debug, Clone)]
pub(in crate::store) struct LeasedRow {
    pub run_id: String,
    pub session_id: String,
    pub prev_state: RunState,
    /// The run had a lease before (it expired): this grant is a take-over.
    pub had_lease: bool,
    pub lease_id: String,
    pub fencing_token: i64,
}

/// Which runs a claim leases. Both kinds bind `$1` = now and `$2` = max; the tenant, when one
/// is given, goes to the placeholder the caller names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store) enum DueRuns {
    /// Runs a runtime may execute: claimable states, no live lease, and compute ready (no
    /// sandbox spec, or a record that is `active` and not due). Longest available first:
    /// by lease expiry, or creation for a run without a lease. The index range stops 2 s
    /// past now (room for clock skew between replicas), so live leases are not scanned.
    Runtime,
    /// Runs whose execution-resource record is due and that have no live lease. Oldest
    /// `due_at` first.
    Lifecycle,
}

impl DueRuns {
    /// `FROM …`, `WHERE …` and `ORDER BY …` of the due-run selection (run table alias `r`),
    /// with the tenant bound to `tenant`'s placeholder if given. The tenant is read per
    /// candidate, never joined: a join lets PostgreSQL start from a tenant's sessions when
    /// its statistics lag a burst of new rows, and then scan every run once per session.
    /// Without a tenant there is no clause at all: `$t IS NULL OR …` misleads the generic plan.
    fn sql(self, tenant: Option<&str>) -> (&'static str, String, &'static str) {
        let (from, due_where, order) = match self {
            DueRuns::Runtime => (
                "runs r",
                "r.state IN ('queued', 'running', 'resuming') \
                 AND COALESCE(r.lease_expires_at, r.created_at) <= $1 + 2000 \
                 AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= $1) \
                 AND (r.sandbox_spec IS NULL OR EXISTS (SELECT 1 FROM execution_resources e \
                   WHERE e.run_id = r.id AND e.state = 'active' AND e.due_at IS NULL))",
                "COALESCE(r.lease_expires_at, r.created_at), r.id",
            ),
            DueRuns::Lifecycle => (
                "execution_resources e JOIN runs r ON r.id = e.run_id",
                "e.due_at IS NOT NULL AND e.due_at <= $1 \
                 AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= $1)",
                "e.due_at, e.run_id",
            ),
        };
        let due_where = match tenant {
            Some(placeholder) => format!(
                "{due_where} AND (SELECT s.tenant_id FROM sessions s WHERE s.id = r.session_id) \
                 = {placeholder}"
            ),
            None => due_where.to_owned(),
        };
        (from, due_where, order)
    }
}

/// The fencing-token source on PostgreSQL: a sequence.
const PG_NEXT_FENCING_TOKEN: &str = "nextval('fencing_tokens')";

/// The fencing-token source on SQLite: a counter row, moved under the write lock. Takes `n`
/// tokens and returns the last.
async fn sqlite_fencing_tokens(conn: &mut AnyConnection, n: usize) -> StoreResult<i64> {
    Ok(sqlx::query(
        "UPDATE counters SET value = value + $1 WHERE name = 'fencing_token' RETURNING value",
    )
    .bind(n as i64)
    .fetch_one(&mut *conn)
    .await?
    .try_get("value")?)
}

impl Backend {
    /// Groups of writes one replica writes at once: `postgres` there, one where the database
    /// has one writer.
    pub(in crate::store) fn group_writers(self, postgres: usize) -> usize {
        match self {
            Backend::Sqlite => 1,
            Backend::Postgres => postgres,
        }
    }

    pub(in crate::store) fn migrator(self) -> &'static Migrator {
        match self {
            Backend::Sqlite => &SQLITE_MIGRATIONS,
            Backend::Postgres => &POSTGRES_MIGRATIONS,
        }
    }
}

/// Begins a transaction on `pool` (with `sql` instead of a plain BEGIN) on a task of its own. A caller
/// dropped while BEGIN is under way (its client gone, a timeout) would hand the connection
/// back with a transaction open that nothing ends, and every later user of the connection
/// would fail; the task's transaction, if no one takes it, is rolled back as it drops.
async fn begin_on_own_task(
    pool: &sqlx::AnyPool,
    sql: Option<&'static str>,
) -> StoreResult<Transaction<'static, Any>> {
    let pool = pool.clone();
    let begun = tokio::spawn(async move {
        match sql {
            Some(sql) => pool.begin_with(sql).await,
            None => pool.begin().await,
        }
    })
    .await
    .map_err(|e| StoreError::Unavailable(format!("beginning a transaction: {e}")))?;
    Ok(begun?)
}

impl Store {
    /// Rows are locked by the statements that read them to write them (PostgreSQL). SQLite
    /// has one writer and no row locks: a read done only to lock can be skipped.
    pub(in crate::store) fn has_row_locks(&self) -> bool {
        self.inner.backend == Backend::Postgres
    }

    /// A statement may write in its `WITH` clauses (PostgreSQL), so writes to several tables
    /// can go in one statement; SQLite takes one statement per table.
    pub(in crate::store) fn writes_in_with(&self) -> bool {
        self.inner.backend == Backend::Postgres
    }

    /// Placeholders for one statement whose parameters are bound in the order they appear.
    pub(in crate::store) fn placeholders(&self) -> Placeholders {
        Placeholders::new(self.inner.backend)
    }

    /// A new fencing token, for a lease granted outside a claim.
    pub(in crate::store) async fn next_fencing_token(
        &self,
        conn: &mut AnyConnection,
    ) -> StoreResult<i64> {
        match self.inner.backend {
            Backend::Sqlite => sqlite_fencing_tokens(conn, 1).await,
            Backend::Postgres => {
                let sql = format!("SELECT {PG_NEXT_FENCING_TOKEN} AS value");
                Ok(sqlx::query(&sql).fetch_one(conn).await?.try_get("value")?)
            }
        }
    }

    /// A run-time setting of the connections' database sessions (`None` on SQLite, which
    /// has none, and for a name PostgreSQL does not know).
    pub async fn session_setting(&self, name: &str) -> StoreResult<Option<String>> {
        if self.inner.backend == Backend::Sqlite {
            return Ok(None);
        }
        let row = sqlx::query("SELECT current_setting($1, true) AS value")
            .bind(name)
            .fetch_one(&self.inner.read)
            .await?;
        Ok(row.try_get("value")?)
    }

    /// A write transaction on `pool`: SQLite takes the write lock at once (no upgrade
    /// deadlocks).
    pub(in crate::store) async fn begin_write(
        &self,
        pool: &sqlx::AnyPool,
    ) -> StoreResult<Transaction<'static, Any>> {
        let sqlite = self.inner.backend == Backend::Sqlite;
        begin_on_own_task(pool, sqlite.then_some("BEGIN IMMEDIATE")).await
    }

    /// A read-only transaction in which every query sees the same committed state.
    pub(in crate::store) async fn begin_consistent_read(
        &self,
    ) -> StoreResult<Transaction<'static, Any>> {
        let pg = self.inner.backend == Backend::Postgres;
        let sql = pg.then_some("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
        begin_on_own_task(&self.inner.read, sql).await
    }

    /// Appended to a `SELECT … FROM runs r …` that is about to be written to. SQLite needs
    /// nothing (one writer); `NO KEY UPDATE` does not block foreign-key checks of inserts.
    pub(in crate::store) fn lock_run(&self) -> &'static str {
        match self.inner.backend {
            Backend::Sqlite => "",
            Backend::Postgres => " FOR NO KEY UPDATE OF r",
        }
    }

    /// `SELECT` a run with its lease and its session's tenant `FROM runs r`, as each
    /// backend reads it fastest.
    pub(in crate::store) fn select_run_record(&self) -> &'static str {
        match self.inner.backend {
            Backend::Sqlite => rows::RUN_RECORD_JOINED,
            Backend::Postgres => rows::RUN_RECORD_BY_KEY,
        }
    }

    pub(in crate::store) fn lock_job(&self) -> &'static str {
        match self.inner.backend {
            Backend::Sqlite => "",
            Backend::Postgres => " FOR NO KEY UPDATE OF j",
        }
    }

    pub(in crate::store) fn lock_row(&self) -> &'static str {
        match self.inner.backend {
            Backend::Sqlite => "",
            Backend::Postgres => " FOR NO KEY UPDATE",
        }
    }

    /// Leases up to `max` due runs, in `due`'s order, each with a new lease id and fencing
    /// token.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::store) async fn lease_due_runs(
        &self,
        conn: &mut AnyConnection,
        due: DueRuns,
        tenant: Option<&str>,
        worker_id: &str,
        max: u32,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<Vec<LeasedRow>> {
        match self.inner.backend {
            Backend::Postgres => {
                let (from, due_where, order) = due.sql(tenant.map(|_| "$5"));
                let sql = format!(
                    "WITH due AS (\
                       SELECT r.id, r.state AS prev_state, r.lease_id AS prev_lease_id \
                       FROM {from} WHERE {due_where} ORDER BY {order} LIMIT $2 \
                       FOR NO KEY UPDATE OF r SKIP LOCKED) \
                     UPDATE runs SET \
                       lease_id = 'lea_' || replace(CAST(gen_random_uuid() AS TEXT), '-', ''), \
                       lease_holder = $3, \
                       fencing_token = {PG_NEXT_FENCING_TOKEN}, \
                       lease_expires_at = $4 \
                     FROM due WHERE runs.id = due.id \
                     RETURNING runs.id, runs.session_id, due.prev_state, due.prev_lease_id, \
                       runs.lease_id, runs.fencing_token"
                );
                let mut query = sqlx::query(&sql)
                    .bind(to_millis(now))
                    .bind(i64::from(max))
                    .bind(worker_id)
                    .bind(to_millis(expires_at));
                if let Some(tenant) = tenant {
                    query = query.bind(tenant);
                }
                let rows = query.fetch_all(&mut *conn).await?;
                rows.iter()
                    .map(|row| {
                        Ok(LeasedRow {
                            run_id: rows::text(row, "id")?,
                            session_id: rows::text(row, "session_id")?,
                            prev_state: rows::enumeration(row, "prev_state")?,
                            had_lease: rows::opt_text(row, "prev_lease_id")?.is_some(),
                            lease_id: rows::text(row, "lease_id")?,
                            fencing_token: rows::int(row, "fencing_token")?,
                        })
                    })
                    .collect()
            }
            Backend::Sqlite => {
                // The transaction already holds the only write lock, so select-then-update
                // cannot race with another claimer.
                let (from, due_where, order) = due.sql(tenant.map(|_| "$3"));
                let sql = format!(
                    "SELECT r.id, r.session_id, r.state AS prev_state, r.lease_id AS prev_lease_id \
                     FROM {from} WHERE {due_where} ORDER BY {order} LIMIT $2"
                );
                let mut query = sqlx::query(&sql).bind(to_millis(now)).bind(i64::from(max));
                if let Some(tenant) = tenant {
                    query = query.bind(tenant);
                }
                let due = query.fetch_all(&mut *conn).await?;
                if due.is_empty() {
                    return Ok(Vec::new());
                }
                let last = sqlite_fencing_tokens(conn, due.len()).await?;
                let first = last - due.len() as i64 + 1;
                let mut leased = Vec::with_capacity(due.len());
                for (i, row) in due.iter().enumerate() {
                    leased.push(LeasedRow {
                        run_id: rows::text(row, "id")?,
                        session_id: rows::text(row, "session_id")?,
                        prev_state: rows::enumeration(row, "prev_state")?,
                        had_lease: rows::opt_text(row, "prev_lease_id")?.is_some(),
                        lease_id: LeaseId::new().to_string(),
                        fencing_token: first + i as i64,
                    });
                }
                let sql = format!(
                    "UPDATE runs SET lease_id = v.column2, lease_holder = $1, \
                     fencing_token = v.column3, lease_expires_at = $2 \
                     FROM (VALUES {}) AS v WHERE runs.id = v.column1",
                    value_rows(3, leased.len(), 3)
                );
                let mut update = sqlx::query(&sql)
                    .bind(worker_id)
                    .bind(to_millis(expires_at));
                for l in &leased {
                    update = update
                        .bind(l.run_id.as_str())
                        .bind(l.lease_id.as_str())
                        .bind(l.fencing_token);
                }
                update.execute(&mut *conn).await?;
                Ok(leased)
            }
        }
    }

    /// PostgreSQL only: locks sessions in id order before a statement that updates them
    /// together, so two such transactions never wait on each other.
    pub(in crate::store) async fn lock_sessions(
        &self,
        conn: &mut AnyConnection,
        ids: &[&str],
    ) -> StoreResult<()> {
        if self.inner.backend == Backend::Postgres {
            let ids = padded_ids(ids);
            let sql = format!(
                "SELECT id FROM sessions WHERE id IN ({}) ORDER BY id FOR NO KEY UPDATE",
                params(1, ids.len())
            );
            bind_ids(sqlx::query(&sql), &ids)
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }

    /// PostgreSQL only: queues one notification per payload, in one statement; the database
    /// delivers them to every replica when (and only if) the transaction commits.
    pub(in crate::store) async fn notify_replicas(
        &self,
        conn: &mut AnyConnection,
        payloads: &[String],
    ) -> StoreResult<()> {
        if self.inner.backend == Backend::Postgres && !payloads.is_empty() {
            let n = padded(payloads.len());
            let sql = format!(
                "SELECT pg_notify($1, v.column1) FROM (VALUES {}) AS v",
                value_rows(2, n, 1)
            );
            let mut query = sqlx::query(&sql).bind(notify::PG_CHANNEL);
            // A payload repeated in one transaction is delivered once.
            for p in with_last_repeated(payloads, n) {
                query = query.bind(p.as_str());
            }
            query.execute(&mut *conn).await?;
        }
        Ok(())
    }
}

/// Placeholders numbered in the order they appear in the statement, so parameters are bound
/// in that order: `$1, $2, …` on PostgreSQL, anonymous `?` on SQLite (which binds each
/// `$N` of a statement by a linear search of its names: slow for hundreds of parameters).
pub(in crate::store) struct Placeholders {
    backend: Backend,
    count: usize,
}

impl Placeholders {
    fn new(backend: Backend) -> Self {
        Self { backend, count: 0 }
    }

    pub fn next(&mut self) -> String {
        self.count += 1;
        match self.backend {
            Backend::Sqlite => "?".to_owned(),
            Backend::Postgres => format!("${}", self.count),
        }
    }

    /// `n` placeholders separated by commas.
    pub fn row(&mut self, n: usize) -> String {
        (0..n).map(|_| self.next()).collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_placeholders_follow_the_binding_order_on_each_backend() {
        let mut pg = Placeholders::new(Backend::Postgres);
        assert_eq!(
            (pg.next(), pg.row(2), pg.next()),
            ("$1".into(), "$2, $3".into(), "$4".into())
        );
        let mut lite = Placeholders::new(Backend::Sqlite);
        assert_eq!((lite.next(), lite.row(2)), ("?".into(), "?, ?".into()));
    }
}
