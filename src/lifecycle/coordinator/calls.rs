//! The provider calls: requests built from the record, with the request context every call
//! carries (actor, trace id, deadline, the lease's fencing token).

use chrono::{DateTime, Utc};
use std::time::Duration;

use super::{Coordinator, Work};
use crate::domain::resource::ReleasePurpose;
use crate::domain::sandbox::ReleaseDisposition;
use crate::lifecycle::clients::reached_provider;
use crate::lifecycle::outcome::{self, BindKind, FailureClass};
use crate::providers::client::{CallOptions, ProviderCallError, ProviderClient};
use crate::providers::codes;
use crate::providers::wire::{
    AttachRequest, ProvisionRequest, ReleaseRequest, ReleaseSpec, RequestContext, RestoreRequest,
    SandboxHandle, SandboxReleaseReceipt, SandboxState,
};

/// The `status` label of a provider call.
pub(super) fn call_status<T>(result: &Result<T, ProviderCallError>) -> String {
    match result {
        Ok(_) => "ok".into(),
        Err(
            ProviderCallError::Recoverable { status, .. }
            | ProviderCallError::Terminal { status, .. }
            | ProviderCallError::Refused { status, .. },
        ) => status.to_string(),
        Err(ProviderCallError::Uncertain { .. }) => "uncertain".into(),
        Err(ProviderCallError::InProgress { .. }) => "in_progress".into(),
        Err(ProviderCallError::Unreachable(_)) => "unreachable".into(),
        Err(ProviderCallError::Config(_)) => "error".into(),
    }
}

impl Coordinator {
    pub(super) fn release_request(&self, w: &Work, now: DateTime<Utc>) -> Option<ReleaseRequest> {
        let record = &w.record;
        let purpose = record.release_purpose.unwrap_or(ReleasePurpose::Suspend);
        let reason = match (purpose, record.suspension_reason) {
            (ReleasePurpose::Suspend, Some(r)) => r.as_str().to_string(),
            (p, _) => p.as_str().to_string(),
        };
        Some(ReleaseRequest {
            request: ReleaseSpec {
                r#ref: record.sandbox_ref.clone()?.into(),
                disposition: record.disposition?.into(),
                reason,
                expected_revision: None,
                idempotency_key: record.release_idempotency_key.clone()?,
            },
            context: self.context(w, now, self.timeouts.release),
        })
    }

    pub(super) async fn call_bind(
        &self,
        client: &ProviderClient,
        w: &Work,
        kind: BindKind,
        now: DateTime<Utc>,
    ) -> Result<SandboxHandle, ProviderCallError> {
        let record = &w.record;
        let opts = self.call_options(w);
        let key = || {
            record
                .bind_idempotency_key
                .clone()
                .unwrap_or_else(|| outcome::bind_idempotency_key(record, kind))
        };
        match kind {
            BindKind::Provision => {
                let req = ProvisionRequest {
                    spec: record.sandbox_spec.clone().into(),
                    owner_run_id: w.run.id.to_string(),
                    tenant_id: w.tenant_id.clone(),
                    idempotency_key: key(),
                    context: self.context(w, now, self.timeouts.provision),
                };
                client.provision(&req, &opts).await
            }
            BindKind::Restore => {
                let checkpoint = record.sandbox_checkpoint.clone().ok_or_else(|| {
                    ProviderCallError::Config("the record holds no checkpoint".into())
                })?;
                let req = RestoreRequest {
                    checkpoint: checkpoint.into(),
                    spec: record.sandbox_spec.clone().into(),
                    owner_run_id: w.run.id.to_string(),
                    idempotency_key: key(),
                    context: self.context(w, now, self.timeouts.restore),
                };
                client.restore(&req, &opts).await
            }
            BindKind::Attach => {
                let sandbox_id = record
                    .sandbox_ref
                    .as_ref()
                    .map(|r| r.sandbox_id.clone())
                    .ok_or_else(|| {
                        ProviderCallError::Config("the record names no sandbox".into())
                    })?;
                let req = AttachRequest {
                    context: self.context(w, now, self.timeouts.attach),
                };
                client.attach(&sandbox_id, &req, &opts).await
            }
        }
    }

    pub(super) fn context(
        &self,
        w: &Work,
        now: DateTime<Utc>,
        timeout: Duration,
    ) -> RequestContext {
        RequestContext {
            actor: self.actor.clone(),
            trace_id: Some(w.trace_id.clone()),
            deadline: chrono::Duration::from_std(timeout)
                .ok()
                .and_then(|d| now.checked_add_signed(d)),
            fencing_token: Some(w.token),
        }
    }

    pub(super) fn call_options(&self, w: &Work) -> CallOptions {
        CallOptions {
            request_id: Some(format!("{}-{}", w.trace_id, w.step)),
            timeout: None,
        }
    }

    pub(super) async fn client(
        &self,
        provider_id: &str,
    ) -> Result<ProviderClient, ProviderCallError> {
        self.clients.get(provider_id).await
    }

    /// Notes whether `result` came from the provider: when it answers again after a call
    /// that got no answer, the runs waiting on it are due now.
    pub(super) async fn noted<T>(&self, provider_id: &str, result: &Result<T, ProviderCallError>) {
        if self
            .clients
            .note_answer(provider_id, reached_provider(result))
        {
            self.provider_back(provider_id).await;
        }
    }

    async fn provider_back(&self, provider_id: &str) {
        match self.store.wake_waiting_on(provider_id).await {
            Ok(woken) => {
                tracing::info!(
                    provider_id,
                    woken,
                    "the provider answers again: the runs waiting on it are due now"
                );
            }
            Err(e) => {
                tracing::warn!(provider_id, error = %e, "waking the provider's resuming runs failed")
            }
        }
    }

    /// Asks the providers that did not answer their last call whether they answer again,
    /// and wakes the resuming runs of those that do; returns how many answered.
    pub async fn probe_providers(&self) -> usize {
        let opts = CallOptions::default();
        let back = self.clients.probe_unanswered(&opts).await;
        for provider_id in &back {
            self.provider_back(provider_id).await;
        }
        back.len()
    }

    pub(super) fn forget_client_on(&self, provider_id: &str, e: &ProviderCallError) {
        self.clients.forget_on(provider_id, e);
    }

    /// A release the provider did not confirm (a terminate without `compute_released`; any
    /// release refused, e.g. `sandbox.not_found` for a sandbox already gone, or called broken)
    /// is checked by inspecting the sandbox: the evidence when the provider reports it
    /// terminated or answers `sandbox.not_found` in a v3 error body, and only from a provider
    /// that answered its capabilities as plugin API v3. Anything else (an ingress's 404 page)
    /// is no evidence.
    pub(super) async fn release_evidence(
        &self,
        w: &Work,
        result: &Result<SandboxReleaseReceipt, ProviderCallError>,
    ) -> Option<String> {
        // A detach is settled by an inspect only when the provider refused it or called the
        // sandbox broken: its sandbox is meant to keep running.
        let unconfirmed = match result {
            Ok(receipt) => {
                w.record.disposition != Some(ReleaseDisposition::Detach)
                    && !receipt.compute_released
            }
            Err(e) => matches!(
                outcome::classify(e),
                FailureClass::Refused | FailureClass::Final
            ),
        };
        if !unconfirmed {
            return None;
        }
        // A snapshot's retry refused for another reason says nothing of an earlier attempt,
        // which may have taken the snapshot before it terminated: only the key's receipt can.
        let terminated_settles = w.record.disposition
            != Some(ReleaseDisposition::SnapshotAndTerminate)
            || match result {
                Err(ProviderCallError::Refused { error, .. }) => {
                    error.code == codes::SANDBOX_TERMINATED
                }
                _ => true,
            };
        let sandbox_id = &w.record.sandbox_ref.as_ref()?.sandbox_id;
        let what = w.record.disposition.map_or("release", |d| d.as_str());
        let client = self.client(&w.record.provider_id).await.ok()?;
        let opts = self.call_options(w);
        let evidence = match client.inspect(sandbox_id, &opts).await {
            Ok(info) if info.state == SandboxState::Terminated && terminated_settles => format!(
                "the {what} was not confirmed; inspect reports sandbox `{sandbox_id}` terminated"
            ),
            Err(ProviderCallError::Refused { error, .. })
                if codes::is_sandbox_not_found(&error) =>
            {
                format!(
                    "the {what} was not confirmed; the provider knows no sandbox `{sandbox_id}` \
                     (`{}`)",
                    error.code
                )
            }
            _ => return None,
        };
        if !client.speaks_v3(&opts).await {
            tracing::warn!(%evidence, "not taken as evidence: the provider did not answer its capabilities as plugin API v3");
            return None;
        }
        Some(evidence)
    }

    /// Whether the provider reports the record's sandbox ready now (the only evidence on
    /// which a failed release may be dropped and the sandbox attached), or not running or
    /// unknown to it; an error when it could not be asked.
    pub(super) async fn sandbox_ready(&self, w: &Work) -> Result<bool, ProviderCallError> {
        let Some(sandbox) = w.record.sandbox_ref.as_ref() else {
            return Ok(false);
        };
        let client = self.client(&w.record.provider_id).await?;
        let opts = self.call_options(w);
        let ready = match client.inspect(&sandbox.sandbox_id, &opts).await {
            Ok(info) => info.state == SandboxState::Ready,
            Err(ProviderCallError::Refused { error, .. })
                if codes::is_sandbox_not_found(&error) =>
            {
                false
            }
            Err(e) => return Err(e),
        };
        if !client.speaks_v3(&opts).await {
            return Err(ProviderCallError::Unreachable(
                "the provider did not answer its capabilities as plugin API v3".into(),
            ));
        }
        Ok(ready)
    }
}
