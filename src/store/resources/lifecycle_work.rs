//! The coordinator's side of the store: claiming due lifecycle work under the per-run lease,
//! fenced compare-and-set writes of the execution-resource record, and the operator's view.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use chrono::{DateTime, Duration, Utc};
use serde_json::json;

use crate::clock::to_millis;
use crate::domain::claim::{Lease, LeaseState};
use crate::domain::resource::ExecutionResourceRecord;
use crate::domain::resource::{LifecycleWork, RunEffect};
use crate::domain::validate::{self, ValidationError};
use crate::domain::{LeaseId, RunId};
use crate::store::claims::runtime::{lease_expiry, MAX_CLAIMS};
use crate::store::engine::dialect::DueRuns;
use crate::store::engine::records::{RecordHead, RunFence};
use crate::store::engine::tx::WriteTx;
use crate::store::engine::{rows, Store, StoreError, StoreResult};
use crate::store::resources::writes::{HandBack, SaveItem};

impl Store {
    /// Claims up to `max` runs whose record is due (`due_at <= now`) and whose run has no live
    /// lease, leasing each to `holder` for `ttl` with a new fencing token (same source and
    /// counters as runtime claims). Oldest `due_at` first.
    pub async fn claim_lifecycle_work(
        &self,
        holder: &str,
        max: u32,
        ttl: Duration,
    ) -> StoreResult<Vec<LifecycleWork>> {
        self.claim_lifecycle_work_with(holder, max, ttl, &mut |_, _| None)
            .await
    }

    /// `claim_lifecycle_work`, writing in the same transaction the record that `intent`
    /// gives for a leased run (at the claim's `now`): the first write its holder would make,
    /// fenced and version-checked like any save. The written record stays deferred to the
    /// lease's expiry, as every claimed record is; the work carries it as stored.
    pub async fn claim_lifecycle_work_with(
        &self,
        holder: &str,
        max: u32,
        ttl: Duration,
        intent: &mut Intent<'_>,
    ) -> StoreResult<Vec<LifecycleWork>> {
        validate::name("holder", holder)?;
        let max = max.min(MAX_CLAIMS);
        if max == 0 {
            return Ok(Vec::new());
        }
        let mut tx = self.write_tx().await?;
        let result = async {
            let (mut work, takeovers) = self
                .grant_lifecycle_leases(&mut tx, holder, max, ttl)
                .await?;
            self.write_intents(&mut tx, &mut work, intent).await?;
            Ok((work, takeovers))
        }
        .await;
        let (mut work, takeovers) = tx.finish(self, result).await?;
        let metrics = self.metrics();
        metrics
            .lease_claims
            .fetch_add(work.len() as u64, Ordering::Relaxed);
        metrics
            .lease_takeovers
            .fetch_add(takeovers, Ordering::Relaxed);
        if !work.is_empty() {
            metrics.lifecycle_claims.fetch_add(1, Ordering::Relaxed);
        }
        work.sort_by(|a, b| (a.record.due_at, &a.run.id).cmp(&(b.record.due_at, &b.run.id)));
        Ok(work)
    }

    /// The earliest future `due_at` of any record, so an idle worker knows when to look again.
    /// A due record whose run is still leased counts from the lease's expiry (a lease handed
    /// back early publishes work instead).
    pub async fn next_lifecycle_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let row = sqlx::query(
            "SELECT MIN(CASE WHEN r.lease_expires_at IS NOT NULL AND r.lease_expires_at > e.due_at \
               THEN r.lease_expires_at ELSE e.due_at END) AS next_at \
             FROM execution_resources e JOIN runs r ON r.id = e.run_id \
             WHERE e.due_at IS NOT NULL AND (e.due_at > $1 OR r.lease_expires_at > $1)",
        )
        .bind(to_millis(self.now()))
        .fetch_one(&self.inner.read)
        .await?;
        rows::opt_time(&row, "next_at")
    }

    /// Writes `record` (every mutable field) if the run's lease is still held with
    /// `fencing_token` and the stored `version` still equals `record.version`, bumping the
    /// version. `LeaseLost` (counted in `fenced_rejections`) or `Conflict`
    /// `VersionConflict` otherwise, writing nothing. Never touches the session
    /// revision or the run's visible fields, except through `effect`. Logs a lifecycle event
    /// when the state changes; when the record becomes `released`, every ancestor record
    /// that is `release_blocked` becomes due; publishes work for every worker when the
    /// record is due, for the runtimes when it is `active` and not due.
    ///
    /// `provider_id`, `sandbox_spec` and `run_resolved_spec_hash` are fixed at creation and
    /// not written. With `RunEffect::Fail` the run ends, which makes the record due again:
    /// the returned record is the one stored.
    pub async fn save_resource(
        &self,
        run_id: &RunId,
        fencing_token: i64,
        record: &ExecutionResourceRecord,
        effect: RunEffect,
    ) -> StoreResult<ExecutionResourceRecord> {
        self.save_checked(run_id, fencing_token, record, effect, false)
            .await
    }

    /// `save_resource` of the holder's last write, with no run effect: when the save lands,
    /// the lease is handed back in the same transaction, as `release_lease` would (the record
    /// keeps the `due_at` just written). When it fails, the lease is still held.
    pub async fn save_resource_and_release_lease(
        &self,
        run_id: &RunId,
        fencing_token: i64,
        record: &ExecutionResourceRecord,
    ) -> StoreResult<ExecutionResourceRecord> {
        self.save_checked(run_id, fencing_token, record, RunEffect::None, true)
            .await
    }

    async fn save_checked(
        &self,
        run_id: &RunId,
        fencing_token: i64,
        record: &ExecutionResourceRecord,
        effect: RunEffect,
        hand_back: bool,
    ) -> StoreResult<ExecutionResourceRecord> {
        check_record(run_id, record)?;
        self.save_record(SaveItem {
            run_id: run_id.clone(),
            fencing_token,
            record: record.clone(),
            effect,
            hand_back,
        })
        .await
    }

    /// Hands back a lifecycle lease if its fencing token still holds it (no-op otherwise).
    /// A record that no save has touched since the claim deferred it is due again at once,
    /// so another worker need not wait for the lease to expire.
    pub async fn release_lease(&self, run_id: &RunId, lease: &Lease) -> StoreResult<()> {
        self.hand_back_lease(HandBack {
            run_id: run_id.clone(),
            fencing_token: lease.fencing_token,
            deferred_until: lease.expires_at,
            saved: false,
        })
        .await
    }

    /// `NotFound("execution_resource")` when the run has no record.
    pub async fn get_resource(&self, run_id: &RunId) -> StoreResult<ExecutionResourceRecord> {
        let mut conn = self.inner.read.acquire().await?;
        self.load_resource(&mut conn, run_id.as_str(), false)
            .await?
            .ok_or(StoreError::NotFound("execution_resource"))
    }
}

/// The first write of a leased run's holder, decided from what the claim gathered.
pub type Intent<'a> =
    dyn FnMut(&LifecycleWork, DateTime<Utc>) -> Option<ExecutionResourceRecord> + Send + 'a;

fn check_record(run_id: &RunId, record: &ExecutionResourceRecord) -> StoreResult<()> {
    if &record.run_id != run_id {
        return Err(ValidationError::new("run_id", "the record belongs to another run").into());
    }
    if record.generation < 0 {
        return Err(ValidationError::new("generation", "must not be negative").into());
    }
    if record.retry_count < 0 {
        return Err(ValidationError::new("retry_count", "must not be negative").into());
    }
    Ok(())
}

impl Store {
    /// Writes the intents `intent` gives for freshly leased `work`, and puts each stored
    /// record in its work. One that fails its checks leaves its work as it was claimed.
    async fn write_intents(
        &self,
        tx: &mut WriteTx,
        work: &mut [LifecycleWork],
        intent: &mut Intent<'_>,
    ) -> StoreResult<()> {
        let mut items = Vec::new();
        let mut fences = HashMap::new();
        // The claim read these records locked: their heads are known.
        let mut heads = HashMap::new();
        for (i, w) in work.iter().enumerate() {
            let Some(mut record) = intent(w, tx.now) else {
                continue;
            };
            record.due_at = record.due_at.map(|at| at.max(w.lease.expires_at));
            let lease = LeaseState {
                lease_id: Some(w.lease.lease_id.as_str().to_owned()),
                fencing_token: Some(w.lease.fencing_token),
                expires_at: Some(w.lease.expires_at),
            };
            let has_parent = w.run.parent_run_id.is_some();
            fences.insert(w.run.id.as_str().to_owned(), RunFence { lease, has_parent });
            let head = RecordHead {
                state: w.record.state,
                version: w.record.version,
            };
            heads.insert(w.run.id.as_str().to_owned(), head);
            let item = SaveItem {
                run_id: w.run.id.clone(),
                fencing_token: w.lease.fencing_token,
                record,
                effect: RunEffect::None,
                hand_back: false,
            };
            items.push((i, item));
        }
        if items.is_empty() {
            return Ok(());
        }
        let (at, items): (Vec<usize>, Vec<SaveItem>) = items.into_iter().unzip();
        // Leased to this claim's holders: nobody else may take them, so no work to announce.
        let announced = tx.announces_work();
        let saved = self
            .save_batch_in(tx, &items.iter().collect::<Vec<_>>(), &fences, Some(&heads))
            .await?;
        tx.set_work(announced);
        for (i, result) in at.into_iter().zip(saved) {
            if let Ok(record) = result {
                work[i].record = record;
            }
        }
        Ok(())
    }

    /// Leases due records' runs and gathers what the coordinator plans from; returns the
    /// take-over count.
    async fn grant_lifecycle_leases(
        &self,
        tx: &mut WriteTx,
        holder: &str,
        max: u32,
        ttl: Duration,
    ) -> StoreResult<(Vec<LifecycleWork>, u64)> {
        let now = tx.now;
        let expires_at = lease_expiry(now, ttl)?;
        let leased = self
            .lease_due_runs(
                tx.conn(),
                DueRuns::Lifecycle,
                None,
                holder,
                max,
                now,
                expires_at,
            )
            .await?;
        // The records are read, and locked, before what they depend on: a hook committing
        // later bumps a record's version, so a plan made from stale jobs or children cannot be
        // saved.
        let ids: Vec<&str> = leased.iter().map(|l| l.run_id.as_str()).collect();
        let mut records = self.load_resources(tx.conn(), &ids, true).await?;
        let mut due = Vec::with_capacity(leased.len());
        for l in &leased {
            match records.remove(&l.run_id) {
                Some(record) if record.due_at.is_some_and(|at| at <= now) => due.push((l, record)),
                // PostgreSQL re-checks only the locked run row: a record settled meanwhile.
                _ => self.drop_lease(tx, &l.run_id).await?,
            }
        }
        let ids: Vec<&str> = due.iter().map(|(l, _)| l.run_id.as_str()).collect();
        self.defer_resources(tx, &ids, expires_at).await?;
        let mut runs = self.load_runs(tx.conn(), &ids, false).await?;
        let mut jobs = self.jobs_of_runs(tx.conn(), &ids).await?;
        let mut descendants = self.descendants_of_runs(tx.conn(), &ids).await?;
        let mut suspensions = self.latest_suspensions(tx.conn(), &ids).await?;
        let mut work = Vec::with_capacity(due.len());
        let mut takeovers = 0;
        for (l, record) in due {
            let Some(rec) = runs.remove(&l.run_id) else {
                return Err(StoreError::Database(sqlx::Error::RowNotFound));
            };
            if l.had_lease {
                takeovers += 1;
                tx.event(
                    &l.session_id,
                    "lease.taken_over",
                    json!({ "run_id": l.run_id, "state": rec.run.state, "worker_id": holder }),
                );
            }
            work.push(LifecycleWork {
                lease: Lease {
                    lease_id: LeaseId::from_trusted(l.lease_id.clone()),
                    fencing_token: l.fencing_token,
                    expires_at,
                },
                record,
                jobs: jobs.remove(&l.run_id).unwrap_or_default(),
                descendants: descendants.remove(&l.run_id).unwrap_or_default(),
                suspension: suspensions.remove(&l.run_id),
                run: rec.run,
                tenant_id: rec.tenant_id,
            });
        }
        Ok((work, takeovers))
    }
}
