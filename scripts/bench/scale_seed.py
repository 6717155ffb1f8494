"""Seeds a stopped service's database in bulk, with rows as the service itself leaves them.

usage: scale_seed.py sqlite PATH SESSIONS SUSPENDED
       scale_seed.py postgres URL SESSIONS SUSPENDED

Inserts SESSIONS sessions spread over many tenants: one in ten belongs to the tenant `bench`
(the benchmarked one), the rest to 997 others. One session in SESSIONS / SUSPENDED holds a run
`suspended` on a pending approval as a real suspend leaves it: sandbox spec, checkpoint,
`pending` suspension, pending interaction, an execution-resource record `released` by
snapshot-and-terminate, its resource history and the session's event log. Every other session
holds a run `completed` without a sandbox, with its event log. Rows were copied from a real
run through the reference provider; ids are the usual prefix and 32 hex digits (low numbers,
so they never meet the UUIDv7 ids of the service). Timestamps spread over the last 30 days.
Inserted in chunks of 100,000 sessions, one transaction each.
"""
import subprocess
import sys
import time

CHUNK = 100_000
HOLE = "@@"
HASH = "sha256:" + "a" * 64
SPEC_HASH = "sha256:" + "1" * 64
POLICY_HASH = "sha256:" + "2" * 64
SPEC = (
    '{"spec_version":"sagents.sandbox-spec/v3","provider_id":"local",'
    f'"spec_hash":"{SPEC_HASH}","policy_hash":"{POLICY_HASH}","workspace_mode":"isolated",'
    '"lifecycle":{},"resources":{},"metadata":{}}'
)
SANDBOX_REF = (
    '{"sandbox_id":"sbx_@@","provider_id":"local","provider_version":"0.1.0",'
    '"tenant_id":"@T","owner_run_id":"run_@@",'
    f'"spec_hash":"{SPEC_HASH}","policy_hash":"{POLICY_HASH}"}}'
)
CHECKPOINT_REF = (
    '{"checkpoint_id":"ckp_@@","provider_id":"local","sandbox_id":"sbx_@@","generation":1,'
    '"size_bytes":78,"digest":"sha256:3ec311ba034e666771212ffbafbc156a06cc5203439c9c55385a5d2c726b1b3f",'
    '"created_at":"2026-11-01T00:00:00.000Z"}'
)
RESOURCE_EVENT = (
    '{"disposition":@D,"error_code":null,"from":"@F","generation":1,"provider_id":"local",'
    '"run_id":"run_@@","state":"@S"}'
)


class Dialect:
    def __init__(self, backend):
        self.sqlite = backend == "sqlite"

    def numbers(self, lo, hi):
        if self.sqlite:
            return (f"(WITH RECURSIVE seq(n) AS (SELECT {lo} UNION ALL SELECT n + 1 FROM seq "
                    f"WHERE n < {hi}) SELECT n FROM seq) AS g")
        return f"generate_series({lo}, {hi}) AS g(n)"

    def hex(self, expr):
        if self.sqlite:
            return f"printf('%032x', {expr})"
        return f"lpad(to_hex({expr}), 32, '0')"


def lit(s):
    return "'" + s.replace("'", "''") + "'"


def fill(template, h, tenant="''"):
    """A text expression: `template` with each hole replaced by the hex id, @T by the tenant."""
    parts = []
    for i, piece in enumerate(template.split(HOLE)):
        if i:
            parts.append(h)
        sub = piece.split("@T")
        for j, p in enumerate(sub):
            if j:
                parts.append(tenant)
            parts.append(lit(p))
    return " || ".join(parts)


def statements(d, lo, hi, stride, t0, step):
    h = d.hex("n")
    src = d.numbers(lo, hi)
    tenant = "(CASE WHEN n % 100 < 10 THEN 'bench' ELSE 'tenant-' || (n % 997) END)"
    susp = f"n % {stride} = {stride // 2}"
    done = f"n % {stride} <> {stride // 2}"
    t = f"({t0} + CAST(n AS BIGINT) * {step})"
    ev = "INSERT INTO session_events (session_id, sequence, type, data, created_at) "
    rev = "INSERT INTO execution_resource_events (run_id, sequence, type, data, created_at) "

    def event(seq, kind, data, where, at):
        return (f"{ev}SELECT 'ses_' || {h}, {seq}, '{kind}', {data}, {t} + {at} "
                f"FROM {src} WHERE {where}")

    def res_event(seq, kind, disp, frm, state, at):
        tpl = RESOURCE_EVENT.replace("@D", disp).replace("@F", frm).replace("@S", state)
        return (f"{rev}SELECT 'run_' || {h}, {seq}, '{kind}', {fill(tpl, h)}, {t} + {at} "
                f"FROM {src} WHERE {susp}")

    return [
        ("sessions",
         "INSERT INTO sessions (id, tenant_id, title, metadata, parent_session_id, revision, "
         "event_seq, created_at, updated_at) "
         f"SELECT 'ses_' || {h}, {tenant}, 'scale', '{{\"k\":\"v\"}}', NULL, 4, "
         f"CASE WHEN {susp} THEN 5 ELSE 4 END, {t}, {t} + 1500 FROM {src}"),
        ("runs (suspended)",
         "INSERT INTO runs (id, session_id, parent_run_id, state, resolved_spec_hash, sandbox_spec, "
         "input, output, error, revision, created_at, updated_at) "
         f"SELECT 'run_' || {h}, 'ses_' || {h}, NULL, 'suspended', '{HASH}', {lit(SPEC)}, "
         f"'{{\"q\":1}}', NULL, NULL, 3, {t} + 100, {t} + 1500 FROM {src} WHERE {susp}"),
        ("runs (completed)",
         "INSERT INTO runs (id, session_id, parent_run_id, state, resolved_spec_hash, sandbox_spec, "
         "input, output, error, revision, created_at, updated_at) "
         f"SELECT 'run_' || {h}, 'ses_' || {h}, NULL, 'completed', '{HASH}', NULL, "
         f"'{{\"q\":2}}', '{{\"ok\":true}}', NULL, 3, {t} + 100, {t} + 1500 FROM {src} WHERE {done}"),
        ("checkpoints",
         "INSERT INTO checkpoints (id, run_id, sequence, codec_version, state, resolved_spec_hash, "
         "created_at) "
         f"SELECT 'chk_' || {h}, 'run_' || {h}, 1, 'v1', '{{\"step\":3}}', '{HASH}', {t} + 1500 "
         f"FROM {src} WHERE {susp}"),
        ("interactions",
         "INSERT INTO interactions (id, run_id, session_id, interaction_type, status, "
         "allowed_decisions, payload, revision, requested_at, expires_at, decision, "
         "resolution_payload, resolved_by, resolved_at, tenant_id) "
         f"SELECT 'int_' || {h}, 'run_' || {h}, 'ses_' || {h}, 'approval', 'pending', "
         "'[\"approve\",\"deny\"]', '{\"command\":\"rm -rf build/\"}', 1, "
         f"{t} + 1500, NULL, NULL, NULL, NULL, NULL, {tenant} FROM {src} WHERE {susp}"),
        ("suspensions",
         "INSERT INTO suspensions (id, run_id, reason, status, checkpoint_id, interaction_id, "
         "requested_at, resolved_at) "
         f"SELECT 'sus_' || {h}, 'run_' || {h}, 'approval_required', 'pending', 'chk_' || {h}, "
         f"'int_' || {h}, {t} + 1500, NULL FROM {src} WHERE {susp}"),
        ("execution_resources",
         "INSERT INTO execution_resources (run_id, generation, provider_id, sandbox_ref, "
         "sandbox_spec, run_resolved_spec_hash, state, disposition, sandbox_checkpoint, "
         "checkpoint_lost, suspension_id, suspension_reason, blocking_job_ids, "
         "blocking_child_run_ids, release_idempotency_key, release_purpose, "
         "release_requested_at, released_at, compute_released, bind_idempotency_key, "
         "retry_count, next_retry_at, due_at, error, version, state_since, created_at, "
         "updated_at, provider_generation) "
         f"SELECT 'run_' || {h}, 1, 'local', {fill(SANDBOX_REF, h, tenant)}, {lit(SPEC)}, "
         f"'{HASH}', 'released', 'snapshot_and_terminate', {fill(CHECKPOINT_REF, h)}, 0, "
         f"'sus_' || {h}, 'approval_required', '[]', '[]', "
         f"'run_' || {h} || ':g1:sus_' || {h} || ':release', 'suspend', {t} + 1512, "
         f"{t} + 1615, 1, NULL, 0, NULL, NULL, NULL, 6, {t} + 1625, {t} + 100, {t} + 1625, 1 "
         f"FROM {src} WHERE {susp}"),
        ("session_events",
         [
             event(1, "session.created", fill('{"session_id":"ses_@@"}', h), "1 = 1", 0),
             event(2, "run.created",
                   fill('{"parent_run_id":null,"run_id":"run_@@"}', h), "1 = 1", 100),
             event(3, "run.started",
                   fill('{"run_id":"run_@@","worker_id":"worker-1"}', h), "1 = 1", 200),
             event(4, "run.suspended",
                   fill('{"checkpoint_id":"chk_@@","reason":"approval_required",'
                        '"run_id":"run_@@","suspension_id":"sus_@@"}', h), susp, 1500),
             event(5, "interaction.created",
                   fill('{"interaction_id":"int_@@","interaction_type":"approval",'
                        '"run_id":"run_@@"}', h), susp, 1500),
             event(4, "run.completed",
                   fill('{"from":"running","run_id":"run_@@","state":"completed"}', h), done, 1500),
         ]),
        ("execution_resource_events",
         [
             res_event(3, "lifecycle.active", "null", "provisioning", "active", 150),
             res_event(5, "lifecycle.release_requested", '"snapshot_and_terminate"', "active",
                       "release_requested", 1512),
             res_event(6, "lifecycle.released", '"snapshot_and_terminate"', "release_requested",
                       "released", 1615),
         ]),
    ]


def run_sqlite(path, chunks, finish):
    import sqlite3
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("PRAGMA busy_timeout = 5000")
    db.execute("PRAGMA cache_size = -1000000")
    for stmts in chunks:
        db.execute("BEGIN IMMEDIATE")
        for s in stmts:
            db.execute(s)
        db.execute("COMMIT")
        yield
    for s in finish:
        db.execute(s)
    db.close()


def run_postgres(url, chunks, finish):
    def psql(sql):
        subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", url], input=sql, text=True,
                       check=True, stdout=subprocess.DEVNULL)

    first = True
    for stmts in chunks:
        psql("BEGIN;\n" + ";\n".join(stmts) + ";\nCOMMIT;\n")
        if first:
            # Foreign-key checks of later chunks are planned for tables that are not empty.
            psql("ANALYZE;")
            first = False
        yield
    for s in finish:
        psql(s + ";")


def main():
    backend, target, sessions, suspended = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if sessions % suspended:
        raise SystemExit("SESSIONS must be a multiple of SUSPENDED")
    stride = sessions // suspended
    d = Dialect(backend)
    now = int(time.time() * 1000)
    t0 = now - 30 * 86_400_000
    step = 30 * 86_400_000 // sessions

    def chunks():
        for lo in range(1, sessions + 1, CHUNK):
            hi = min(lo + CHUNK - 1, sessions)
            stmts = []
            for _, s in statements(d, lo, hi, stride, t0, step):
                stmts.extend(s if isinstance(s, list) else [s])
            yield stmts

    if backend == "sqlite":
        # As a long-running deployment holds them: in the main file (the service never
        # runs ANALYZE on SQLite, so neither does this).
        finish = ["PRAGMA wal_checkpoint(TRUNCATE)"]
        steps = run_sqlite(target, chunks(), finish)
    else:
        # What autovacuum would have done by the time a database has grown this large.
        finish = ["VACUUM ANALYZE"]
        steps = run_postgres(target, chunks(), finish)
    start = time.monotonic()
    for i, _ in enumerate(steps, 1):
        done = min(i * CHUNK, sessions)
        print(f"seeded {done} sessions ({time.monotonic() - start:.0f} s)", file=sys.stderr)
    print(f"seeded {sessions} sessions, {suspended} suspended runs in {time.monotonic() - start:.0f} s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
