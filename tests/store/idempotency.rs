//! A request that took effect under an `Idempotency-Key` is never run twice: its answer is
//! stored with its effect, so a retry after its replica died (the key past its in-flight
//! time) is answered with the first result.

use chrono::Duration;
use sagents::domain::commands::{CreateJob, CreateSession};
use sagents::domain::job::Job;
use sagents::domain::run::Run;
use sagents::domain::session::Session;
use sagents::domain::token::{NewToken, Role, TokenInfo};
use sagents::store::{Backend, IdempotencyBegin, IdempotencyClaim};
use serde_json::json;

use super::{fx, run_cmd};
use crate::on_both_backends;

const IN_FLIGHT: Duration = Duration::seconds(75);

on_both_backends!(
    a_session_created_under_a_key_is_answered_again_after_a_crash,
    a_run_created_under_a_key_is_answered_again_after_a_crash,
    a_refused_creation_leaves_the_key_to_its_request,
    a_job_created_under_a_key_is_answered_again_after_a_crash,
    a_token_created_under_a_key_is_answered_again_after_a_crash,
);

fn claim(key: &str) -> IdempotencyClaim {
    IdempotencyClaim {
        scope: "tok_a".into(),
        key: key.into(),
    }
}

/// The stored answer's status and JSON body.
fn answer<T: serde::de::DeserializeOwned>(begin: IdempotencyBegin) -> (u16, T) {
    let IdempotencyBegin::Replay { status, body } = begin else {
        panic!("a replay of the first answer expected, got {begin:?}");
    };
    let json = body
        .strip_prefix(b"application/json\n")
        .expect("stored with its content type");
    (status, serde_json::from_slice(json).unwrap())
}

async fn a_session_created_under_a_key_is_answered_again_after_a_crash(backend: Backend) {
    let f = fx(backend).await;
    let s = &f.store;
    let begin = s.idempotency_begin("tok_a", "k1", "h1", IN_FLIGHT).await;
    assert_eq!(begin.unwrap(), IdempotencyBegin::Started);
    let cmd = CreateSession {
        title: Some("once".into()),
        metadata: json!({}),
        parent_session_id: None,
    };
    let created = s
        .create_session_keyed("acme", &cmd, Some(&claim("k1")))
        .await
        .unwrap();
    // The replica dies here: `idempotency_finish` never runs.
    f.advance(IN_FLIGHT.num_seconds() + 1);

    let retry = s.idempotency_begin("tok_a", "k1", "h1", IN_FLIGHT).await;
    let (status, first): (u16, Session) = answer(retry.unwrap());
    assert_eq!(status, 201);
    assert_eq!(first, created);
    let sessions = s.list_sessions("acme", None, 100).await.unwrap();
    assert_eq!(sessions.len(), 1, "no second session");
}

async fn a_run_created_under_a_key_is_answered_again_after_a_crash(backend: Backend) {
    let f = fx(backend).await;
    let s = &f.store;
    let session = f.session("acme").await;
    let begin = s.idempotency_begin("tok_a", "k2", "h2", IN_FLIGHT).await;
    assert_eq!(begin.unwrap(), IdempotencyBegin::Started);
    let created = s
        .create_run_keyed("acme", &session.id, &run_cmd(None), Some(&claim("k2")))
        .await
        .unwrap();
    f.advance(IN_FLIGHT.num_seconds() + 1);

    let retry = s.idempotency_begin("tok_a", "k2", "h2", IN_FLIGHT).await;
    let (status, first): (u16, Run) = answer(retry.unwrap());
    assert_eq!(status, 201);
    assert_eq!(first.id, created.id);
    let snapshot = f.snapshot(&session).await;
    assert_eq!(snapshot.runs.len(), 1, "no second run");
}

async fn a_refused_creation_leaves_the_key_to_its_request(backend: Backend) {
    let f = fx(backend).await;
    let s = &f.store;
    let begin = s.idempotency_begin("tok_a", "k3", "h3", IN_FLIGHT).await;
    assert_eq!(begin.unwrap(), IdempotencyBegin::Started);
    let missing = sagents::domain::SessionId::new();
    let refused = s
        .create_run_keyed("acme", &missing, &run_cmd(None), Some(&claim("k3")))
        .await;
    assert!(refused.is_err());
    let again = s.idempotency_begin("tok_a", "k3", "h3", IN_FLIGHT).await;
    assert_eq!(
        again.unwrap(),
        IdempotencyBegin::InFlight,
        "nothing took effect: the request itself stores its answer"
    );
}

async fn a_job_created_under_a_key_is_answered_again_after_a_crash(backend: Backend) {
    let f = fx(backend).await;
    let s = &f.store;
    let session = f.session("acme").await;
    let claimed = f.claimed(&session).await;
    let run = &claimed.run.id;
    let begin = s.idempotency_begin("tok_a", "k4", "h4", IN_FLIGHT).await;
    assert_eq!(begin.unwrap(), IdempotencyBegin::Started);
    let cmd = CreateJob {
        fencing_token: claimed.lease.fencing_token,
        kind: "shell".into(),
        payload: json!({ "cmd": "make" }),
        pause_behavior: None,
        execution_affinity: None,
    };
    let created = s
        .create_job_keyed(Some("acme"), run, &cmd, Some(&claim("k4")))
        .await
        .unwrap();
    f.advance(IN_FLIGHT.num_seconds() + 1);

    let retry = s.idempotency_begin("tok_a", "k4", "h4", IN_FLIGHT).await;
    let (status, first): (u16, Job) = answer(retry.unwrap());
    assert_eq!(status, 201);
    assert_eq!(first, created);
    let jobs = s.list_jobs(Some("acme"), run).await.unwrap();
    assert_eq!(jobs.len(), 1, "no second job");
}

async fn a_token_created_under_a_key_is_answered_again_after_a_crash(backend: Backend) {
    let f = fx(backend).await;
    let s = &f.store;
    let begin = s.idempotency_begin("tok_a", "k5", "h5", IN_FLIGHT).await;
    assert_eq!(begin.unwrap(), IdempotencyBegin::Started);
    let replay = |t: &TokenInfo| (409, format!("text/plain\nalready {}", t.id).into_bytes());
    let (token, _secret) = s
        .create_token_keyed(
            &NewToken {
                role: Role::Runtime,
                tenant: Some("acme".into()),
                expires_at: None,
                name: None,
            },
            "u",
            Some((&claim("k5"), &replay)),
        )
        .await
        .unwrap();
    f.advance(IN_FLIGHT.num_seconds() + 1);

    let retry = s.idempotency_begin("tok_a", "k5", "h5", IN_FLIGHT).await;
    assert_eq!(
        retry.unwrap(),
        IdempotencyBegin::Replay {
            status: 409,
            body: format!("text/plain\nalready {}", token.id).into_bytes(),
        },
        "the replay the request chose, never the secret"
    );
    assert_eq!(s.list_tokens().await.unwrap().len(), 1, "no second token");
}
