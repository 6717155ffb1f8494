//! Rows → domain types: the one place that knows how columns map to fields.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;
use sqlx::Row;

use super::error::StoreError;
use super::error::StoreResult;
use super::records::{
    InteractionRecord, OpenSuspension, ProviderRecord, ResourceEvent, RunRecord, SessionEvent,
};
use crate::clock::from_millis;
use crate::domain::claim::LeaseState;
use crate::domain::interaction::{
    payload_digest, Checkpoint, InteractionRequest, InteractionStatus, OnExpiry, Resolution,
    Suspension,
};
use crate::domain::job::Job;
use crate::domain::resource::ExecutionResourceRecord;
use crate::domain::run::{Run, RunState};
use crate::domain::session::Session;
use crate::domain::snapshot::{PendingInteraction, SnapshotRun, SnapshotSession};
use crate::domain::token::TokenInfo;
use crate::domain::{CheckpointId, InteractionId, JobId, RunId, SessionId, SuspensionId, TokenId};
use sagents_text_enum::EnumParseError;

pub(in crate::store) const SESSION_COLS: &str = "s.id, s.tenant_id, s.title, s.metadata, \
     s.parent_session_id, s.revision, s.created_at, s.updated_at";

/// The same columns unqualified, for `RETURNING`.
pub(in crate::store) const RUN_RETURNING: &str = "id, session_id, parent_run_id, state, \
     resolved_spec_hash, sandbox_spec, input, output, error, revision, created_at, updated_at";

/// A run's columns and its lease columns (`FROM runs r`).
macro_rules! run_lease_cols {
    () => {
        "r.id, r.session_id, r.parent_run_id, r.state, r.resolved_spec_hash, r.sandbox_spec, \
         r.input, r.output, r.error, r.revision, r.created_at, r.updated_at, r.lease_id, \
         r.lease_holder, r.fencing_token, r.lease_expires_at"
    };
}

/// `SELECT` a run with its lease columns and its session's tenant, joined (SQLite).
pub(in crate::store) const RUN_RECORD_JOINED: &str = concat!(
    "SELECT ",
    run_lease_cols!(),
    ", s.tenant_id FROM runs r JOIN sessions s ON s.id = r.session_id"
);

/// The same with the tenant read by the session's key (PostgreSQL): joined, PostgreSQL
/// planned a scan of every session for a few runs.
pub(in crate::store) const RUN_RECORD_BY_KEY: &str = concat!(
    "SELECT ",
    run_lease_cols!(),
    ", (SELECT s.tenant_id FROM sessions s WHERE s.id = r.session_id) AS tenant_id FROM runs r"
);

pub(in crate::store) const INTERACTION_COLS: &str =
    "i.id, i.run_id, i.session_id, i.interaction_type, \
     i.status, i.allowed_decisions, i.payload, i.revision, i.requested_at, i.expires_at, \
     i.on_expiry, i.expiry_decision, i.decision, i.resolution_payload, i.resolution_comment, i.resolved_by, i.resolved_by_name, i.resolved_at";

pub(in crate::store) const CHECKPOINT_COLS: &str = "c.id, c.run_id, c.sequence, c.codec_version, \
     c.state, c.resolved_spec_hash, c.created_at";

pub(in crate::store) const JOB_COLS: &str = "j.id, j.run_id, j.kind, j.payload, j.pause_behavior, \
     j.execution_affinity, j.state, j.created_at, j.updated_at";

pub(in crate::store) const JOB_RETURNING: &str = "id, run_id, kind, payload, pause_behavior, \
     execution_affinity, state, created_at, updated_at";

pub(in crate::store) const TOKEN_COLS: &str =
    "id, role, tenant_id, created_at, revoked_at, expires_at, name";

pub(in crate::store) const PROVIDER_COLS: &str =
    "provider_id, base_url, token, capabilities, created_at, updated_at";

/// Every column of an execution-resource record (unqualified: usable in `RETURNING`).
pub(in crate::store) const RESOURCE_COLS: &str = "run_id, generation, provider_id, \
     provider_generation, sandbox_ref, sandbox_spec, run_resolved_spec_hash, state, disposition, sandbox_checkpoint, \
     checkpoint_lost, suspension_id, suspension_reason, blocking_job_ids, \
     blocking_child_run_ids, release_idempotency_key, release_purpose, release_requested_at, \
     released_at, compute_released, bind_idempotency_key, retry_count, next_retry_at, due_at, \
     error, version, updated_at";

pub(in crate::store) const SUSPENSION_COLS: &str = "id, run_id, reason, status, checkpoint_id, \
     interaction_id, requested_at, resolved_at";

fn corrupt(column: &str, message: impl Into<String>) -> StoreError {
    StoreError::Database(sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: message.into().into(),
    })
}

pub(in crate::store) fn text(row: &AnyRow, col: &str) -> StoreResult<String> {
    Ok(row.try_get::<String, _>(col)?)
}

pub(in crate::store) fn opt_text(row: &AnyRow, col: &str) -> StoreResult<Option<String>> {
    Ok(row.try_get::<Option<String>, _>(col)?)
}

pub(in crate::store) fn int(row: &AnyRow, col: &str) -> StoreResult<i64> {
    Ok(row.try_get::<i64, _>(col)?)
}

pub(in crate::store) fn opt_int(row: &AnyRow, col: &str) -> StoreResult<Option<i64>> {
    Ok(row.try_get::<Option<i64>, _>(col)?)
}

pub(in crate::store) fn time(row: &AnyRow, col: &str) -> StoreResult<DateTime<Utc>> {
    int(row, col).map(from_millis)
}

pub(in crate::store) fn opt_time(row: &AnyRow, col: &str) -> StoreResult<Option<DateTime<Utc>>> {
    Ok(opt_int(row, col)?.map(from_millis))
}

pub(in crate::store) fn json(row: &AnyRow, col: &str) -> StoreResult<serde_json::Value> {
    let raw = text(row, col)?;
    serde_json::from_str(&raw).map_err(|e| corrupt(col, e.to_string()))
}

pub(in crate::store) fn opt_json(
    row: &AnyRow,
    col: &str,
) -> StoreResult<Option<serde_json::Value>> {
    match opt_text(row, col)? {
        Some(raw) => serde_json::from_str(&raw)
            .map(Some)
            .map_err(|e| corrupt(col, e.to_string())),
        None => Ok(None),
    }
}

pub(in crate::store) fn enumeration<T>(row: &AnyRow, col: &str) -> StoreResult<T>
where
    T: FromStr<Err = EnumParseError>,
{
    text(row, col)?
        .parse()
        .map_err(|e: EnumParseError| corrupt(col, e.to_string()))
}

/// A JSON TEXT column decoded into a typed value.
pub(in crate::store) fn typed<T: serde::de::DeserializeOwned>(
    row: &AnyRow,
    col: &str,
) -> StoreResult<T> {
    serde_json::from_value(json(row, col)?).map_err(|e| corrupt(col, e.to_string()))
}

pub(in crate::store) fn opt_typed<T: serde::de::DeserializeOwned>(
    row: &AnyRow,
    col: &str,
) -> StoreResult<Option<T>> {
    opt_json(row, col)?
        .map(|v| serde_json::from_value(v).map_err(|e| corrupt(col, e.to_string())))
        .transpose()
}

pub(in crate::store) fn opt_enumeration<T>(row: &AnyRow, col: &str) -> StoreResult<Option<T>>
where
    T: FromStr<Err = EnumParseError>,
{
    opt_text(row, col)?
        .map(|v| {
            v.parse()
                .map_err(|e: EnumParseError| corrupt(col, e.to_string()))
        })
        .transpose()
}

/// A 0/1 column.
pub(in crate::store) fn flag(row: &AnyRow, col: &str) -> StoreResult<bool> {
    match int(row, col)? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(corrupt(col, format!("{other} is not 0 or 1"))),
    }
}

/// JSON text for a TEXT column.
pub(in crate::store) fn to_json(value: &impl serde::Serialize) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Database(sqlx::Error::Encode(Box::new(e))))
}

pub(in crate::store) fn session(row: &AnyRow) -> StoreResult<Session> {
    Ok(Session {
        id: SessionId::from_trusted(text(row, "id")?),
        tenant_id: text(row, "tenant_id")?,
        title: opt_text(row, "title")?,
        metadata: json(row, "metadata")?,
        parent_session_id: opt_text(row, "parent_session_id")?.map(SessionId::from_trusted),
        revision: int(row, "revision")?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
    })
}

pub(in crate::store) fn snapshot_session(s: Session) -> SnapshotSession {
    SnapshotSession {
        id: s.id,
        title: s.title,
        metadata: s.metadata,
        revision: s.revision,
        created_at: s.created_at,
        updated_at: s.updated_at,
    }
}

pub(in crate::store) fn run(row: &AnyRow) -> StoreResult<Run> {
    Ok(Run {
        id: RunId::from_trusted(text(row, "id")?),
        session_id: SessionId::from_trusted(text(row, "session_id")?),
        parent_run_id: opt_text(row, "parent_run_id")?.map(RunId::from_trusted),
        state: enumeration(row, "state")?,
        resolved_spec_hash: text(row, "resolved_spec_hash")?,
        sandbox_spec: opt_json(row, "sandbox_spec")?,
        input: json(row, "input")?,
        output: opt_json(row, "output")?,
        error: opt_json(row, "error")?,
        revision: int(row, "revision")?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
    })
}

pub(in crate::store) fn run_record(row: &AnyRow) -> StoreResult<RunRecord> {
    Ok(RunRecord {
        run: run(row)?,
        lease: lease_state(row)?,
        tenant_id: text(row, "tenant_id")?,
    })
}

pub(in crate::store) fn lease_state(row: &AnyRow) -> StoreResult<LeaseState> {
    Ok(LeaseState {
        lease_id: opt_text(row, "lease_id")?,
        fencing_token: opt_int(row, "fencing_token")?,
        expires_at: opt_time(row, "lease_expires_at")?,
    })
}

pub(in crate::store) fn snapshot_run(row: &AnyRow) -> StoreResult<SnapshotRun> {
    let state: RunState = enumeration(row, "state")?;
    Ok(SnapshotRun {
        id: RunId::from_trusted(text(row, "id")?),
        parent_run_id: opt_text(row, "parent_run_id")?.map(RunId::from_trusted),
        status: state.status(),
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
    })
}

pub(in crate::store) fn interaction_record(row: &AnyRow) -> StoreResult<InteractionRecord> {
    let status: InteractionStatus = enumeration(row, "status")?;
    let decisions = json(row, "allowed_decisions")?;
    let allowed_decisions: Vec<String> = serde_json::from_value(decisions)
        .map_err(|e| corrupt("allowed_decisions", e.to_string()))?;
    let resolution = match (
        opt_text(row, "decision")?,
        opt_text(row, "resolved_by")?,
        opt_time(row, "resolved_at")?,
    ) {
        (Some(decision), Some(resolved_by), Some(resolved_at)) => Some(Resolution {
            decision,
            payload: opt_json(row, "resolution_payload")?
                .unwrap_or_else(|| serde_json::Value::Object(Default::default())),
            comment: opt_text(row, "resolution_comment")?,
            resolved_by,
            resolved_by_name: opt_text(row, "resolved_by_name")?,
            resolved_at,
        }),
        _ => None,
    };
    let payload = json(row, "payload")?;
    Ok(InteractionRecord {
        interaction: InteractionRequest {
            id: InteractionId::from_trusted(text(row, "id")?),
            run_id: RunId::from_trusted(text(row, "run_id")?),
            interaction_type: enumeration(row, "interaction_type")?,
            status,
            allowed_decisions,
            payload_sha256: payload_digest(&payload),
            payload,
            revision: int(row, "revision")?,
            requested_at: time(row, "requested_at")?,
            expires_at: opt_time(row, "expires_at")?,
            on_expiry: OnExpiry {
                action: enumeration(row, "on_expiry")?,
                decision: opt_text(row, "expiry_decision")?,
            },
            resolution,
        },
        session_id: SessionId::from_trusted(text(row, "session_id")?),
    })
}

pub(in crate::store) fn pending_interaction(row: &AnyRow) -> StoreResult<PendingInteraction> {
    let i = interaction_record(row)?.interaction;
    Ok(PendingInteraction {
        id: i.id,
        run_id: i.run_id,
        interaction_type: i.interaction_type,
        allowed_decisions: i.allowed_decisions,
        payload: i.payload,
        payload_sha256: i.payload_sha256,
        revision: i.revision,
        requested_at: i.requested_at,
        expires_at: i.expires_at,
        on_expiry: i.on_expiry,
    })
}

pub(in crate::store) fn open_suspension_row(row: &AnyRow) -> StoreResult<OpenSuspension> {
    Ok(OpenSuspension {
        id: SuspensionId::from_trusted(text(row, "id")?),
        interaction_id: opt_text(row, "interaction_id")?.map(InteractionId::from_trusted),
    })
}

pub(in crate::store) fn checkpoint(row: &AnyRow) -> StoreResult<Checkpoint> {
    Ok(Checkpoint {
        id: CheckpointId::from_trusted(text(row, "id")?),
        run_id: RunId::from_trusted(text(row, "run_id")?),
        sequence: int(row, "sequence")?,
        codec_version: text(row, "codec_version")?,
        state: json(row, "state")?,
        resolved_spec_hash: text(row, "resolved_spec_hash")?,
        created_at: time(row, "created_at")?,
    })
}

pub(in crate::store) fn job(row: &AnyRow) -> StoreResult<Job> {
    Ok(Job {
        id: JobId::from_trusted(text(row, "id")?),
        run_id: RunId::from_trusted(text(row, "run_id")?),
        kind: text(row, "kind")?,
        payload: json(row, "payload")?,
        pause_behavior: enumeration(row, "pause_behavior")?,
        execution_affinity: enumeration(row, "execution_affinity")?,
        state: enumeration(row, "state")?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
    })
}

pub(in crate::store) fn token(row: &AnyRow) -> StoreResult<TokenInfo> {
    Ok(TokenInfo {
        id: TokenId::from_trusted(text(row, "id")?),
        role: enumeration(row, "role")?,
        tenant_id: opt_text(row, "tenant_id")?,
        created_at: time(row, "created_at")?,
        revoked_at: opt_time(row, "revoked_at")?,
        expires_at: opt_time(row, "expires_at")?,
        name: opt_text(row, "name")?,
    })
}

pub(in crate::store) fn provider(row: &AnyRow) -> StoreResult<ProviderRecord> {
    Ok(ProviderRecord {
        provider_id: text(row, "provider_id")?,
        base_url: text(row, "base_url")?,
        token: text(row, "token")?,
        capabilities: json(row, "capabilities")?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
    })
}

pub(in crate::store) fn session_event(row: &AnyRow) -> StoreResult<SessionEvent> {
    Ok(SessionEvent {
        session_id: SessionId::from_trusted(text(row, "session_id")?),
        sequence: int(row, "sequence")?,
        r#type: text(row, "type")?,
        data: json(row, "data")?,
        created_at: time(row, "created_at")?,
    })
}

pub(in crate::store) fn suspension(row: &AnyRow) -> StoreResult<Suspension> {
    Ok(Suspension {
        id: SuspensionId::from_trusted(text(row, "id")?),
        run_id: RunId::from_trusted(text(row, "run_id")?),
        reason: enumeration(row, "reason")?,
        status: enumeration(row, "status")?,
        checkpoint_id: CheckpointId::from_trusted(text(row, "checkpoint_id")?),
        interaction_id: opt_text(row, "interaction_id")?.map(InteractionId::from_trusted),
        requested_at: time(row, "requested_at")?,
        resolved_at: opt_time(row, "resolved_at")?,
    })
}

pub(in crate::store) fn resource(row: &AnyRow) -> StoreResult<ExecutionResourceRecord> {
    Ok(ExecutionResourceRecord {
        run_id: RunId::from_trusted(text(row, "run_id")?),
        generation: int(row, "generation")?,
        provider_id: text(row, "provider_id")?,
        provider_generation: opt_int(row, "provider_generation")?,
        sandbox_ref: opt_typed(row, "sandbox_ref")?,
        sandbox_spec: typed(row, "sandbox_spec")?,
        run_resolved_spec_hash: text(row, "run_resolved_spec_hash")?,
        state: enumeration(row, "state")?,
        disposition: opt_enumeration(row, "disposition")?,
        sandbox_checkpoint: opt_typed(row, "sandbox_checkpoint")?,
        checkpoint_lost: flag(row, "checkpoint_lost")?,
        suspension_id: opt_text(row, "suspension_id")?.map(SuspensionId::from_trusted),
        suspension_reason: opt_enumeration(row, "suspension_reason")?,
        blocking_job_ids: typed(row, "blocking_job_ids")?,
        blocking_child_run_ids: typed(row, "blocking_child_run_ids")?,
        release_idempotency_key: opt_text(row, "release_idempotency_key")?,
        release_purpose: opt_enumeration(row, "release_purpose")?,
        release_requested_at: opt_time(row, "release_requested_at")?,
        released_at: opt_time(row, "released_at")?,
        compute_released: flag(row, "compute_released")?,
        bind_idempotency_key: opt_text(row, "bind_idempotency_key")?,
        retry_count: int(row, "retry_count")?,
        next_retry_at: opt_time(row, "next_retry_at")?,
        due_at: opt_time(row, "due_at")?,
        error: opt_typed(row, "error")?,
        version: int(row, "version")?,
        updated_at: time(row, "updated_at")?,
    })
}

pub(in crate::store) fn history_entry(row: &AnyRow) -> StoreResult<ResourceEvent> {
    Ok(ResourceEvent {
        run_id: RunId::from_trusted(text(row, "run_id")?),
        sequence: int(row, "sequence")?,
        r#type: text(row, "type")?,
        data: json(row, "data")?,
        created_at: time(row, "created_at")?,
    })
}
