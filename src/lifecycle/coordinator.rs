//! The lifecycle coordinator: executes `plan()` for one leased run, writing each intent
//! before the provider call and each outcome after it, fenced by the run's lease.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tracing::Instrument;

mod calls;
mod intent;
mod labels;
mod rebase;
mod resume;
mod stages;
use calls::call_status;
use labels::{action_name, failure_label};

use super::attention::{self, AttentionPolicy};
use super::clients::ProviderClients;
use super::outcome::{self, BindKind, Next};
use super::plan::{self, plan, Action, PlanInput};
use crate::domain::interaction::{Suspension, SuspensionReason};
use crate::domain::job::Job;
use crate::domain::resource::ExecutionResourceRecord;
use crate::domain::resource::{LifecycleWork, ReleasePurpose, RunEffect};
use crate::domain::resource::{ResourceState, ResourceTransitionError};
use crate::domain::run::{Run, RunState};
use crate::domain::sandbox::ReleaseDisposition;
use crate::domain::{RunId, SuspensionId};
use crate::providers::client::{ProviderCallError, Timeouts};
use crate::store::{Store, StoreError};

/// Steps one `process` call may take (e.g. finish a release, then restore, then settle).
pub const MAX_STEPS: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Transition(#[from] ResourceTransitionError),
}

/// How a `process` call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Processed {
    /// Nothing more is due now (the record may be due later, for a retry).
    Settled,
    /// The run was failed; its lease went with it.
    RunFailed,
    /// Another holder owns the run (lease lost or a concurrent write): stopped at once.
    Superseded,
    /// A wake-up landed while the provider was answering: the answer was kept and the record
    /// left due at once, for the next claim to plan from the fresh run.
    Rebased,
    /// The step budget ran out; the record is still due and will be picked up again.
    StepLimit,
}

pub struct Coordinator {
    store: Store,
    actor: String,
    timeouts: Timeouts,
    clients: Arc<ProviderClients>,
    attention: AttentionPolicy,
}

/// What a step decided.
enum Step {
    Continue,
    Stop(Processed),
}

/// The run being worked on, as this holder knows it.
struct Work {
    run: Run,
    tenant_id: String,
    token: i64,
    record: ExecutionResourceRecord,
    jobs: Vec<Job>,
    descendants: Vec<(RunId, ResourceState)>,
    suspension: Option<Suspension>,
    trace_id: String,
    /// When this holder's claim handed it the run (a resume's stages start here).
    claimed: std::time::Instant,
    claimed_at: DateTime<Utc>,
    step: usize,
    /// The lease went back with the last save.
    handed_back: bool,
}

impl Work {
    fn plan(&self, record: &ExecutionResourceRecord, run_state: RunState) -> Action {
        plan(&PlanInput {
            run_state,
            record,
            jobs: &self.jobs,
            descendants: &self.descendants,
            suspension_reason: self.suspension.as_ref().map(|s| s.reason),
        })
    }

    fn suspension(&self) -> Option<(&SuspensionId, SuspensionReason)> {
        self.suspension.as_ref().map(|s| (&s.id, s.reason))
    }
}

fn jitter() -> f64 {
    rand::random::<f64>() * 2.0 - 1.0
}

fn waiting_for_retry(record: &ExecutionResourceRecord, now: DateTime<Utc>) -> bool {
    record.next_retry_at.is_some_and(|t| t > now)
}

impl Coordinator {
    /// `actor` names this replica in provider request contexts.
    pub fn new(store: Store, actor: impl Into<String>) -> Self {
        let clients = Arc::new(ProviderClients::new(store.clone()));
        Self::with_clients(store, actor, clients)
    }

    /// Shares provider clients with other users of the registry (e.g. claims).
    pub fn with_clients(
        store: Store,
        actor: impl Into<String>,
        clients: Arc<ProviderClients>,
    ) -> Self {
        Self {
            store,
            actor: actor.into(),
            timeouts: clients.timeouts().clone(),
            clients,
            attention: AttentionPolicy::default(),
        }
    }

    /// When a failing release needs an operator, and how often it is retried then.
    pub fn with_attention(mut self, attention: AttentionPolicy) -> Self {
        self.attention = attention;
        self
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    fn now(&self) -> DateTime<Utc> {
        self.store.now()
    }

    /// Works on a leased run until nothing is due now, then hands the lease back.
    pub async fn process(&self, work: LifecycleWork) -> Result<Processed, CoordinatorError> {
        let LifecycleWork {
            run,
            tenant_id,
            lease,
            record,
            jobs,
            descendants,
            suspension,
        } = work;
        let mut w = Work {
            run,
            tenant_id,
            token: lease.fencing_token,
            record,
            jobs,
            descendants,
            suspension,
            trace_id: uuid::Uuid::now_v7().simple().to_string(),
            claimed: std::time::Instant::now(),
            claimed_at: self.now(),
            step: 0,
            handed_back: false,
        };
        let result = self.steps(&mut w).await;
        if !w.handed_back {
            if let Err(e) = self.store.release_lease(&w.run.id, &lease).await {
                tracing::warn!(run_id = %w.run.id, error = %e, "could not hand the lease back");
            }
        }
        match result {
            Err(CoordinatorError::Store(StoreError::LeaseLost)) => Ok(Processed::Superseded),
            Err(CoordinatorError::Store(StoreError::VersionConflict { .. })) => {
                Ok(Processed::Superseded)
            }
            other => other,
        }
    }

    async fn steps(&self, w: &mut Work) -> Result<Processed, CoordinatorError> {
        while w.step < MAX_STEPS {
            w.step += 1;
            let action = w.plan(&w.record, w.run.state);
            let span = tracing::info_span!(
                "lifecycle_step",
                run_id = %w.run.id,
                generation = w.record.generation,
                provider_id = %w.record.provider_id,
                state = %w.record.state,
                action = action_name(&action),
                trace_id = %w.trace_id,
            );
            let step = match self.step(w, action).instrument(span).await {
                Err(CoordinatorError::Transition(e)) => {
                    self.park_on_invalid_transition(w, e).await?
                }
                other => other?,
            };
            if let Step::Stop(done) = step {
                return Ok(done);
            }
        }
        Ok(Processed::StepLimit)
    }

    async fn step(&self, w: &mut Work, action: Action) -> Result<Step, CoordinatorError> {
        let now = self.now();
        match action {
            Action::Idle => {
                if w.record.due_at.is_some() {
                    self.save(w, w.record.clone(), RunEffect::None, Last::Yes)
                        .await?;
                }
                Ok(Step::Stop(Processed::Settled))
            }
            Action::Abandon => {
                let record = outcome::abandon(w.record.clone())?;
                self.commit(w, Next::plain(record)).await
            }
            Action::Block {
                disposition,
                blockers,
            } => {
                let record =
                    outcome::block(w.record.clone(), disposition, &blockers, w.suspension())?;
                self.commit(w, Next::plain(record)).await
            }
            Action::FailSnapshotLost => {
                let next = outcome::snapshot_lost(w.record.clone());
                self.commit(w, next).await
            }
            Action::AbandonRelease => self.abandon_release(w, now).await,
            Action::Release {
                disposition,
                purpose,
            } => self.release(w, disposition, purpose, now).await,
            Action::Provision { .. } => self.bind(w, BindKind::Provision, now).await,
            Action::Restore => self.bind(w, BindKind::Restore, now).await,
            Action::Attach => self.bind(w, BindKind::Attach, now).await,
        }
    }

    /// Waits for a retry that is not due yet: the record becomes due when it is.
    async fn defer(&self, w: &mut Work) -> Result<Step, CoordinatorError> {
        if w.record.due_at != w.record.next_retry_at {
            self.save(w, w.record.clone(), RunEffect::None, Last::Yes)
                .await?;
        }
        Ok(Step::Stop(Processed::Settled))
    }

    async fn release(
        &self,
        w: &mut Work,
        disposition: ReleaseDisposition,
        purpose: ReleasePurpose,
        now: DateTime<Utc>,
    ) -> Result<Step, CoordinatorError> {
        if let Some(intent) = intent::release(&w.record, disposition, purpose, w.suspension(), now)
        {
            self.save(w, intent?, RunEffect::None, Last::No).await?;
        } else if w.held(now) {
            return self.defer(w).await;
        }
        let result = match self.release_request(w, now) {
            Some(req) => match self.client(&w.record.provider_id).await {
                Ok(client) => client.release(&req, &self.call_options(w)).await,
                Err(e) => Err(e),
            },
            None => Err(ProviderCallError::Config(
                "the record names no sandbox to release".into(),
            )),
        };
        self.noted(&w.record.provider_id, &result).await;
        let now = self.now();
        let counters = &self.store.metrics().lifecycle;
        counters.provider_call("release", &call_status(&result));
        let asked = w.record.disposition.unwrap_or(disposition);
        let evidence = self.release_evidence(w, &result).await;
        let record = match &result {
            _ if evidence.is_some() => {
                let evidence = evidence.as_deref().unwrap_or_default();
                tracing::info!(%evidence, "release settled by inspect");
                let receipt = result.as_ref().ok();
                let record = outcome::with_terminal_word(w.record.clone(), &result);
                outcome::release_confirmed_by_inspect(record, evidence, receipt, now)?
            }
            Ok(receipt) => {
                tracing::info!(duplicate = receipt.duplicate, "release answered");
                if receipt.duplicate {
                    counters.release_duplicate(asked.as_str());
                }
                outcome::release_answered(w.record.clone(), receipt, now, jitter(), w.cadence())?
            }
            Err(e @ ProviderCallError::InProgress { .. }) => {
                tracing::info!(error = %e, "release still in progress");
                outcome::release_failed(w.record.clone(), e, now, jitter(), w.cadence())?
            }
            Err(e) => {
                tracing::warn!(error = %e, "release failed");
                counters.release_failure(failure_label(e));
                self.forget_client_on(&w.record.provider_id, e);
                outcome::release_failed(w.record.clone(), e, now, jitter(), w.cadence())?
            }
        };
        let entered = w.record.state != ResourceState::NeedsAttention;
        let record = attention::escalate(record, self.attention, now, jitter(), w.cadence())?;
        if entered && record.state == ResourceState::NeedsAttention {
            tracing::error!(
                attempts = record.retry_count,
                "the release cannot be confirmed: it needs an operator"
            );
            counters.attention_entered(asked.as_str());
        }
        let outcome = match record.state {
            _ if outcome::in_progress(&record) => "in_progress",
            ResourceState::Released if evidence.is_some() => "released_on_inspect",
            ResourceState::Released => "released",
            ResourceState::ReleaseFailed | ResourceState::NeedsAttention => {
                counters.retry("release");
                match &result {
                    Err(e) if failure_label(e) == "refused" => "refused",
                    _ => "failed",
                }
            }
            _ => "forced_terminate",
        };
        counters.release(asked.as_str(), outcome);
        self.commit_answer(w, Next::plain(record)).await
    }

    async fn bind(
        &self,
        w: &mut Work,
        kind: BindKind,
        now: DateTime<Utc>,
    ) -> Result<Step, CoordinatorError> {
        if w.held(now) {
            return self.defer(w).await;
        }
        if let Some(intent) = intent::bind(&w.record, kind) {
            self.save(w, intent?, RunEffect::None, Last::No).await?;
        }
        let sent = std::time::Instant::now();
        let result = match self.client(&w.record.provider_id).await {
            Ok(client) => self.call_bind(&client, w, kind, now).await,
            Err(e) => Err(e),
        };
        let answered = std::time::Instant::now();
        self.noted(&w.record.provider_id, &result).await;
        let now = self.now();
        let counters = &self.store.metrics().lifecycle;
        counters.provider_call(kind.as_str(), &call_status(&result));
        let next = match &result {
            Ok(handle) => match outcome::handle_mismatch(&w.record, &w.tenant_id, handle) {
                None => {
                    tracing::info!(sandbox_id = %handle.r#ref.sandbox_id, "sandbox ready");
                    Next::plain(outcome::bind_succeeded(w.record.clone(), kind, handle)?)
                }
                Some(why) => {
                    tracing::error!(sandbox_id = %handle.r#ref.sandbox_id, %why, "handle refused");
                    counters.handle_mismatch(kind.as_str());
                    outcome::bind_mismatched(w.record.clone(), &w.tenant_id, kind, handle, why)?
                }
            },
            Err(e) => {
                tracing::warn!(error = %e, "{} failed", kind.as_str());
                self.forget_client_on(&w.record.provider_id, e);
                let cadence = w.cadence();
                let mut next =
                    outcome::bind_failed(w.record.clone(), kind, e, now, jitter(), cadence)?;
                if next.effect == RunEffect::None {
                    if !outcome::in_progress(&next.record) {
                        counters.retry(kind.as_str());
                    }
                    let before = attention::bind_needs_attention(&w.record);
                    next.record =
                        attention::escalate_bind(next.record, kind, self.attention, now, cadence);
                    if !before && attention::bind_needs_attention(&next.record) {
                        tracing::error!(
                            attempts = next.record.retry_count,
                            "the {} keeps failing while a human waits: it needs an operator",
                            kind.as_str()
                        );
                        counters.attention_entered(kind.as_str());
                    }
                }
                next
            }
        };
        let timed = self.note_bind_answered(w, kind, &next, sent, answered);
        let step = self.commit_answer(w, next).await;
        if timed {
            self.note_bind_saved(w, step.is_ok());
        }
        step
    }

    /// Writes an outcome, deciding first whether the record is due again now: level-triggered,
    /// so a crash right after this write leaves the next step to whoever claims the run.
    async fn commit(&self, w: &mut Work, next: Next) -> Result<Step, CoordinatorError> {
        let Next { record, effect } = next;
        let fails = matches!(effect, RunEffect::Fail { .. }) && !w.run.state.is_terminal();
        let now = self.now();
        self.save(w, record, effect, Last::Unless(now)).await?;
        if fails {
            w.run.state = RunState::Failed;
            return Ok(Step::Stop(Processed::RunFailed));
        }
        match w.record.due_at {
            Some(t) if t <= now => Ok(Step::Continue),
            _ => Ok(Step::Stop(Processed::Settled)),
        }
    }

    /// Every record write goes through here, and asks the plan when the record is due next.
    /// The last write of this work, one with no run effect, hands the lease back with it.
    async fn save(
        &self,
        w: &mut Work,
        mut record: ExecutionResourceRecord,
        effect: RunEffect,
        last: Last,
    ) -> Result<(), CoordinatorError> {
        let fails = matches!(effect, RunEffect::Fail { .. }) && !w.run.state.is_terminal();
        let run_state = if fails { RunState::Failed } else { w.run.state };
        // Due "now" means by the time `commit` decides whether to go on.
        let now = match last {
            Last::Unless(now) => now,
            Last::Yes | Last::No => self.now(),
        };
        record.due_at = plan::due_at(&record, &w.plan(&record, run_state), now);
        let last = effect == RunEffect::None
            && match last {
                Last::Yes => true,
                Last::No => false,
                Last::Unless(now) => record.due_at.is_none_or(|t| t > now),
            };
        let saved = if last {
            let saved = self
                .store
                .save_resource_and_release_lease(&w.run.id, w.token, &record)
                .await?;
            w.handed_back = true;
            saved
        } else {
            self.store
                .save_resource(&w.run.id, w.token, &record, effect)
                .await?
        };
        if saved.state != w.record.state {
            tracing::info!(from = %w.record.state, to = %saved.state, "execution resource moved");
        }
        w.record = saved;
        Ok(())
    }

    /// A plan the state machine refuses is a bug, not a reason to spin: keep the record and
    /// look again later.
    async fn park_on_invalid_transition(
        &self,
        w: &mut Work,
        e: ResourceTransitionError,
    ) -> Result<Step, CoordinatorError> {
        tracing::error!(error = %e, "the plan asked for a transition the state machine refuses");
        let mut record = w.record.clone();
        record.next_retry_at = Some(self.now() + chrono::Duration::seconds(60));
        record.error = Some(crate::domain::sandbox::ProviderError {
            code: "resource.invalid_transition".into(),
            category: "internal".into(),
            message: e.to_string(),
            retryable: true,
        });
        self.save(w, record, RunEffect::None, Last::Yes).await?;
        Ok(Step::Stop(Processed::Settled))
    }
}

/// Whether a save is the last write of the work on a run.
#[derive(Debug, Clone, Copy)]
enum Last {
    Yes,
    No,
    /// Unless the record is due again by `now` (then the work goes on).
    Unless(DateTime<Utc>),
}
