//! Fenced compare-and-set writes of execution-resource records and lease hand-backs, for
//! one run or many in one transaction, with a fixed number of statements per batch.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::json;

use crate::clock::{from_millis, to_millis};
use crate::domain::decide::{finish, resources};
use crate::domain::resource::ExecutionResourceRecord;
use crate::domain::resource::ResourceState;
use crate::domain::resource::RunEffect;
use crate::domain::RunId;
use crate::store::engine::params::{bind_ids, params, value_rows};
use crate::store::engine::records::{RecordHead, RunFence};
use crate::store::engine::tx::WriteTx;
use crate::store::engine::{rows, Store, StoreError, StoreResult};
use crate::store::resources::hooks::lifecycle_event;
use crate::store::runs::fence::Outcome;

/// One record write: `record` replaces the stored one if its `version` still matches and
/// `fencing_token` still holds the run's live lease.
#[derive(Debug)]
pub(in crate::store) struct SaveItem {
    pub run_id: RunId,
    pub fencing_token: i64,
    pub record: ExecutionResourceRecord,
    pub effect: RunEffect,
    /// The holder's last write: if it lands, the lease is handed back in the same transaction.
    pub hand_back: bool,
}

/// A lifecycle lease to hand back, and the `due_at` its claim deferred the record to.
#[derive(Debug, Clone)]
pub(in crate::store) struct HandBack {
    pub run_id: RunId,
    pub fencing_token: i64,
    pub deferred_until: DateTime<Utc>,
    /// Handed back with a save of the record: the claim's deferral is no longer there to undo.
    pub saved: bool,
}

/// Parameters per row of the batched record update (`$1` is the shared `now`).
const WRITE_COLS: usize = 24;

fn flag_param(value: bool) -> i64 {
    i64::from(value)
}

/// `record` as the write above stores it: the version bumped, `updated_at` = `now`, and every
/// time at the millisecond the database keeps. The columns no write changes (provider, spec,
/// resolved spec hash) were read with the record.
fn as_stored(record: &ExecutionResourceRecord, now: DateTime<Utc>) -> ExecutionResourceRecord {
    let ms = |t: DateTime<Utc>| from_millis(to_millis(t));
    let mut r = record.clone();
    r.version += 1;
    r.updated_at = ms(now);
    for t in [
        &mut r.release_requested_at,
        &mut r.released_at,
        &mut r.next_retry_at,
        &mut r.due_at,
    ] {
        *t = t.map(ms);
    }
    r
}

impl Store {
    /// Writes each item under its own fence and version check, in item order; an item that
    /// fails its check gets its own error (`LeaseLost`, `Conflict`, `NotFound`) and writes
    /// nothing. `fences` holds every item's run fence, its run already locked. `known`, when
    /// given, holds the head of every item's record, already locked in this transaction. An
    /// item saved with `hand_back` hands its lease back too. The outer error is a database
    /// failure: the transaction must be abandoned.
    pub(in crate::store) async fn save_batch_in(
        &self,
        tx: &mut WriteTx,
        items: &[&SaveItem],
        fences: &HashMap<String, RunFence>,
        known: Option<&HashMap<String, RecordHead>>,
    ) -> StoreResult<Vec<StoreResult<ExecutionResourceRecord>>> {
        let ids: Vec<&str> = items.iter().map(|i| i.run_id.as_str()).collect();
        // A record that becomes released wakes its ancestors: their records are locked with
        // the items' own, in one statement and one order, so two writers never wait on each
        // other.
        let releasing: Vec<&str> = items
            .iter()
            .filter(|i| resources::may_wake_ancestors(i.record.state))
            .map(|i| i.run_id.as_str())
            .filter(|id| fences.get(*id).is_some_and(|f| f.has_parent))
            .collect();
        let ancestors = self.ancestors_of_runs(tx.conn(), &releasing).await?;
        let read;
        let current = match known {
            Some(heads) if ancestors.is_empty() => heads,
            _ => {
                let mut locked = ids.clone();
                locked.extend(ancestors.iter().map(|(_, id)| id.as_str()));
                locked.sort_unstable();
                locked.dedup();
                read = self.load_record_heads(tx.conn(), &locked, true).await?;
                &read
            }
        };
        let mut verdicts = Vec::with_capacity(items.len());
        for item in items {
            let id = item.run_id.as_str();
            verdicts.push(match (fences.get(id), current.get(id)) {
                (None, _) => Some(StoreError::NotFound("run")),
                (Some(fence), _) if fence.lease.check(item.fencing_token, tx.now).is_err() => {
                    Some(self.lease_lost())
                }
                (_, None) => Some(StoreError::NotFound("execution_resource")),
                (_, Some(cur)) if cur.version != item.record.version => {
                    Some(StoreError::VersionConflict {
                        current: cur.version,
                        expected: item.record.version,
                    })
                }
                _ => None,
            });
        }
        let writes: Vec<&SaveItem> = items
            .iter()
            .zip(&verdicts)
            .filter_map(|(item, rejected)| rejected.is_none().then_some(*item))
            .collect();
        let mut saved = self.write_resources(tx, &writes).await?;
        let mut released = Vec::new();
        let mut confirmed = Vec::new();
        let mut results = Vec::with_capacity(items.len());
        for (item, rejected) in items.iter().zip(verdicts) {
            let id = item.run_id.as_str();
            let (Some(_), Some(cur), None) = (fences.get(id), current.get(id), &rejected) else {
                results.push(Err(rejected.unwrap_or(StoreError::NotFound("run"))));
                continue;
            };
            let Some(record) = saved.remove(id) else {
                results.push(Err(self.lease_lost()));
                continue;
            };
            if record.state != cur.state {
                tx.resource_event(
                    id,
                    record.version,
                    lifecycle_event(record.state),
                    json!({
                        "run_id": id,
                        "from": cur.state,
                        "state": record.state,
                        "generation": record.generation,
                        "provider_id": record.provider_id,
                        "disposition": record.disposition,
                        "error_code": record.error.as_ref().map(|e| e.code.as_str()),
                    }),
                );
            }
            if resources::wakes_ancestors(cur.state, record.state) {
                released.push(id);
            }
            if let Some(taken) = resources::release_confirmed(cur.state, &record) {
                confirmed.push((id, record.version, taken));
            }
            if record.due_at.is_some() {
                tx.work();
            } else if record.state == ResourceState::Active {
                tx.runtime_work();
            }
            results.push(Ok(record));
        }
        self.record_releases(tx, &confirmed).await?;
        let mut woken = std::collections::HashSet::new();
        for (root, ancestor) in &ancestors {
            if released.contains(&root.as_str()) && woken.insert(ancestor.as_str()) {
                self.resource_unblocked(tx, ancestor).await?;
            }
        }
        for (item, result) in items.iter().zip(results.iter_mut()) {
            let (RunEffect::Fail { code, message }, Ok(_)) = (&item.effect, &*result) else {
                continue;
            };
            let id = item.run_id.as_str();
            let Some(rec) = self.load_runs(tx.conn(), &[id], false).await?.remove(id) else {
                continue;
            };
            let Ok(to) = finish::fail(&rec.run) else {
                continue;
            };
            let error = json!({ "code": code, "message": message });
            let outcome = Some(Outcome::Error(&error));
            self.finish_run(tx, &rec, to, Some(item.fencing_token), outcome)
                .await?;
            // Ending the run made its record due again: return what is stored.
            *result = self
                .load_resource(tx.conn(), item.run_id.as_str(), false)
                .await?
                .ok_or(StoreError::NotFound("execution_resource"));
        }
        let leaving: Vec<HandBack> = items
            .iter()
            .zip(&results)
            .filter(|(item, result)| {
                item.hand_back && item.effect == RunEffect::None && result.is_ok()
            })
            .map(|(item, _)| HandBack {
                run_id: item.run_id.clone(),
                fencing_token: item.fencing_token,
                deferred_until: tx.now,
                saved: true,
            })
            .collect();
        self.hand_back_in(tx, &leaving).await?;
        Ok(results)
    }

    /// One statement for every item that passed its checks; the fence and the version are
    /// checked again in it. Returns the stored records by run id: what was written, with the
    /// version bumped and the timestamps as stored.
    async fn write_resources(
        &self,
        tx: &mut WriteTx,
        items: &[&SaveItem],
    ) -> StoreResult<HashMap<String, ExecutionResourceRecord>> {
        if items.is_empty() {
            return Ok(HashMap::new());
        }
        // Placeholders are numbered in the order they appear, which is the order of binding:
        // SQLite binds anonymous ones without looking each name up in a list of them all.
        let mut p = self.placeholders();
        let (since, updated) = (p.next(), p.next());
        let values = (0..items.len())
            .map(|_| format!("({})", p.row(WRITE_COLS)))
            .collect::<Vec<_>>()
            .join(", ");
        let live = p.next();
        let sql = format!(
            "UPDATE execution_resources SET generation = v.column3, sandbox_ref = v.column4, \
             state = v.column5, disposition = v.column6, sandbox_checkpoint = v.column7, \
             checkpoint_lost = v.column8, suspension_id = v.column9, \
             suspension_reason = v.column10, blocking_job_ids = v.column11, \
             blocking_child_run_ids = v.column12, release_idempotency_key = v.column13, \
             release_purpose = v.column14, release_requested_at = v.column15, \
             released_at = v.column16, compute_released = v.column17, \
             bind_idempotency_key = v.column18, retry_count = v.column19, \
             next_retry_at = v.column20, due_at = v.column21, error = v.column22, \
             provider_generation = v.column24, version = version + 1, \
             state_since = CASE WHEN state = v.column5 THEN state_since ELSE {since} END, \
             updated_at = {updated} \
             FROM (VALUES {values}) AS v \
             WHERE execution_resources.run_id = v.column1 \
               AND execution_resources.version = v.column2 \
               AND EXISTS (SELECT 1 FROM runs WHERE runs.id = v.column1 \
                 AND runs.fencing_token = v.column23 AND runs.lease_expires_at > {live}) \
             RETURNING execution_resources.run_id"
        );
        let now = to_millis(tx.now);
        let mut query = sqlx::query(&sql).bind(now).bind(now);
        for item in items {
            let r = &item.record;
            query = query
                .bind(r.run_id.as_str())
                .bind(r.version)
                .bind(r.generation)
                .bind(r.sandbox_ref.as_ref().map(rows::to_json).transpose()?)
                .bind(r.state.as_str())
                .bind(r.disposition.map(|d| d.as_str()))
                .bind(
                    r.sandbox_checkpoint
                        .as_ref()
                        .map(rows::to_json)
                        .transpose()?,
                )
                .bind(flag_param(r.checkpoint_lost))
                .bind(r.suspension_id.as_ref().map(|s| s.as_str()))
                .bind(r.suspension_reason.map(|s| s.as_str()))
                .bind(rows::to_json(&r.blocking_job_ids)?)
                .bind(rows::to_json(&r.blocking_child_run_ids)?)
                .bind(r.release_idempotency_key.as_deref())
                .bind(r.release_purpose.map(|p| p.as_str()))
                .bind(r.release_requested_at.map(to_millis))
                .bind(r.released_at.map(to_millis))
                .bind(flag_param(r.compute_released))
                .bind(r.bind_idempotency_key.as_deref())
                .bind(r.retry_count)
                .bind(r.next_retry_at.map(to_millis))
                .bind(r.due_at.map(to_millis))
                .bind(r.error.as_ref().map(rows::to_json).transpose()?)
                .bind(item.fencing_token)
                .bind(r.provider_generation);
        }
        let landed = query.bind(now).fetch_all(tx.conn()).await?;
        let mut by_id: HashMap<&str, &SaveItem> =
            items.iter().map(|i| (i.run_id.as_str(), *i)).collect();
        let mut saved = HashMap::with_capacity(landed.len());
        for row in &landed {
            let id = rows::text(row, "run_id")?;
            if let Some(item) = by_id.remove(id.as_str()) {
                saved.insert(id, as_stored(&item.record, tx.now));
            }
        }
        Ok(saved)
    }

    /// A claimed record is deferred to its lease's expiry, so that claims never scan past
    /// records that are due but leased: whoever holds the lease writes the real `due_at`.
    /// The claim read the records locked, so this update takes no lock of its own.
    pub(in crate::store) async fn defer_resources(
        &self,
        tx: &mut WriteTx,
        ids: &[&str],
        until: DateTime<Utc>,
    ) -> StoreResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let sql = format!(
            "UPDATE execution_resources SET due_at = $1 WHERE run_id IN ({})",
            params(2, ids.len())
        );
        bind_ids(sqlx::query(&sql).bind(to_millis(until)), ids)
            .execute(tx.conn())
            .await?;
        Ok(())
    }

    /// Hands back each lease its fencing token still holds (the others are left alone); a
    /// record still deferred by that lease's claim is due again now.
    pub(in crate::store) async fn hand_back_in(
        &self,
        tx: &mut WriteTx,
        leases: &[HandBack],
    ) -> StoreResult<()> {
        if leases.is_empty() {
            return Ok(());
        }
        let sql = format!(
            "UPDATE runs SET lease_id = NULL, lease_holder = NULL, fencing_token = NULL, \
             lease_expires_at = NULL FROM (VALUES {}) AS v \
             WHERE runs.id = v.column1 AND runs.fencing_token = v.column2 RETURNING runs.id",
            value_rows(1, leases.len(), 2)
        );
        let mut query = sqlx::query(&sql);
        for l in leases {
            query = query.bind(l.run_id.as_str()).bind(l.fencing_token);
        }
        let handed: Vec<String> = query
            .fetch_all(tx.conn())
            .await?
            .iter()
            .map(|row| rows::text(row, "id"))
            .collect::<StoreResult<_>>()?;
        if handed.is_empty() {
            return Ok(());
        }
        tx.work();
        let deferred: Vec<&HandBack> = leases
            .iter()
            .filter(|l| !l.saved && handed.iter().any(|id| id == l.run_id.as_str()))
            .collect();
        if deferred.is_empty() {
            return Ok(());
        }
        let sql = format!(
            "UPDATE execution_resources SET due_at = $1 FROM (VALUES {}) AS v \
             WHERE execution_resources.run_id = v.column1 \
               AND execution_resources.due_at = v.column2",
            value_rows(2, deferred.len(), 2)
        );
        let mut query = sqlx::query(&sql).bind(to_millis(tx.now));
        for l in deferred {
            query = query
                .bind(l.run_id.as_str())
                .bind(to_millis(l.deferred_until));
        }
        query.execute(tx.conn()).await?;
        Ok(())
    }
}
