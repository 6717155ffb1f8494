//! Rows as a rule finds them, for the rules' tests.

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;

use crate::domain::interaction::{InteractionRequest, InteractionStatus, InteractionType};
use crate::domain::run::{Run, RunState};
use crate::domain::{InteractionId, RunId, SessionId};

pub fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0)
        .single()
        .unwrap_or_default()
}

pub fn hash(digit: char) -> String {
    format!("sha256:{}", digit.to_string().repeat(64))
}

pub fn run(state: RunState) -> Run {
    Run {
        id: RunId::new(),
        session_id: SessionId::new(),
        parent_run_id: None,
        state,
        resolved_spec_hash: hash('a'),
        sandbox_spec: None,
        input: json!({}),
        output: None,
        error: None,
        revision: 3,
        created_at: now() - Duration::hours(1),
        updated_at: now() - Duration::minutes(5),
    }
}

pub fn interaction(status: InteractionStatus) -> InteractionRequest {
    InteractionRequest {
        id: InteractionId::new(),
        run_id: RunId::new(),
        interaction_type: InteractionType::Approval,
        status,
        allowed_decisions: vec!["approve".into(), "deny".into()],
        payload: json!({}),
        payload_sha256: crate::domain::interaction::payload_digest(&json!({})),
        revision: 1,
        requested_at: now() - Duration::minutes(5),
        expires_at: None,
        on_expiry: Default::default(),
        resolution: None,
    }
}
