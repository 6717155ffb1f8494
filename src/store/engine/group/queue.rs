//! The group commit's queue: the writes waiting for a group, at most one per key in a group,
//! and the permits of the groups written at once. It knows no kind of write and no store:
//! `H` is what a group is written with (`Store`).

use std::any::Any;
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Semaphore;

use crate::store::engine::error::StoreResult;

/// The most writes one group carries.
const MAX_GROUP: usize = 64;

pub(in crate::store) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a group is written with, and the transaction its writes share.
pub(in crate::store) trait Host: Sync + 'static {
    type Tx: Send;
}

/// The writes of one kind in a group, with the callers waiting for their answers.
pub(in crate::store) trait Batch<H: Host>: Send {
    fn as_any(&mut self) -> &mut dyn Any;

    fn len(&self) -> usize;

    /// Batches of a group are written in this order, lowest first.
    fn order(&self) -> u8;

    /// Batches with the same number share one transaction of the group.
    fn transaction(&self) -> u8;

    /// Writes the batch in the group's transaction; the answers wait for the commit.
    fn write_in<'a>(&'a mut self, host: &'a H, tx: &'a mut H::Tx)
        -> BoxFuture<'a, StoreResult<()>>;

    /// The group committed: each write that has its answer gets it.
    fn deliver(&mut self);

    /// The group failed with `error` and this batch holds its only write: that is its answer.
    fn fail_only(&mut self, error: crate::store::engine::error::StoreError);

    /// Writes each write still without an answer in a transaction of its own, unless the
    /// database is already known to be down (`down`).
    fn write_rest_alone<'a>(
        &'a mut self,
        host: &'a H,
        down: &'a mut Option<String>,
    ) -> BoxFuture<'a, ()>;
}

/// A write waiting for a group.
pub(in crate::store) trait Waiting<H: Host>: Send {
    /// At most one write per key in a group.
    fn group_key(&self) -> &str;

    /// Its caller stopped waiting (its work was dropped): it is not written.
    fn caller_gone(&self) -> bool;

    /// Adds this write to the batch of its kind among `batches`, or to a new one.
    fn join(self: Box<Self>, batches: &mut Vec<Box<dyn Batch<H>>>);
}

pub(in crate::store) struct GroupCommit<H: Host> {
    queue: Mutex<Vec<Box<dyn Waiting<H>>>>,
    /// One permit per group that may be written at once, held until the group is written.
    pub leaders: Arc<Semaphore>,
}

impl<H: Host> GroupCommit<H> {
    /// `writers` groups may be in flight at once: 1 where the database has one writer.
    pub fn with_writers(writers: usize) -> Self {
        Self {
            queue: Mutex::new(Vec::new()),
            leaders: Arc::new(Semaphore::new(writers.max(1))),
        }
    }

    pub fn push(&self, waiting: Box<dyn Waiting<H>>) {
        self.lock().push(waiting);
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Box<dyn Waiting<H>>>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The oldest queued writes, at most one per key (a later write to the same run waits
    /// for the next group, so it sees the earlier one).
    pub fn take(&self) -> Vec<Box<dyn Waiting<H>>> {
        let mut queue = self.lock();
        let mut seen = HashSet::new();
        let mut group = Vec::new();
        let mut rest = Vec::new();
        for w in queue.drain(..) {
            if w.caller_gone() {
                continue;
            }
            if group.len() < MAX_GROUP && seen.insert(w.group_key().to_owned()) {
                group.push(w);
            } else {
                rest.push(w);
            }
        }
        *queue = rest;
        group
    }
}
