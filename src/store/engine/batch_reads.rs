//! Set-based reads for a batch of runs: one statement per kind of row, whatever the batch
//! size, so claiming many runs costs a few round trips instead of a few per run.

use std::collections::HashMap;

use sqlx::AnyConnection;

use super::error::StoreResult;
use super::handle::Store;
use super::params::{bind_ids, padded_ids, pairs, params};
use super::records::{InteractionRecord, RecordHead, RunFence, RunRecord};
use super::rows::{self, INTERACTION_COLS, JOB_COLS, RESOURCE_COLS, SUSPENSION_COLS};
use crate::domain::interaction::Suspension;
use crate::domain::job::Job;
use crate::domain::resource::ExecutionResourceRecord;
use crate::domain::resource::ResourceState;
use crate::domain::RunId;

/// The rows `sql` selects with `ids` bound as `$1…`, parsed, by `key`.
async fn keyed<T>(
    conn: &mut AnyConnection,
    sql: &str,
    ids: &[&str],
    parse: fn(&sqlx::any::AnyRow) -> StoreResult<T>,
    key: fn(&T) -> &str,
) -> StoreResult<HashMap<String, T>> {
    pairs(conn, sql, ids, |row| {
        let item = parse(row)?;
        Ok((key(&item).to_owned(), item))
    })
    .await
}

impl Store {
    /// The runs (with lease and tenant) among `ids`, in id order; locked if `lock`.
    pub(in crate::store) async fn load_runs(
        &self,
        conn: &mut AnyConnection,
        ids: &[&str],
        lock: bool,
    ) -> StoreResult<HashMap<String, RunRecord>> {
        let ids = padded_ids(ids);
        let sql = self.runs_in_lock_order(self.select_run_record(), ids.len(), lock);
        keyed(conn, &sql, &ids, rows::run_record, |r| r.run.id.as_str()).await
    }

    /// The interactions among `ids`, in id order; locked if `lock`.
    pub(in crate::store) async fn load_interactions(
        &self,
        conn: &mut AnyConnection,
        ids: &[&str],
        lock: bool,
    ) -> StoreResult<HashMap<String, InteractionRecord>> {
        let ids = padded_ids(ids);
        let sql = format!(
            "SELECT {INTERACTION_COLS} FROM interactions i WHERE i.id IN ({}) ORDER BY i.id{}",
            params(1, ids.len()),
            if lock { self.lock_row() } else { "" }
        );
        keyed(conn, &sql, &ids, rows::interaction_record, |r| {
            r.interaction.id.as_str()
        })
        .await
    }

    /// The records of the runs among `ids`; locked if `lock`, in descending id order (the
    /// order of a climb from a child, created later, to its ancestors).
    pub(in crate::store) async fn load_resources(
        &self,
        conn: &mut AnyConnection,
        ids: &[&str],
        lock: bool,
    ) -> StoreResult<HashMap<String, ExecutionResourceRecord>> {
        let sql = self.records_in_lock_order(RESOURCE_COLS, ids.len(), lock);
        keyed(conn, &sql, ids, rows::resource, |r| r.run_id.as_str()).await
    }

    /// The fence of each run among `ids`, in id order; locked if `lock` (as `load_runs`
    /// locks them). All a fenced write checks, without decoding the runs.
    pub(in crate::store) async fn load_fences(
        &self,
        conn: &mut AnyConnection,
        ids: &[&str],
        lock: bool,
    ) -> StoreResult<HashMap<String, RunFence>> {
        let ids = padded_ids(ids);
        let select = "SELECT r.id, r.lease_id, r.fencing_token, r.lease_expires_at, \
                      r.parent_run_id FROM runs r";
        let sql = self.runs_in_lock_order(select, ids.len(), lock);
        pairs(conn, &sql, &ids, |row| {
            let fence = RunFence {
                lease: rows::lease_state(row)?,
                has_parent: rows::opt_text(row, "parent_run_id")?.is_some(),
            };
            Ok((rows::text(row, "id")?, fence))
        })
        .await
    }

    /// The state and version of each record among `ids`; locked if `lock`, in the order
    /// `load_resources` locks them. All a compare-and-set write checks.
    pub(in crate::store) async fn load_record_heads(
        &self,
        conn: &mut AnyConnection,
        ids: &[&str],
        lock: bool,
    ) -> StoreResult<HashMap<String, RecordHead>> {
        let ids = padded_ids(ids);
        let sql = self.records_in_lock_order("run_id, state, version", ids.len(), lock);
        pairs(conn, &sql, &ids, |row| {
            let head = RecordHead {
                state: rows::enumeration(row, "state")?,
                version: rows::int(row, "version")?,
            };
            Ok((rows::text(row, "run_id")?, head))
        })
        .await
    }

    /// `select … FROM runs r` of `n` ids bound as `$1…`, in the order every writer of
    /// several runs locks them: ascending id.
    fn runs_in_lock_order(&self, select: &str, n: usize, lock: bool) -> String {
        format!(
            "{select} WHERE r.id IN ({}) ORDER BY r.id{}",
            params(1, n),
            if lock { self.lock_run() } else { "" }
        )
    }

    /// `cols` of the records of `n` run ids bound as `$1…`, in the order every writer of
    /// several records locks them: descending run id.
    fn records_in_lock_order(&self, cols: &str, n: usize, lock: bool) -> String {
        format!(
            "SELECT {cols} FROM execution_resources WHERE run_id IN ({}) \
             ORDER BY run_id DESC{}",
            params(1, n),
            if lock { self.lock_row() } else { "" }
        )
    }

    /// Every ancestor of each run, nearest first: `(run, ancestor)` pairs.
    pub(in crate::store) async fn ancestors_of_runs(
        &self,
        conn: &mut AnyConnection,
        ids: &[&str],
    ) -> StoreResult<Vec<(String, String)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "WITH RECURSIVE a (root, id, depth) AS (\
               SELECT id, parent_run_id, 1 FROM runs \
               WHERE id IN ({}) AND parent_run_id IS NOT NULL \
               UNION ALL \
               SELECT a.root, r.parent_run_id, a.depth + 1 FROM runs r JOIN a ON r.id = a.id \
               WHERE r.parent_run_id IS NOT NULL) \
             SELECT root, id FROM a ORDER BY depth, id",
            params(1, ids.len())
        );
        bind_ids(sqlx::query(&sql), ids)
            .fetch_all(conn)
            .await?
            .iter()
            .map(|row| Ok((rows::text(row, "root")?, rows::text(row, "id")?)))
            .collect()
    }

    /// Each run's jobs, oldest first.
    pub(in crate::store) async fn jobs_of_runs(
        &self,
        conn: &mut AnyConnection,
        ids: &[&str],
    ) -> StoreResult<HashMap<String, Vec<Job>>> {
        let mut out: HashMap<String, Vec<Job>> = HashMap::new();
        if ids.is_empty() {
            return Ok(out);
        }
        let sql = format!(
            "SELECT {JOB_COLS} FROM jobs j WHERE j.run_id IN ({}) \
             ORDER BY j.run_id, j.created_at, j.id",
            params(1, ids.len())
        );
        for row in bind_ids(sqlx::query(&sql), ids).fetch_all(conn).await? {
            let job = rows::job(&row)?;
            out.entry(job.run_id.as_str().to_owned())
                .or_default()
                .push(job);
        }
        Ok(out)
    }

    /// For each run, every descendant run (any depth) that has a record, with the record's
    /// state, sorted by run id.
    pub(in crate::store) async fn descendants_of_runs(
        &self,
        conn: &mut AnyConnection,
        ids: &[&str],
    ) -> StoreResult<HashMap<String, Vec<(RunId, ResourceState)>>> {
        let mut out: HashMap<String, Vec<(RunId, ResourceState)>> = HashMap::new();
        if ids.is_empty() {
            return Ok(out);
        }
        // SQLite keeps a CROSS JOIN's left side outer; otherwise it may scan every record and
        // probe `d`. No ORDER BY: it would let SQLite scan every record in key order too.
        let sql = format!(
            "WITH RECURSIVE d (root, id) AS (\
               SELECT parent_run_id, id FROM runs WHERE parent_run_id IN ({}) \
               UNION ALL \
               SELECT d.root, r.id FROM runs r JOIN d ON r.parent_run_id = d.id) \
             SELECT d.root, e.run_id, e.state FROM d CROSS JOIN execution_resources e \
             WHERE e.run_id = d.id",
            params(1, ids.len())
        );
        for row in bind_ids(sqlx::query(&sql), ids).fetch_all(conn).await? {
            out.entry(rows::text(&row, "root")?).or_default().push((
                RunId::from_trusted(rows::text(&row, "run_id")?),
                rows::enumeration(&row, "state")?,
            ));
        }
        for found in out.values_mut() {
            found.sort_by(|a, b| a.0.cmp(&b.0));
        }
        Ok(out)
    }

    /// Each run's latest suspension.
    pub(in crate::store) async fn latest_suspensions(
        &self,
        conn: &mut AnyConnection,
        ids: &[&str],
    ) -> StoreResult<HashMap<String, Suspension>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let sql = format!(
            "SELECT {SUSPENSION_COLS} FROM suspensions WHERE id IN (\
               SELECT (SELECT s.id FROM suspensions s WHERE s.run_id = r.id \
                       ORDER BY s.requested_at DESC, s.id DESC LIMIT 1) \
               FROM runs r WHERE r.id IN ({}))",
            params(1, ids.len())
        );
        let found = bind_ids(sqlx::query(&sql), ids).fetch_all(conn).await?;
        found
            .iter()
            .map(|row| {
                let s = rows::suspension(row)?;
                Ok((s.run_id.as_str().to_owned(), s))
            })
            .collect()
    }
}
