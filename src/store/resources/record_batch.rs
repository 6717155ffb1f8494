//! Record saves and lease hand-backs, written in groups: every run of a group locked first
//! and in id order, each save under its own fence and version check, all records in one
//! statement. A save that fails the run is written alone.

use std::collections::HashMap;
use std::future::Future;

use crate::domain::resource::{ExecutionResourceRecord, RunEffect};
use crate::store::engine::group::{Answers, GroupedWrite};
use crate::store::engine::tx::WriteTx;
use crate::store::engine::{Store, StoreError, StoreResult};
use crate::store::resources::writes::{HandBack, SaveItem};

/// A write of a run's lifecycle side: a record saved, or a lease handed back.
#[derive(Debug)]
pub(in crate::store) enum RecordWrite {
    Save(Box<SaveItem>),
    HandBack(HandBack),
}

impl GroupedWrite for RecordWrite {
    /// The record as stored for a save; nothing for a hand-back.
    type Answer = Option<ExecutionResourceRecord>;
    const ORDER: u8 = 5;
    const TRANSACTION: u8 = 3;

    fn key(&self) -> &str {
        match self {
            RecordWrite::Save(save) => save.run_id.as_str(),
            RecordWrite::HandBack(lease) => lease.run_id.as_str(),
        }
    }

    fn write_batch<'a>(
        store: &'a Store,
        tx: &'a mut WriteTx,
        items: &'a [&'a Self],
    ) -> impl Future<Output = StoreResult<Answers<Self::Answer>>> + Send + 'a {
        store.write_records(tx, items)
    }
}

impl Store {
    /// Saves a record through the group commit; a save that fails the run is written alone.
    pub(in crate::store) async fn save_record(
        &self,
        item: SaveItem,
    ) -> StoreResult<ExecutionResourceRecord> {
        let write = RecordWrite::Save(Box::new(item));
        let saved = match &write {
            RecordWrite::Save(save) if save.effect != RunEffect::None => {
                self.write_alone(&write).await?
            }
            _ => self.grouped(write).await?,
        };
        saved.ok_or(StoreError::NotFound("execution_resource"))
    }

    pub(in crate::store) async fn hand_back_lease(&self, lease: HandBack) -> StoreResult<()> {
        self.grouped(RecordWrite::HandBack(lease)).await?;
        Ok(())
    }

    /// Record saves and hand-backs in `tx`; each one's own answer, in order.
    async fn write_records(
        &self,
        tx: &mut WriteTx,
        items: &[&RecordWrite],
    ) -> StoreResult<Answers<Option<ExecutionResourceRecord>>> {
        let mut saves = Vec::new();
        let mut hand_backs = Vec::new();
        for item in items {
            match item {
                RecordWrite::Save(save) => saves.push(&**save),
                RecordWrite::HandBack(lease) => hand_backs.push(lease.clone()),
            }
        }
        // Every run of the group, saves and hand-backs alike, locked first and in id order.
        let mut ids: Vec<&str> = items.iter().map(|i| i.key()).collect();
        ids.sort_unstable();
        ids.dedup();
        // Without row locks, hand-backs alone need no leases read.
        let fences = if saves.is_empty() && !self.has_row_locks() {
            HashMap::new()
        } else {
            self.load_fences(tx.conn(), &ids, true).await?
        };
        let mut saved = self
            .save_batch_in(tx, &saves, &fences, None)
            .await?
            .into_iter();
        self.hand_back_in(tx, &hand_backs).await?;
        Ok(items
            .iter()
            .map(|item| match item {
                RecordWrite::Save(_) => saved.next().map(|result| result.map(Some)),
                RecordWrite::HandBack(_) => Some(Ok(None)),
            })
            .collect())
    }
}
