//! Group commit for the coordinator's writes and the API's. Writes that arrive while
//! another group is being written wait and are written together in the next one: a
//! few transactions, and a fixed number of statements, for many runs. Each write
//! keeps its own checks and fence and gets its own answer; if a transaction of a group fails, each
//! of its writes is retried alone, so one bad write never fails the others.
//!
//! A kind of grouped write is a type that implements `GroupedWrite` (one file per kind) and a
//! `Store` method that hands it to `Store::grouped`. Nothing here knows the kinds.

pub(in crate::store) mod queue;

use std::any::Any;
use std::future::Future;
use std::sync::atomic::Ordering;

use tokio::sync::oneshot;

use self::queue::{Batch, BoxFuture, Host, Waiting};
use super::error::{StoreError, StoreResult};
use super::handle::Store;
use super::tx::WriteTx;
use crate::metrics::Metrics;

/// Each write's answer, in order, or `None` for one to be written again alone after the group.
pub(in crate::store) type Answers<A> = Vec<Option<StoreResult<A>>>;

type Reply<T> = oneshot::Sender<StoreResult<T>>;

/// A kind of write that groups of writes carry.
pub(in crate::store) trait GroupedWrite: Send + Sync + Sized + 'static {
    type Answer: Send + 'static;

    /// Where this kind's writes come in a group, lowest first.
    const ORDER: u8;

    /// Kinds with the same number share one transaction of the group (each transaction locks
    /// its runs in id order); the others get their own, so one kind's failure leaves them
    /// grouped.
    const TRANSACTION: u8;

    /// At most one write per key in a group: a run, an interaction, a new session.
    fn key(&self) -> &str;

    /// Writes `items` in `tx`, each checked on its own. An error is the transaction's: the
    /// group is then written again one write at a time. `tx.holds_one_write()` when `items`
    /// is all the transaction carries.
    fn write_batch<'a>(
        store: &'a Store,
        tx: &'a mut WriteTx,
        items: &'a [&'a Self],
    ) -> impl Future<Output = StoreResult<Answers<Self::Answer>>> + Send + 'a;
}

impl Host for Store {
    type Tx = WriteTx;
}

/// One queued write and where its answer goes.
struct Entry<W: GroupedWrite> {
    item: W,
    reply: Reply<W::Answer>,
}

impl<W: GroupedWrite> Waiting<Store> for Entry<W> {
    fn group_key(&self) -> &str {
        self.item.key()
    }

    fn caller_gone(&self) -> bool {
        self.reply.is_closed()
    }

    fn join(self: Box<Self>, batches: &mut Vec<Box<dyn Batch<Store>>>) {
        let Entry { item, reply } = *self;
        for batch in batches.iter_mut() {
            if let Some(same) = batch.as_any().downcast_mut::<KindBatch<W>>() {
                same.items.push(item);
                same.replies.push(Some(reply));
                return;
            }
        }
        batches.push(Box::new(KindBatch {
            items: vec![item],
            replies: vec![Some(reply)],
            answers: Vec::new(),
        }));
    }
}

/// The writes of kind `W` in a group; a reply is taken once its answer is sent.
struct KindBatch<W: GroupedWrite> {
    items: Vec<W>,
    replies: Vec<Option<Reply<W::Answer>>>,
    answers: Answers<W::Answer>,
}

impl<W: GroupedWrite> Batch<Store> for KindBatch<W> {
    fn as_any(&mut self) -> &mut dyn Any {
        self
    }

    fn len(&self) -> usize {
        self.items.len()
    }

    fn order(&self) -> u8 {
        W::ORDER
    }

    fn transaction(&self) -> u8 {
        W::TRANSACTION
    }

    fn write_in<'a>(
        &'a mut self,
        store: &'a Store,
        tx: &'a mut WriteTx,
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let items: Vec<&W> = self.items.iter().collect();
            self.answers = W::write_batch(store, tx, &items).await?;
            Ok(())
        })
    }

    fn deliver(&mut self) {
        // A write without an answer keeps its reply: it is written alone after the group.
        for (reply, answer) in self.replies.iter_mut().zip(self.answers.drain(..)) {
            if let Some(answer) = answer {
                send_to(reply, answer);
            }
        }
    }

    fn fail_only(&mut self, error: StoreError) {
        if let Some(reply) = self.replies.first_mut() {
            send_to(reply, Err(error));
        }
    }

    fn write_rest_alone<'a>(
        &'a mut self,
        store: &'a Store,
        down: &'a mut Option<String>,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            for (item, reply) in self.items.iter().zip(self.replies.iter_mut()) {
                if reply.is_none() {
                    continue;
                }
                let alone = store.write_one(store.group_tx(), item);
                send_to(reply, unless_down(down, alone).await);
            }
        })
    }
}

/// Runs `write` unless the database was already found unavailable; remembers if it is now.
async fn unless_down<T>(
    down: &mut Option<String>,
    write: impl Future<Output = StoreResult<T>>,
) -> StoreResult<T> {
    if let Some(why) = down {
        return Err(StoreError::Unavailable(why.clone()));
    }
    let result = write.await;
    if let Err(StoreError::Unavailable(why)) = &result {
        *down = Some(why.clone());
    }
    result
}

/// Sends `answer` where `reply` points, once.
fn send_to<T>(reply: &mut Option<Reply<T>>, answer: StoreResult<T>) {
    if let Some(reply) = reply.take() {
        let _ = reply.send(answer);
    }
}

fn abandoned() -> StoreError {
    StoreError::Unavailable("the grouped write was abandoned".into())
}

impl Store {
    /// Queues `item` for the next group and waits for its answer.
    pub(in crate::store) async fn grouped<W: GroupedWrite>(
        &self,
        item: W,
    ) -> StoreResult<W::Answer> {
        let (reply, answer) = oneshot::channel();
        self.inner.group.push(Box::new(Entry { item, reply }));
        self.await_group(answer).await
    }

    /// Writes `item` in a transaction of its own, outside any group.
    pub(in crate::store) async fn write_alone<W: GroupedWrite>(
        &self,
        item: &W,
    ) -> StoreResult<W::Answer> {
        self.write_one(self.write_tx(), item).await
    }

    /// `item` alone in the transaction `begin` opens.
    async fn write_one<W: GroupedWrite>(
        &self,
        begin: impl Future<Output = StoreResult<WriteTx>>,
        item: &W,
    ) -> StoreResult<W::Answer> {
        let mut tx = begin.await?;
        tx.set_writes(1);
        let result = W::write_batch(self, &mut tx, &[item]).await;
        let mut answers = tx.finish(self, result).await?;
        answers.pop().flatten().unwrap_or_else(|| Err(abandoned()))
    }

    /// Waits for the answer, writing groups (this one's included) whenever a writer is free.
    async fn await_group<T>(
        &self,
        mut answer: oneshot::Receiver<StoreResult<T>>,
    ) -> StoreResult<T> {
        loop {
            let leader = tokio::select! {
                biased;
                done = &mut answer => return done.unwrap_or_else(|_| Err(abandoned())),
                leader = self.inner.group.leaders.clone().acquire_owned() => {
                    leader.map_err(|_| abandoned())?
                }
            };
            if let Ok(done) = answer.try_recv() {
                return done;
            }
            let group = self.inner.group.take();
            if group.is_empty() {
                // Ours is in a group whose leader went away; that group still completes.
                drop(leader);
                return answer.await.unwrap_or_else(|_| Err(abandoned()));
            }
            // Written on its own task, which keeps the permit: a caller that gives up can
            // neither abandon the others nor let a second group start beside this one.
            let store = self.clone();
            let written = tokio::spawn(async move {
                store.write_group(group).await;
                drop(leader);
            })
            .await;
            if let Err(e) = written {
                tracing::error!(error = %e, "a grouped write ended abnormally");
            }
        }
    }

    /// The group's kinds in their order, those that share a transaction together; then,
    /// alone, the writes left without an answer, or every write of a transaction that failed.
    async fn write_group(&self, group: Vec<Box<dyn Waiting<Store>>>) {
        let mut batches: Vec<Box<dyn Batch<Store>>> = Vec::new();
        for waiting in group {
            waiting.join(&mut batches);
        }
        batches.sort_by_key(|b| (b.transaction(), b.order()));
        let mut rest = batches.as_mut_slice();
        while let Some(first) = rest.first() {
            let transaction = first.transaction();
            let shared = rest
                .iter()
                .take_while(|b| b.transaction() == transaction)
                .count();
            let (these, after) = rest.split_at_mut(shared);
            self.write_shared(these).await;
            rest = after;
        }
    }

    async fn write_shared(&self, batches: &mut [Box<dyn Batch<Store>>]) {
        let writes: usize = batches.iter().map(|b| b.len()).sum();
        match self.write_batches(batches, writes).await {
            Ok(()) => {
                let metrics = self.metrics();
                metrics.group_commits.fetch_add(1, Ordering::Relaxed);
                metrics
                    .grouped_writes
                    .fetch_add(writes as u64, Ordering::Relaxed);
                for batch in batches.iter_mut() {
                    batch.deliver();
                }
            }
            Err(e) if writes == 1 => {
                if let Some(batch) = batches.first_mut() {
                    batch.fail_only(e);
                }
            }
            Err(e) => {
                Metrics::inc(&self.metrics().group_fallbacks);
                tracing::warn!(error = %e, "a grouped write failed: writing each alone");
            }
        }
        // Alone, until the database itself is unavailable: then every write left gets that
        // answer at once instead of waiting out its own timeout.
        let mut down = None;
        for batch in batches.iter_mut() {
            batch.write_rest_alone(self, &mut down).await;
        }
    }

    async fn write_batches(
        &self,
        batches: &mut [Box<dyn Batch<Store>>],
        writes: usize,
    ) -> StoreResult<()> {
        let mut tx = self.group_tx().await?;
        tx.set_writes(writes);
        let result = async {
            for batch in batches.iter_mut() {
                batch.write_in(self, &mut tx).await?;
            }
            Ok(())
        }
        .await;
        tx.finish(self, result).await
    }
}
