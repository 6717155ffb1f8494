//! Runs created in groups: each checked on its own (its session, its provider, its parent),
//! all inserted with one statement per table.

use std::collections::{HashMap, HashSet};

use serde_json::json;

use crate::clock::to_millis;
use crate::domain::commands::CreateRun;
use crate::domain::decide::create;
use crate::domain::run::Run;
use crate::domain::{RunId, SessionId};
use crate::store::admin::idempotency::IdempotencyClaim;
use crate::store::engine::group::{Answers, GroupedWrite};
use crate::store::engine::params::{bind_ids, params};
use crate::store::engine::rows::{self, RUN_RETURNING};
use crate::store::engine::tx::WriteTx;
use crate::store::engine::visible::sees;
use crate::store::engine::{Store, StoreError, StoreResult};
use crate::store::sessions::create_batch::{owners_of, CREATED};

/// One queued run creation, with the id it will get.
#[derive(Debug)]
pub(in crate::store) struct RunItem {
    pub id: RunId,
    pub tenant: String,
    pub session_id: SessionId,
    pub cmd: CreateRun,
    /// The `Idempotency-Key` the request runs under, if any.
    pub key: Option<IdempotencyClaim>,
}

/// Columns bound per inserted run, and per inserted execution-resource record.
const RUN_PARAMS: usize = 6;
const RESOURCE_PARAMS: usize = 4;

fn sorted<'a>(ids: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut ids: Vec<&str> = ids.collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

impl GroupedWrite for RunItem {
    type Answer = Run;
    const ORDER: u8 = 2;
    const TRANSACTION: u8 = 0;

    fn key(&self) -> &str {
        self.id.as_str()
    }

    async fn write_batch<'a>(
        store: &'a Store,
        tx: &'a mut WriteTx,
        items: &'a [&'a Self],
    ) -> StoreResult<Answers<Run>> {
        let answers = store.create_runs_in(tx, items).await?;
        Ok(answers.into_iter().map(Some).collect())
    }
}

impl Store {
    /// The runs of `items` in `tx`: each one's answer, in order.
    pub(in crate::store) async fn create_runs_in(
        &self,
        tx: &mut WriteTx,
        items: &[&RunItem],
    ) -> StoreResult<Vec<StoreResult<Run>>> {
        let sessions = owners_of(tx, &sorted(items.iter().map(|i| i.session_id.as_str()))).await?;
        let providers = self.registered_providers(tx, items).await?;
        let parent_ids = sorted(
            items
                .iter()
                .filter_map(|i| i.cmd.parent_run_id.as_ref().map(RunId::as_str)),
        );
        let parents = self.load_runs(tx.conn(), &parent_ids, false).await?;

        let mut answers: Vec<Option<StoreResult<Run>>> = Vec::with_capacity(items.len());
        let mut creating = Vec::new();
        for (index, item) in items.iter().enumerate() {
            let session = sessions
                .get(item.session_id.as_str())
                .filter(|found| sees(Some(&item.tenant), &found.tenant));
            let found = create::FoundForRun {
                session_seen: session.is_some(),
                provider_registered: item
                    .cmd
                    .sandbox_spec
                    .as_ref()
                    .is_none_or(|s| providers.contains(s.provider_id.as_str())),
                parent: item
                    .cmd
                    .parent_run_id
                    .as_ref()
                    .and_then(|p| parents.get(p.as_str()))
                    .filter(|rec| sees(Some(&item.tenant), &rec.tenant_id))
                    .map(|rec| &rec.run),
                parent_session: session.and_then(|s| s.parent.as_ref()),
            };
            let refusal = create::run(found, &item.session_id, &item.cmd).err();
            match refusal {
                Some(e) => answers.push(Some(Err(e.into()))),
                None => {
                    answers.push(None);
                    creating.push(index);
                }
            }
        }
        if !creating.is_empty() {
            // The ancestors' records are bumped, so locked, before the children exist: a claim
            // holding one has read its descendants without them, and its release goes on.
            let parents = sorted(
                creating
                    .iter()
                    .map(|&i| &items[i].cmd)
                    .filter(|cmd| cmd.sandbox_spec.is_some())
                    .filter_map(|cmd| cmd.parent_run_id.as_ref().map(RunId::as_str)),
            );
            let above = self.ancestors_of_runs(tx.conn(), &parents).await?;
            let ancestors = sorted(
                parents
                    .iter()
                    .copied()
                    .chain(above.iter().map(|(_, id)| id.as_str())),
            );
            self.descendant_created(tx, &ancestors).await?;
            let mut runs = self.insert_runs(tx, items, &creating).await?;
            self.insert_resources(tx, items, &creating).await?;
            for &index in &creating {
                let item = items[index];
                let run = runs
                    .remove(item.id.as_str())
                    .ok_or(StoreError::NotFound("run"))?;
                let session = item.session_id.as_str();
                tx.visible(session);
                tx.event(
                    session,
                    "run.created",
                    json!({ "run_id": run.id, "parent_run_id": run.parent_run_id }),
                );
                answers[index] = Some(Ok(run));
            }
            tx.runtime_work();
            let keyed: Vec<(&IdempotencyClaim, &Run)> = creating
                .iter()
                .filter_map(|&i| match (&items[i].key, &answers[i]) {
                    (Some(key), Some(Ok(run))) => Some((key, run)),
                    _ => None,
                })
                .collect();
            self.idempotency_answer_in(tx, CREATED, &keyed).await?;
        }
        Ok(answers
            .into_iter()
            .map(|a| a.unwrap_or(Err(StoreError::NotFound("run"))))
            .collect())
    }

    /// The providers among those the items' specs name that are registered.
    async fn registered_providers(
        &self,
        tx: &mut WriteTx,
        items: &[&RunItem],
    ) -> StoreResult<HashSet<String>> {
        let ids = sorted(
            items
                .iter()
                .filter_map(|i| i.cmd.sandbox_spec.as_ref().map(|s| s.provider_id.as_str())),
        );
        if ids.is_empty() {
            return Ok(HashSet::new());
        }
        let sql = format!(
            "SELECT provider_id FROM providers WHERE provider_id IN ({})",
            params(1, ids.len())
        );
        let found = bind_ids(sqlx::query(&sql), &ids)
            .fetch_all(tx.conn())
            .await?;
        found.iter().map(|r| rows::text(r, "provider_id")).collect()
    }

    /// Inserts the `queued` runs of `items` at `creating`; the runs as written, by id.
    async fn insert_runs(
        &self,
        tx: &mut WriteTx,
        items: &[&RunItem],
        creating: &[usize],
    ) -> StoreResult<HashMap<String, Run>> {
        let sql = format!(
            "INSERT INTO runs (id, session_id, parent_run_id, state, resolved_spec_hash, \
             sandbox_spec, input, revision, created_at, updated_at) VALUES {} RETURNING \
             {RUN_RETURNING}",
            (0..creating.len())
                .map(|r| {
                    let first = 2 + r * RUN_PARAMS;
                    format!(
                        "(${first}, ${}, ${}, 'queued', ${}, ${}, ${}, 1, $1, $1)",
                        first + 1,
                        first + 2,
                        first + 3,
                        first + 4,
                        first + 5
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut insert = sqlx::query(&sql).bind(to_millis(tx.now));
        for &index in creating {
            let item = items[index];
            let spec = match &item.cmd.sandbox_spec {
                Some(spec) => Some(rows::to_json(spec)?),
                None => None,
            };
            insert = insert
                .bind(item.id.as_str())
                .bind(item.session_id.as_str())
                .bind(item.cmd.parent_run_id.as_ref().map(RunId::as_str))
                .bind(item.cmd.resolved_spec_hash.as_str())
                .bind(spec)
                .bind(rows::to_json(&item.cmd.input)?);
        }
        let mut written = HashMap::new();
        for row in insert.fetch_all(tx.conn()).await? {
            let run = rows::run(&row)?;
            written.insert(run.id.as_str().to_owned(), run);
        }
        Ok(written)
    }

    /// The execution-resource record of every created run that has a sandbox spec:
    /// `provisioning`, generation 0, due now, version 1.
    async fn insert_resources(
        &self,
        tx: &mut WriteTx,
        items: &[&RunItem],
        creating: &[usize],
    ) -> StoreResult<()> {
        let with_spec: Vec<&RunItem> = creating
            .iter()
            .map(|&i| items[i])
            .filter(|i| i.cmd.sandbox_spec.is_some())
            .collect();
        if with_spec.is_empty() {
            return Ok(());
        }
        let sql = format!(
            "INSERT INTO execution_resources (run_id, generation, provider_id, sandbox_ref, \
             sandbox_spec, run_resolved_spec_hash, state, checkpoint_lost, blocking_job_ids, \
             blocking_child_run_ids, compute_released, retry_count, due_at, version, \
             state_since, created_at, updated_at) VALUES {}",
            (0..with_spec.len())
                .map(|r| {
                    let first = 2 + r * RESOURCE_PARAMS;
                    format!(
                        "(${first}, 0, ${}, NULL, ${}, ${}, 'provisioning', 0, '[]', '[]', 0, \
                         0, $1, 1, $1, $1, $1)",
                        first + 1,
                        first + 2,
                        first + 3
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut insert = sqlx::query(&sql).bind(to_millis(tx.now));
        for item in with_spec {
            if let Some(spec) = &item.cmd.sandbox_spec {
                insert = insert
                    .bind(item.id.as_str())
                    .bind(spec.provider_id.as_str())
                    .bind(rows::to_json(spec)?)
                    .bind(item.cmd.resolved_spec_hash.as_str());
            }
        }
        insert.execute(tx.conn()).await?;
        tx.work();
        Ok(())
    }
}
