//! The store suite: every test runs against SQLite and against PostgreSQL.

use std::sync::Arc;

use chrono::{Duration, Utc};
use sagents::clock::ManualClock;
use sagents::domain::claim::Claim;
use sagents::domain::commands::{
    CreateRun, CreateSession, NewCheckpoint, NewInteraction, ReplyInteraction, SuspendRun,
};
use sagents::domain::interaction::{InteractionType, SuspensionReason};
use sagents::domain::run::Run;
use sagents::domain::session::Session;
use sagents::domain::snapshot::Snapshot;
use sagents::domain::{InteractionId, RunId};
use sagents::store::{Backend, Store};
use serde_json::json;

use crate::common::db::{self, TestDb};

mod admin;
mod audit;
mod cancelled;
mod claims;
mod cycle;
mod expiry;
mod grouped_replies;
mod grouped_transitions;
mod grouped_writes;
mod idempotency;
mod jobs;
mod migrations_match;
mod replicas;
mod replies;
mod resources;
mod sessions;
mod snapshot_cache;

pub const TTL: i64 = 30;

pub fn ttl() -> Duration {
    Duration::seconds(TTL)
}

/// A store on a fresh database with a clock that only moves when told to.
pub struct Fx {
    pub store: Store,
    pub clock: ManualClock,
    _db: TestDb,
}

pub async fn fx(backend: Backend) -> Fx {
    let clock = ManualClock::new(Utc::now());
    let (store, db) = db::store(backend, Arc::new(clock.clone())).await;
    Fx {
        store,
        clock,
        _db: db,
    }
}

impl Fx {
    pub fn advance(&self, seconds: i64) {
        self.clock.advance(Duration::seconds(seconds));
    }

    pub async fn session(&self, tenant: &str) -> Session {
        self.store
            .create_session(
                tenant,
                &CreateSession {
                    title: Some("a session".into()),
                    metadata: json!({ "k": "v" }),
                    parent_session_id: None,
                },
            )
            .await
            .unwrap()
    }

    pub async fn run(&self, session: &Session) -> Run {
        self.store
            .create_run(&session.tenant_id, &session.id, &run_cmd(None))
            .await
            .unwrap()
    }

    pub async fn snapshot(&self, session: &Session) -> Snapshot {
        self.store
            .snapshot(Some(&session.tenant_id), &session.id)
            .await
            .unwrap()
    }

    /// The id of the first interaction pending in `session`.
    pub async fn pending_interaction(&self, session: &Session) -> InteractionId {
        self.snapshot(session).await.pending_interactions[0]
            .id
            .clone()
    }

    /// Claims exactly one run and returns it.
    pub async fn claim_one(&self, tenant: &str) -> Claim {
        let mut claims = self
            .store
            .claim_runs(Some(tenant), "worker-1", 1, ttl())
            .await
            .unwrap();
        assert_eq!(claims.len(), 1, "expected one claim");
        claims.remove(0)
    }

    /// A new run in `session`, claimed.
    pub async fn claimed(&self, session: &Session) -> Claim {
        let run = self.run(session).await;
        let claim = self.claim_one(&session.tenant_id).await;
        assert_eq!(claim.run.id, run.id, "the new run is the one claimed");
        claim
    }

    /// Asserts that nothing of `tenant` (None: of any tenant) can be claimed now.
    pub async fn nothing_claimable(&self, tenant: Option<&str>) {
        let claims = self
            .store
            .claim_runs(tenant, "worker-1", 10, ttl())
            .await
            .unwrap();
        assert!(claims.is_empty(), "nothing claimable expected: {claims:?}");
    }

    /// A run that is `suspended` with a pending approval; returns the run id and the claim
    /// that suspended it.
    pub async fn suspended(&self, session: &Session, interaction: bool) -> (RunId, Claim) {
        let claim = self.claimed(session).await;
        self.store
            .suspend_run(
                Some(&session.tenant_id),
                &claim.run.id,
                &suspend_cmd(claim.lease.fencing_token, 1, interaction),
            )
            .await
            .unwrap();
        (claim.run.id.clone(), claim)
    }
}

pub fn hash(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

pub fn run_cmd(parent: Option<RunId>) -> CreateRun {
    CreateRun {
        parent_run_id: parent,
        sandbox_spec: None,
        resolved_spec_hash: hash('a'),
        input: json!({ "prompt": "hello" }),
    }
}

pub fn suspend_cmd(token: i64, sequence: i64, interaction: bool) -> SuspendRun {
    SuspendRun {
        fencing_token: token,
        reason: if interaction {
            SuspensionReason::ApprovalRequired
        } else {
            SuspensionReason::ManualPause
        },
        checkpoint: NewCheckpoint {
            codec_version: "v1".into(),
            sequence,
            state: json!({ "step": sequence }),
            resolved_spec_hash: hash('a'),
        },
        interaction: interaction.then(|| NewInteraction {
            interaction_type: InteractionType::Approval,
            allowed_decisions: vec!["approve".into(), "deny".into()],
            payload: json!({ "command": "rm -rf build" }),
            expires_at: None,
            expires_in_seconds: None,
            warn_before_seconds: None,
            on_expiry: None,
        }),
    }
}

pub fn reply(decision: &str) -> ReplyInteraction {
    ReplyInteraction {
        decision: decision.into(),
        payload: json!({ "note": "ok" }),
        expected_revision: None,
        payload_sha256: None,
        comment: None,
    }
}

/// Triggers that make the database refuse a write: `(INSERT or UPDATE, table, condition on NEW)`.
pub async fn refuse_writes(f: &Fx, targets: &[(&str, &str, String)]) {
    let raw = sqlx::AnyPool::connect(f.store.url()).await.unwrap();
    let mut statements = Vec::new();
    if f.store.backend() == Backend::Postgres {
        statements.push(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'refused'; END $$"
                .to_owned(),
        );
    }
    for (on, table, when) in targets {
        statements.push(match f.store.backend() {
            Backend::Sqlite => format!(
                "CREATE TRIGGER refuse_{table} BEFORE {on} ON {table} \
                 WHEN {when} BEGIN SELECT RAISE(ABORT, 'refused'); END"
            ),
            Backend::Postgres => format!(
                "CREATE TRIGGER refuse_{table} BEFORE {on} ON {table} FOR EACH ROW \
                 WHEN ({when}) EXECUTE FUNCTION refuse()"
            ),
        });
    }
    for sql in statements {
        sqlx::query(&sql).execute(&raw).await.unwrap();
    }
    raw.close().await;
}

/// Two stores on one fresh, migrated database, as two replicas, sharing a clock that only
/// moves when told to.
pub struct Replicas {
    pub a: Store,
    pub b: Store,
    pub clock: ManualClock,
    pub url: String,
    _db: TestDb,
}

pub async fn replicas(backend: Backend) -> Replicas {
    let (url, db) = db::fresh_url(backend).await;
    let clock = ManualClock::new(Utc::now());
    let replica = || {
        Store::connect(
            &url,
            Arc::new(clock.clone()),
            sagents::notify::ChangeHub::new(),
            Arc::new(sagents::metrics::Metrics::default()),
        )
    };
    let a = replica().await.unwrap();
    a.migrate().await.unwrap();
    let b = replica().await.unwrap();
    Replicas {
        a,
        b,
        clock,
        url,
        _db: db,
    }
}

impl Replicas {
    pub async fn close(self) {
        self.a.close().await;
        self.b.close().await;
    }
}
