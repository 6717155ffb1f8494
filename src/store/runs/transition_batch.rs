//! Cancels, resumes and the runtime's resume confirmations, written in groups: one
//! transaction for the group, each write behind its own savepoint, so a refusal undoes only
//! its own rows. A write the database itself refuses is retried alone after the group.

use crate::domain::commands::ConfirmResumed;
use crate::domain::interaction::Resolver;
use crate::domain::run::Run;
use crate::domain::{RunId, SessionId};
use crate::store::engine::group::{Answers, GroupedWrite};
use crate::store::engine::tx::WriteTx;
use crate::store::engine::{Store, StoreError, StoreResult};

/// What a transition answers: the run, or the message of a confirmation that failed the run
/// because its policy is stale (committed, then reported).
pub(in crate::store) type Transitioned = Result<Run, String>;

#[derive(Debug)]
pub(in crate::store) enum Transition {
    Cancel {
        session_id: SessionId,
        by: Resolver,
    },
    Resume {
        session_id: SessionId,
        resolved_by: String,
    },
    Resumed(ConfirmResumed),
}

/// One queued transition of a run.
#[derive(Debug)]
pub(in crate::store) struct TransitionItem {
    pub tenant: Option<String>,
    pub run_id: RunId,
    pub kind: Transition,
}

/// The database refused the write itself (not its checks): it may succeed alone.
fn refused_by_database(e: &StoreError) -> bool {
    matches!(e, StoreError::Database(_) | StoreError::Unavailable(_))
}

impl GroupedWrite for TransitionItem {
    type Answer = Transitioned;
    const ORDER: u8 = 3;
    const TRANSACTION: u8 = 1;

    fn key(&self) -> &str {
        self.run_id.as_str()
    }

    /// Each behind its own savepoint unless it is all the transaction carries (then its
    /// refusal is the transaction's); one the database refused is answered `None`, to be
    /// written again alone.
    async fn write_batch<'a>(
        store: &'a Store,
        tx: &'a mut WriteTx,
        items: &'a [&'a Self],
    ) -> StoreResult<Answers<Transitioned>> {
        if let [item] = items {
            if tx.holds_one_write() {
                return Ok(vec![Some(Ok(store.transition_in(tx, item).await?))]);
            }
        }
        // Runs are locked in id order, like every other writer.
        let mut order: Vec<usize> = (0..items.len()).collect();
        order.sort_by(|&a, &b| items[a].run_id.as_str().cmp(items[b].run_id.as_str()));
        let mut answers: Answers<Transitioned> = (0..items.len()).map(|_| None).collect();
        for i in order {
            let staged = tx.savepoint().await?;
            match store.transition_in(tx, items[i]).await {
                Ok(done) => {
                    tx.keep(staged).await?;
                    answers[i] = Some(Ok(done));
                }
                Err(e) => {
                    tx.discard(staged).await?;
                    answers[i] = (!refused_by_database(&e)).then_some(Err(e));
                }
            }
        }
        Ok(answers)
    }
}

impl Store {
    /// A cancel, resume or resume confirmation through the group commit. A confirmation that
    /// failed the run because its policy is stale is committed, then reported as `PolicyStale`.
    pub(in crate::store) async fn write_transition(
        &self,
        item: TransitionItem,
    ) -> StoreResult<Run> {
        self.grouped(item).await?.map_err(StoreError::PolicyStale)
    }

    async fn transition_in(
        &self,
        tx: &mut WriteTx,
        item: &TransitionItem,
    ) -> StoreResult<Transitioned> {
        let tenant = item.tenant.as_deref();
        match &item.kind {
            Transition::Cancel { session_id, by } => self
                .cancel_in(tx, tenant, session_id, &item.run_id, by)
                .await
                .map(Ok),
            Transition::Resume {
                session_id,
                resolved_by,
            } => self
                .resume_in(tx, tenant, session_id, &item.run_id, resolved_by)
                .await
                .map(Ok),
            Transition::Resumed(cmd) => {
                self.confirm_resumed_in(tx, tenant, &item.run_id, cmd).await
            }
        }
    }
}
