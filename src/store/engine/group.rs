//! Group commit for the coordinator's writes and the API's. Writes that arrive while
//! another group is being written wait and are written together in the next one: a
//! transaction, and a fixed number of statements, for many runs. Each write keeps its own
//! checks and fence and gets its own answer; if a group fails as a whole, each of its writes
//! is retried alone, so one bad write never fails the others.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::error::StoreError;
use super::handle::{Backend, Store, StoreResult};
use super::records::ReplyOutcome;
use super::request_batch::Requests;
use super::tx::WriteTx;
use crate::domain::resource::ExecutionResourceRecord;
use crate::domain::resource::RunEffect;
use crate::domain::run::Run;
use crate::domain::session::Session;
use crate::metrics::Metrics;
use crate::store::interactions::reply_batch::ReplyItem;
use crate::store::resources::writes::{HandBack, SaveItem};
use crate::store::runs::create_batch::RunItem;
use crate::store::runs::suspend_batch::SuspendItem;
use crate::store::runs::transition_batch::{TransitionItem, Transitioned};
use crate::store::sessions::create_batch::SessionItem;

/// The most writes one group carries.
const MAX_GROUP: usize = 64;

type Reply<T> = oneshot::Sender<StoreResult<T>>;

enum Pending {
    Save(Box<SaveItem>, Reply<ExecutionResourceRecord>),
    HandBack(HandBack, Reply<()>),
    Reply(Box<ReplyItem>, Reply<ReplyOutcome>),
    CreateSession(Box<SessionItem>, Reply<Session>),
    CreateRun(Box<RunItem>, Reply<Run>),
    Suspend(Box<SuspendItem>, Reply<Run>),
    Transition(Box<TransitionItem>, Reply<Transitioned>),
}

impl Pending {
    /// At most one write per key in a group: a run, or the interaction a reply answers.
    fn key(&self) -> &str {
        match self {
            Pending::Save(item, _) => item.run_id.as_str(),
            Pending::HandBack(lease, _) => lease.run_id.as_str(),
            Pending::Reply(item, _) => item.interaction_id.as_str(),
            Pending::CreateSession(item, _) => item.id.as_str(),
            Pending::CreateRun(item, _) => item.id.as_str(),
            Pending::Suspend(item, _) => item.run_id.as_str(),
            Pending::Transition(item, _) => item.run_id.as_str(),
        }
    }

    /// Its caller stopped waiting (its work was dropped): it is not written.
    fn abandoned(&self) -> bool {
        match self {
            Pending::Save(_, reply) => reply.is_closed(),
            Pending::HandBack(_, reply) => reply.is_closed(),
            Pending::Reply(_, reply) => reply.is_closed(),
            Pending::CreateSession(_, reply) => reply.is_closed(),
            Pending::CreateRun(_, reply) => reply.is_closed(),
            Pending::Suspend(_, reply) => reply.is_closed(),
            Pending::Transition(_, reply) => reply.is_closed(),
        }
    }
}

pub(in crate::store) struct GroupCommit {
    queue: Mutex<Vec<Pending>>,
    /// One permit per group that may be written at once, held until the group is written.
    leaders: Arc<tokio::sync::Semaphore>,
}

impl GroupCommit {
    /// `writers` groups may be in flight at once: 1 where the database has one writer.
    pub fn new(writers: usize) -> Self {
        Self {
            queue: Mutex::new(Vec::new()),
            leaders: Arc::new(tokio::sync::Semaphore::new(writers.max(1))),
        }
    }

    fn push(&self, pending: Pending) {
        self.lock().push(pending);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Pending>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The oldest queued writes, at most one per key (a later write to the same run waits
    /// for the next group, so it sees the earlier one).
    fn take(&self) -> Vec<Pending> {
        let mut queue = self.lock();
        let mut seen = HashSet::new();
        let mut group = Vec::new();
        let mut rest = Vec::new();
        for p in queue.drain(..) {
            if p.abandoned() {
                continue;
            }
            if group.len() < MAX_GROUP && seen.insert(p.key().to_owned()) {
                group.push(p);
            } else {
                rest.push(p);
            }
        }
        *queue = rest;
        group
    }
}

/// A kind of write that a group writes in one transaction, each with its own answer.
pub(in crate::store) trait Answered: Sized + Sync {
    type Answer: Send;

    /// `items` in one transaction: each one's answer, in order, or `None` for one to be
    /// written again alone.
    fn write_in_one<'a>(
        store: &'a Store,
        items: &'a [&'a Self],
    ) -> impl std::future::Future<Output = StoreResult<Vec<Option<StoreResult<Self::Answer>>>>> + Send + 'a;
}

impl Answered for ReplyItem {
    type Answer = ReplyOutcome;

    fn write_in_one<'a>(
        store: &'a Store,
        items: &'a [&'a Self],
    ) -> impl std::future::Future<Output = StoreResult<Vec<Option<StoreResult<ReplyOutcome>>>>> + Send + 'a
    {
        store.reply_in_one(items)
    }
}

/// Runs `write` unless the database was already found unavailable; remembers if it is now.
pub(in crate::store) async fn unless_down<T>(
    down: &mut Option<String>,
    write: impl std::future::Future<Output = StoreResult<T>>,
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
    /// Saves a record through the group commit; a save that fails the run is written alone.
    pub(in crate::store) async fn save_grouped(
        &self,
        item: SaveItem,
    ) -> StoreResult<ExecutionResourceRecord> {
        if item.effect != RunEffect::None {
            return self.save_alone(&item).await;
        }
        self.grouped(|reply| Pending::Save(Box::new(item), reply))
            .await
    }

    pub(in crate::store) async fn reply_grouped(
        &self,
        item: ReplyItem,
    ) -> StoreResult<ReplyOutcome> {
        self.grouped(|reply| Pending::Reply(Box::new(item), reply))
            .await
    }

    pub(in crate::store) async fn create_session_grouped(
        &self,
        item: SessionItem,
    ) -> StoreResult<Session> {
        self.grouped(|reply| Pending::CreateSession(Box::new(item), reply))
            .await
    }

    pub(in crate::store) async fn create_run_grouped(&self, item: RunItem) -> StoreResult<Run> {
        self.grouped(|reply| Pending::CreateRun(Box::new(item), reply))
            .await
    }

    pub(in crate::store) async fn suspend_grouped(&self, item: SuspendItem) -> StoreResult<Run> {
        self.grouped(|reply| Pending::Suspend(Box::new(item), reply))
            .await
    }

    /// A cancel, resume or resume confirmation through the group commit. A confirmation that
    /// failed the run because its policy is stale is committed, then reported as `PolicyStale`.
    pub(in crate::store) async fn transition_grouped(
        &self,
        item: TransitionItem,
    ) -> StoreResult<Run> {
        let done: Transitioned = self
            .grouped(|reply| Pending::Transition(Box::new(item), reply))
            .await?;
        done.map_err(StoreError::PolicyStale)
    }

    pub(in crate::store) async fn hand_back_grouped(&self, lease: HandBack) -> StoreResult<()> {
        self.grouped(|reply| Pending::HandBack(lease, reply)).await
    }

    /// Queues one write for the next group and waits for its answer.
    async fn grouped<T>(&self, pending: impl FnOnce(Reply<T>) -> Pending) -> StoreResult<T> {
        let (reply, answer) = oneshot::channel();
        self.inner.group.push(pending(reply));
        self.await_group(answer).await
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

    async fn write_group(&self, group: Vec<Pending>) {
        let (mut saves, mut save_replies) = (Vec::new(), Vec::new());
        let (mut hand_backs, mut hand_back_replies) = (Vec::new(), Vec::new());
        let (mut replies, mut reply_answers) = (Vec::new(), Vec::new());
        let mut requests = Requests::default();
        let mut transitions = Vec::new();
        for p in group {
            match p {
                Pending::Save(item, reply) => {
                    saves.push(*item);
                    save_replies.push(reply);
                }
                Pending::HandBack(lease, reply) => {
                    hand_backs.push(lease);
                    hand_back_replies.push(reply);
                }
                Pending::Reply(item, reply) => {
                    replies.push(*item);
                    reply_answers.push(reply);
                }
                Pending::CreateSession(item, reply) => requests.sessions.push((*item, reply)),
                Pending::CreateRun(item, reply) => requests.runs.push((*item, reply)),
                Pending::Suspend(item, reply) => requests.suspends.push((*item, reply)),
                Pending::Transition(item, reply) => transitions.push((*item, reply)),
            }
        }
        self.write_requests(requests).await;
        self.write_transitions(transitions).await;
        if !replies.is_empty() {
            self.write_replies(&replies, reply_answers).await;
        }
        if saves.is_empty() && hand_backs.is_empty() {
            return;
        }
        if saves.len() + hand_backs.len() > 1 {
            match self.records_in_group(&saves, &hand_backs).await {
                Ok(saved) => {
                    for (reply, result) in save_replies.into_iter().zip(saved) {
                        let _ = reply.send(result);
                    }
                    for reply in hand_back_replies {
                        let _ = reply.send(Ok(()));
                    }
                    return;
                }
                Err(e) => {
                    Metrics::inc(&self.metrics().group_fallbacks);
                    tracing::warn!(error = %e, "a grouped write failed: writing each alone");
                }
            }
        }
        // Alone, until the database itself is unavailable: then every write left gets that
        // answer at once instead of waiting out its own timeout.
        let mut down = None;
        for (item, reply) in saves.iter().zip(save_replies) {
            let _ = reply.send(unless_down(&mut down, self.save_alone(item)).await);
        }
        for (lease, reply) in hand_backs.iter().zip(hand_back_replies) {
            let alone = self.records_in_group(&[], std::slice::from_ref(lease));
            let _ = reply.send(unless_down(&mut down, alone).await.map(|_| ()));
        }
    }

    /// The replies in one transaction; if it fails, each alone. A reply to a run another
    /// reply of the group resolved is written after the group, alone, so it sees that one.
    async fn write_replies(&self, items: &[ReplyItem], answers: Vec<Reply<ReplyOutcome>>) {
        let refs: Vec<&ReplyItem> = items.iter().collect();
        self.write_answered(&refs, answers).await;
    }

    /// Writes `items` in one transaction and sends each the answer it got there. The writes
    /// it left unanswered (`None`), or all of them if it failed, are then written one by one.
    pub(in crate::store) async fn write_answered<I: Answered>(
        &self,
        items: &[&I],
        replies: Vec<Reply<I::Answer>>,
    ) {
        let mut replies: Vec<Option<Reply<I::Answer>>> = replies.into_iter().map(Some).collect();
        match I::write_in_one(self, items).await {
            Ok(answers) => {
                let metrics = self.metrics();
                metrics.group_commits.fetch_add(1, Ordering::Relaxed);
                metrics
                    .grouped_writes
                    .fetch_add(items.len() as u64, Ordering::Relaxed);
                // A write without an answer yet keeps its reply: it is written alone below.
                for (reply, answer) in replies.iter_mut().zip(answers) {
                    if let Some(answer) = answer {
                        send_to(reply, answer);
                    }
                }
            }
            Err(e) if items.len() == 1 => send_to(&mut replies[0], Err(e)),
            Err(e) => {
                Metrics::inc(&self.metrics().group_fallbacks);
                tracing::warn!(error = %e, "a grouped write failed: writing each alone");
            }
        }
        let mut down = None;
        for (item, reply) in items.iter().zip(replies) {
            let Some(reply) = reply else { continue };
            let alone = async {
                let mut answers = I::write_in_one(self, &[*item]).await?;
                answers.pop().flatten().unwrap_or_else(|| Err(abandoned()))
            };
            let _ = reply.send(unless_down(&mut down, alone).await);
        }
    }

    async fn save_alone(&self, item: &SaveItem) -> StoreResult<ExecutionResourceRecord> {
        let tx = self.write_tx().await?;
        let mut saved = self
            .write_in_one(tx, std::slice::from_ref(item), &[])
            .await?;
        saved.pop().unwrap_or_else(|| Err(abandoned()))
    }

    /// Record saves and hand-backs in one transaction on the group commit's connections.
    async fn records_in_group(
        &self,
        saves: &[SaveItem],
        hand_backs: &[HandBack],
    ) -> StoreResult<Vec<StoreResult<ExecutionResourceRecord>>> {
        let tx = self.group_tx().await?;
        self.write_in_one(tx, saves, hand_backs).await
    }

    /// Record saves and hand-backs in `tx`; each save's own answer, in order.
    async fn write_in_one(
        &self,
        mut tx: WriteTx,
        saves: &[SaveItem],
        hand_backs: &[HandBack],
    ) -> StoreResult<Vec<StoreResult<ExecutionResourceRecord>>> {
        let result = async {
            // Every run of the group, saves and hand-backs alike, locked first and in id order.
            let mut ids: Vec<&str> = saves.iter().map(|s| s.run_id.as_str()).collect();
            ids.extend(hand_backs.iter().map(|h| h.run_id.as_str()));
            ids.sort_unstable();
            ids.dedup();
            // SQLite has one writer and no row locks: hand-backs alone need no leases read.
            let fences = if saves.is_empty() && self.backend() == Backend::Sqlite {
                HashMap::new()
            } else {
                self.load_fences(tx.conn(), &ids, true).await?
            };
            let saved = self.save_batch_in(&mut tx, saves, &fences, None).await?;
            self.hand_back_in(&mut tx, hand_backs).await?;
            Ok(saved)
        }
        .await;
        let saved = tx.finish(self, result).await?;
        let metrics = self.metrics();
        metrics.group_commits.fetch_add(1, Ordering::Relaxed);
        let writes = (saves.len() + hand_backs.len()) as u64;
        metrics.grouped_writes.fetch_add(writes, Ordering::Relaxed);
        Ok(saved)
    }
}
