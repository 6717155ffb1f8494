//! The API's grouped writes other than replies (session and run creations, suspensions),
//! written in one transaction per group: each checked on its own and answered on its own;
//! if the group fails as a whole, each is written again alone.

use std::sync::atomic::Ordering;

use tokio::sync::oneshot;

use super::error::StoreError;
use super::handle::{Store, StoreResult};
use crate::domain::run::Run;
use crate::domain::session::Session;
use crate::metrics::Metrics;
use crate::store::runs::create_batch::RunItem;
use crate::store::runs::suspend_batch::SuspendItem;
use crate::store::sessions::create_batch::SessionItem;

type Reply<T> = oneshot::Sender<StoreResult<T>>;

/// The requests of one group, each with where its answer goes.
#[derive(Default)]
pub(in crate::store) struct Requests {
    pub sessions: Vec<(SessionItem, Reply<Session>)>,
    pub runs: Vec<(RunItem, Reply<Run>)>,
    pub suspends: Vec<(SuspendItem, Reply<Run>)>,
}

type Answers = (
    Vec<StoreResult<Session>>,
    Vec<StoreResult<Run>>,
    Vec<StoreResult<Run>>,
);

impl Requests {
    pub fn len(&self) -> usize {
        self.sessions.len() + self.runs.len() + self.suspends.len()
    }
}

fn send_all<T>(replies: Vec<Reply<T>>, answers: Vec<StoreResult<T>>) {
    for (reply, answer) in replies.into_iter().zip(answers) {
        let _ = reply.send(answer);
    }
}

impl Store {
    pub(in crate::store) async fn write_requests(&self, group: Requests) {
        let count = group.len();
        if count == 0 {
            return;
        }
        let (sessions, session_replies): (Vec<_>, Vec<_>) = group.sessions.into_iter().unzip();
        let (runs, run_replies): (Vec<_>, Vec<_>) = group.runs.into_iter().unzip();
        let (suspends, suspend_replies): (Vec<_>, Vec<_>) = group.suspends.into_iter().unzip();
        let refs = (
            sessions.iter().collect::<Vec<_>>(),
            runs.iter().collect::<Vec<_>>(),
            suspends.iter().collect::<Vec<_>>(),
        );
        match self.requests_in_one(&refs.0, &refs.1, &refs.2).await {
            Ok((s, r, p)) => {
                let metrics = self.metrics();
                metrics.group_commits.fetch_add(1, Ordering::Relaxed);
                metrics
                    .grouped_writes
                    .fetch_add(count as u64, Ordering::Relaxed);
                send_all(session_replies, s);
                send_all(run_replies, r);
                send_all(suspend_replies, p);
                return;
            }
            Err(e) if count == 1 => {
                if let Some(r) = session_replies.into_iter().next() {
                    let _ = r.send(Err(e));
                } else if let Some(r) = run_replies.into_iter().next() {
                    let _ = r.send(Err(e));
                } else if let Some(r) = suspend_replies.into_iter().next() {
                    let _ = r.send(Err(e));
                }
                return;
            }
            Err(e) => {
                Metrics::inc(&self.metrics().group_fallbacks);
                tracing::warn!(error = %e, "a grouped write failed: writing each alone");
            }
        }
        // Alone, until the database itself is unavailable: then every write left gets that
        // answer at once.
        let mut down: Option<String> = None;
        for (item, reply) in sessions.iter().zip(session_replies) {
            let one = [item];
            let alone = alone_answer(&mut down, self.requests_in_one(&one, &[], &[]), |a| a.0);
            let _ = reply.send(alone.await);
        }
        for (item, reply) in runs.iter().zip(run_replies) {
            let one = [item];
            let alone = alone_answer(&mut down, self.requests_in_one(&[], &one, &[]), |a| a.1);
            let _ = reply.send(alone.await);
        }
        for (item, reply) in suspends.iter().zip(suspend_replies) {
            let one = [item];
            let alone = alone_answer(&mut down, self.requests_in_one(&[], &[], &one), |a| a.2);
            let _ = reply.send(alone.await);
        }
    }

    /// Every request of the group in one transaction: each one's answer, in order.
    async fn requests_in_one(
        &self,
        sessions: &[&SessionItem],
        runs: &[&RunItem],
        suspends: &[&SuspendItem],
    ) -> StoreResult<Answers> {
        let mut tx = self.group_tx().await?;
        let result = async {
            // Runs are locked before anything else is written, like every other writer.
            let suspended = if suspends.is_empty() {
                Vec::new()
            } else {
                self.suspend_runs_in(&mut tx, suspends).await?
            };
            let created_sessions = if sessions.is_empty() {
                Vec::new()
            } else {
                self.create_sessions_in(&mut tx, sessions).await?
            };
            let created_runs = if runs.is_empty() {
                Vec::new()
            } else {
                self.create_runs_in(&mut tx, runs).await?
            };
            Ok((created_sessions, created_runs, suspended))
        }
        .await;
        tx.finish(self, result).await
    }
}

/// One write's answer from its own transaction, unless the database was already found
/// unavailable; remembers if it is now.
async fn alone_answer<T>(
    down: &mut Option<String>,
    write: impl std::future::Future<Output = StoreResult<Answers>>,
    pick: fn(Answers) -> Vec<StoreResult<T>>,
) -> StoreResult<T> {
    if let Some(why) = down {
        return Err(StoreError::Unavailable(why.clone()));
    }
    match write.await {
        Ok(answers) => pick(answers).pop().unwrap_or_else(|| Err(abandoned())),
        Err(e) => {
            if let StoreError::Unavailable(why) = &e {
                *down = Some(why.clone());
            }
            Err(e)
        }
    }
}

fn abandoned() -> StoreError {
    StoreError::Unavailable("the grouped write was abandoned".into())
}
