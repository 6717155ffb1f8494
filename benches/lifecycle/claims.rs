//! Claim rate against table size: runtime claims (`claim_runs`) and lifecycle claims
//! (`claim_lifecycle_work`), one run per call over M due runs, on a nearly empty database and
//! again after 100,000 suspended runs with released records are loaded in bulk; and idle
//! runtime claims (nothing due) with and without thousands of runs holding live leases.

use std::time::Instant;

use chrono::Utc;
use sagents::clock::to_millis;
use sagents::domain::resource::ResourceState;
use sagents::domain::RunId;
use sagents::providers::wire::{CheckpointRef, SandboxRef};
use sagents::store::Backend;
use sqlx::AnyPool;

use crate::db::Db;
use crate::drive::{resolved_spec_hash, spec, TENANT};
use crate::noop::PROVIDER_ID;

/// Runs per bulk-loaded session.
const RUNS_PER_SESSION: usize = 10;
/// Marks where a row's hex id goes in a JSON template.
const HOLE: &str = "@@";

#[derive(Debug, Default)]
pub struct ClaimRates {
    pub runtime_empty: Vec<f64>,
    pub runtime_loaded: Vec<f64>,
    pub lifecycle_empty: Vec<f64>,
    pub lifecycle_loaded: Vec<f64>,
    /// Runtime claims that find nothing due: with no run leased, and with many.
    pub idle_empty: Vec<f64>,
    pub idle_leased: Vec<f64>,
}

impl ClaimRates {
    /// (empty, loaded) figures of runtime or lifecycle claims.
    pub fn series(&self, runtime: bool) -> (&[f64], &[f64]) {
        if runtime {
            (&self.runtime_empty, &self.runtime_loaded)
        } else {
            (&self.lifecycle_empty, &self.lifecycle_loaded)
        }
    }
}

/// Ids of one batch: `<prefix><32 hex digits of (batch << 32) + n>`.
fn base(batch: i64) -> i64 {
    batch << 32
}

/// A `FROM` source of the integers 1..=count as column `n`.
fn numbers(backend: Backend, count: usize) -> String {
    match backend {
        Backend::Sqlite => format!(
            "(WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq \
             WHERE n < {count}) SELECT n FROM seq) AS g"
        ),
        Backend::Postgres => format!("generate_series(1, {count}) AS g(n)"),
    }
}

/// 32 lowercase hex digits of an integer expression.
fn hex(backend: Backend, expr: &str) -> String {
    match backend {
        Backend::Sqlite => format!("printf('%032x', {expr})"),
        Backend::Postgres => format!("lpad(to_hex({expr}), 32, '0')"),
    }
}

fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A text expression: `json` with every hole replaced by `h`.
fn fill(json: &str, h: &str) -> String {
    json.split(HOLE)
        .map(literal)
        .collect::<Vec<_>>()
        .join(&format!(" || {h} || "))
}

async fn run(sql: &AnyPool, query: &str, at: i64, spec_json: Option<&str>) {
    sqlx::query(query)
        .bind(at)
        .bind(resolved_spec_hash())
        .bind(spec_json)
        .execute(sql)
        .await
        .unwrap_or_else(|e| panic!("{query}: {e}"));
}

/// Inserts `count` suspended runs (ten per session) with their checkpoint, pending
/// suspension and a `released` record, as the service would have left them.
async fn bulk_load(db: &Db, batch: i64, count: usize) {
    let b = db.backend;
    let h = hex(b, &format!("{} + n", base(batch)));
    let spec_json = serde_json::to_string(&spec(PROVIDER_ID)).expect("spec json");
    let sandbox_ref = serde_json::to_string(&SandboxRef {
        sandbox_id: format!("nop-{HOLE}"),
        provider_id: PROVIDER_ID.into(),
        provider_version: "1".into(),
        tenant_id: "bulk".into(),
        owner_run_id: format!("run_{HOLE}"),
        spec_hash: spec(PROVIDER_ID).spec_hash,
        policy_hash: spec(PROVIDER_ID).policy_hash,
    })
    .expect("ref json");
    let checkpoint = serde_json::to_string(&CheckpointRef {
        checkpoint_id: format!("ckp-{HOLE}"),
        provider_id: PROVIDER_ID.into(),
        sandbox_id: format!("nop-{HOLE}"),
        generation: 1,
        size_bytes: 0,
        digest: None,
        created_at: Utc::now(),
    })
    .expect("checkpoint json");
    let sessions = count.div_ceil(RUNS_PER_SESSION);
    let session_of = hex(
        b,
        &format!("{} + (n - 1) / {RUNS_PER_SESSION} + 1", base(batch)),
    );
    let at = to_millis(Utc::now()) - 86_400_000;
    let statements = [
        (
            "sessions",
            1,
            format!(
                "INSERT INTO sessions (id, tenant_id, title, metadata, parent_session_id, revision, \
                 event_seq, created_at, updated_at) \
                 SELECT 'ses_' || {h}, 'bulk', NULL, '{{}}', NULL, 3, 0, $1 + n, $1 + n \
                 FROM {}",
                numbers(b, sessions)
            ),
        ),
        (
            "runs",
            3,
            format!(
                "INSERT INTO runs (id, session_id, parent_run_id, state, resolved_spec_hash, \
                 sandbox_spec, input, revision, created_at, updated_at) \
                 SELECT 'run_' || {h}, 'ses_' || {session_of}, NULL, 'suspended', $2, $3, '{{}}', \
                 3, $1 + n, $1 + n FROM {}",
                numbers(b, count)
            ),
        ),
        (
            "checkpoints",
            2,
            format!(
                "INSERT INTO checkpoints (id, run_id, sequence, codec_version, state, \
                 resolved_spec_hash, created_at) \
                 SELECT 'chk_' || {h}, 'run_' || {h}, 1, 'v1', '{{\"step\":1}}', $2, $1 + n FROM {}",
                numbers(b, count)
            ),
        ),
        (
            "suspensions",
            1,
            format!(
                "INSERT INTO suspensions (id, run_id, reason, status, checkpoint_id, \
                 interaction_id, requested_at, resolved_at) \
                 SELECT 'sus_' || {h}, 'run_' || {h}, 'approval_required', 'pending', \
                 'chk_' || {h}, NULL, $1 + n, NULL FROM {}",
                numbers(b, count)
            ),
        ),
        (
            "execution_resources",
            3,
            format!(
                "INSERT INTO execution_resources (run_id, generation, provider_id, sandbox_ref, \
                 sandbox_spec, run_resolved_spec_hash, state, disposition, sandbox_checkpoint, \
                 checkpoint_lost, suspension_id, suspension_reason, blocking_job_ids, \
                 blocking_child_run_ids, release_idempotency_key, release_purpose, \
                 release_requested_at, released_at, compute_released, bind_idempotency_key, \
                 retry_count, next_retry_at, due_at, error, version, state_since, created_at, \
                 updated_at) \
                 SELECT 'run_' || {h}, 1, '{PROVIDER_ID}', {}, $3, $2, 'released', \
                 'snapshot_and_terminate', {}, 0, 'sus_' || {h}, 'approval_required', '[]', '[]', \
                 'release-' || {h}, 'suspend', $1 + n + 1000, $1 + n + 1005, 1, NULL, 0, NULL, \
                 NULL, NULL, 4, $1 + n + 1005, $1 + n, $1 + n + 1005 FROM {}",
                fill(&sandbox_ref, &h),
                fill(&checkpoint, &h),
                numbers(b, count)
            ),
        ),
    ];
    // One statement at a time, each table analysed before the next insert checks its foreign
    // keys against it: PostgreSQL would otherwise plan those checks for an empty table.
    // Each statement binds only the parameters it uses: $1 time, $2 hash, $3 spec.
    for (table, params, s) in &statements {
        let mut q = sqlx::query(s).bind(at);
        if *params > 1 {
            q = q.bind(resolved_spec_hash());
        }
        if *params > 2 {
            q = q.bind(&spec_json);
        }
        q.execute(&db.sql)
            .await
            .unwrap_or_else(|e| panic!("{s}: {e}"));
        if b == Backend::Postgres {
            db.exec(&format!("ANALYZE {table}")).await;
        }
    }
    // Old rows as a long-running database holds them: in the main file, with statistics.
    match b {
        Backend::Sqlite => db.exec("PRAGMA wal_checkpoint(TRUNCATE)").await,
        Backend::Postgres => db.exec("VACUUM ANALYZE").await,
    }
    let first = RunId::from_trusted(format!("run_{:032x}", base(batch) + 1));
    let record = db.store.get_resource(&first).await.expect("a bulk record");
    assert_eq!(record.state, ResourceState::Released);
    assert!(record.sandbox_checkpoint.is_some() && record.sandbox_ref.is_some());
}

/// Inserts an empty session of the bench tenant; returns its id.
async fn bench_session(db: &Db, batch: i64) -> String {
    let session = format!("ses_{:032x}", base(batch));
    let now = to_millis(Utc::now());
    sqlx::query(
        "INSERT INTO sessions (id, tenant_id, title, metadata, parent_session_id, revision, \
         event_seq, created_at, updated_at) VALUES ($1, $2, NULL, '{}', NULL, 1, 0, $3, $3)",
    )
    .bind(&session)
    .bind(TENANT)
    .bind(now)
    .execute(&db.sql)
    .await
    .expect("insert a session");
    session
}

/// Inserts one session of `m` queued runs of the bench tenant, as `create_run` leaves them:
/// with a sandbox spec, each also gets a `provisioning` record due now. Returns the session.
async fn queue(db: &Db, batch: i64, m: usize, with_spec: bool) -> String {
    let b = db.backend;
    let session = bench_session(db, batch).await;
    let now = to_millis(Utc::now());
    let h = hex(b, &format!("{} + n", base(batch)));
    let spec_json = with_spec.then(|| serde_json::to_string(&spec(PROVIDER_ID)).expect("json"));
    let runs = format!(
        "INSERT INTO runs (id, session_id, parent_run_id, state, resolved_spec_hash, \
         sandbox_spec, input, revision, created_at, updated_at) \
         SELECT 'run_' || {h}, {}, NULL, 'queued', $2, $3, '{{}}', 1, $1 + n, $1 + n FROM {}",
        literal(&session),
        numbers(b, m)
    );
    run(&db.sql, &runs, now - m as i64, spec_json.as_deref()).await;
    if with_spec {
        let records = format!(
            "INSERT INTO execution_resources (run_id, generation, provider_id, sandbox_ref, \
             sandbox_spec, run_resolved_spec_hash, state, checkpoint_lost, blocking_job_ids, \
             blocking_child_run_ids, compute_released, retry_count, due_at, version, \
             state_since, created_at, updated_at) \
             SELECT r.id, 0, '{PROVIDER_ID}', NULL, r.sandbox_spec, r.resolved_spec_hash, \
             'provisioning', 0, '[]', '[]', 0, 0, r.created_at, 1, r.created_at, r.created_at, \
             r.created_at FROM runs r WHERE r.session_id = {}",
            literal(&session)
        );
        db.exec(&records).await;
    }
    session
}

/// Removes a measured session and everything the claims left in it.
async fn drop_session(db: &Db, session: &str) {
    let s = literal(session);
    for q in [
        format!("DELETE FROM session_events WHERE session_id = {s}"),
        format!(
            "DELETE FROM execution_resources WHERE run_id IN \
             (SELECT id FROM runs WHERE session_id = {s})"
        ),
        format!("DELETE FROM runs WHERE session_id = {s}"),
        format!("DELETE FROM sessions WHERE id = {s}"),
    ] {
        db.exec(&q).await;
    }
}

async fn runtime_rate(db: &Db, batch: i64, m: usize) -> f64 {
    let session = queue(db, batch, m, false).await;
    let ttl = chrono::Duration::minutes(10);
    let start = Instant::now();
    for _ in 0..m {
        let got = db
            .store
            .claim_runs(Some(TENANT), "runtime-1", 1, ttl)
            .await
            .expect("claim");
        assert_eq!(got.len(), 1, "one claim per call");
    }
    let rate = m as f64 / start.elapsed().as_secs_f64();
    drop_session(db, &session).await;
    rate
}

async fn lifecycle_rate(db: &Db, batch: i64, m: usize) -> f64 {
    let session = queue(db, batch, m, true).await;
    let ttl = chrono::Duration::minutes(10);
    let start = Instant::now();
    for _ in 0..m {
        let got = db
            .store
            .claim_lifecycle_work("bench:w1", 1, ttl)
            .await
            .expect("claim");
        assert_eq!(got.len(), 1, "one lifecycle claim per call");
    }
    let rate = m as f64 / start.elapsed().as_secs_f64();
    drop_session(db, &session).await;
    rate
}

/// Idle runtime claims per call that find nothing due.
const IDLE_CALLS: usize = 1000;

/// Inserts one session of `count` running runs, each holding a lease for another hour.
async fn hold_leases(db: &Db, batch: i64, count: usize) -> String {
    let session = bench_session(db, batch).await;
    let h = hex(db.backend, &format!("{} + n", base(batch)));
    let runs = format!(
        "INSERT INTO runs (id, session_id, parent_run_id, state, resolved_spec_hash, \
         sandbox_spec, input, revision, created_at, updated_at, lease_id, lease_holder, \
         fencing_token, lease_expires_at) \
         SELECT 'run_' || {h}, {}, NULL, 'running', $2, $3, '{{}}', 1, $1 + n, $1 + n, \
         'lea_' || {h}, 'bench-holder', n, $1 + 3600000 FROM {}",
        literal(&session),
        numbers(db.backend, count)
    );
    run(&db.sql, &runs, to_millis(Utc::now()), None).await;
    if db.backend == Backend::Postgres {
        db.exec("ANALYZE runs").await;
    }
    session
}

async fn idle_rate(db: &Db) -> f64 {
    let ttl = chrono::Duration::minutes(10);
    let start = Instant::now();
    for _ in 0..IDLE_CALLS {
        let got = db
            .store
            .claim_runs(Some(TENANT), "runtime-1", 1, ttl)
            .await
            .expect("claim");
        assert!(got.is_empty(), "nothing is due");
    }
    IDLE_CALLS as f64 / start.elapsed().as_secs_f64()
}

/// Both claim rates, `reps` times each, before and after loading `bulk` suspended runs.
/// `m`: (runtime, lifecycle) claims per repetition.
/// `leased`: runs holding live leases during the idle claims.
pub async fn measure(
    db: &Db,
    m: (usize, usize),
    bulk: usize,
    reps: usize,
    leased: usize,
) -> ClaimRates {
    let caps = serde_json::to_value(crate::noop::capabilities()).expect("caps json");
    db.store
        .upsert_provider(
            PROVIDER_ID,
            "http://127.0.0.1:9",
            "bench-token",
            &caps,
            "bench",
        )
        .await
        .expect("a provider row");
    let mut rates = ClaimRates::default();
    let mut batch = 1;
    for _ in 0..reps {
        rates.idle_empty.push(idle_rate(db).await);
        let session = hold_leases(db, batch, leased).await;
        batch += 1;
        rates.idle_leased.push(idle_rate(db).await);
        drop_session(db, &session).await;
    }
    for loaded in [false, true] {
        if loaded {
            let start = Instant::now();
            bulk_load(db, batch, bulk).await;
            batch += 1;
            eprintln!(
                "  loaded {bulk} suspended runs with released records in {:.1} s",
                start.elapsed().as_secs_f64()
            );
        }
        for _ in 0..reps {
            let r = runtime_rate(db, batch, m.0).await;
            let l = lifecycle_rate(db, batch + 1, m.1).await;
            batch += 2;
            let (rt, lc) = if loaded {
                (&mut rates.runtime_loaded, &mut rates.lifecycle_loaded)
            } else {
                (&mut rates.runtime_empty, &mut rates.lifecycle_empty)
            };
            rt.push(r);
            lc.push(l);
        }
    }
    rates
}
