//! Cancels, resumes and the runtime's resume confirmations, written in groups: one
//! transaction for the group, each write behind its own savepoint, so a refusal undoes only
//! its own rows. A write the database itself refuses is retried alone after the group.

use tokio::sync::oneshot;

use crate::domain::commands::ConfirmResumed;
use crate::domain::run::Run;
use crate::domain::{RunId, SessionId};
use crate::store::engine::group::Answered;
use crate::store::engine::{Store, StoreError, StoreResult};

/// What a transition answers: the run, or the message of a confirmation that failed the run
/// because its policy is stale (committed, then reported).
pub(in crate::store) type Transitioned = Result<Run, String>;

type Reply = oneshot::Sender<StoreResult<Transitioned>>;

#[derive(Debug)]
pub(in crate::store) enum Transition {
    Cancel {
        session_id: SessionId,
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

impl Answered for TransitionItem {
    type Answer = Transitioned;

    fn write_in_one<'a>(
        store: &'a Store,
        items: &'a [&'a Self],
    ) -> impl std::future::Future<Output = StoreResult<Vec<Option<StoreResult<Transitioned>>>>> + Send + 'a
    {
        store.transitions_in_one(items)
    }
}

impl Store {
    pub(in crate::store) async fn write_transitions(
        &self,
        mut group: Vec<(TransitionItem, Reply)>,
    ) {
        if group.is_empty() {
            return;
        }
        // Runs are locked in id order, like every other writer.
        group.sort_by(|a, b| a.0.run_id.as_str().cmp(b.0.run_id.as_str()));
        let (items, replies): (Vec<_>, Vec<_>) = group.into_iter().unzip();
        let refs: Vec<&TransitionItem> = items.iter().collect();
        self.write_answered(&refs, replies).await;
    }

    /// The transitions in one transaction: each one's answer, in order, or `None` for one the
    /// database refused, which is to be written again alone.
    async fn transitions_in_one(
        &self,
        items: &[&TransitionItem],
    ) -> StoreResult<Vec<Option<StoreResult<Transitioned>>>> {
        let mut tx = self.group_tx().await?;
        let result = async {
            if let [item] = items {
                // Alone: its refusal is the transaction's.
                return Ok(vec![Some(Ok(self.transition_in(&mut tx, item).await?))]);
            }
            let mut answers = Vec::with_capacity(items.len());
            for item in items {
                let staged = tx.savepoint().await?;
                match self.transition_in(&mut tx, item).await {
                    Ok(done) => {
                        tx.keep(staged).await?;
                        answers.push(Some(Ok(done)));
                    }
                    Err(e) => {
                        tx.discard(staged).await?;
                        answers.push((!refused_by_database(&e)).then_some(Err(e)));
                    }
                }
            }
            Ok(answers)
        }
        .await;
        tx.finish(self, result).await
    }

    async fn transition_in(
        &self,
        tx: &mut crate::store::engine::tx::WriteTx,
        item: &TransitionItem,
    ) -> StoreResult<Transitioned> {
        let tenant = item.tenant.as_deref();
        match &item.kind {
            Transition::Cancel { session_id } => self
                .cancel_in(tx, tenant, session_id, &item.run_id)
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
