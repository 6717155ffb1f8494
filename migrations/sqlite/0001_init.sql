-- Sessions, runs, interactions, suspensions, checkpoints, jobs, the event log,
-- tokens, idempotency keys, providers and settings. Timestamps are epoch milliseconds.

CREATE TABLE sessions (
    id TEXT PRIMARY KEY NOT NULL,
    tenant_id TEXT NOT NULL,
    title TEXT,
    metadata TEXT NOT NULL,
    parent_session_id TEXT REFERENCES sessions (id),
    revision BIGINT NOT NULL,
    event_seq BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX sessions_tenant ON sessions (tenant_id, created_at);

CREATE TABLE runs (
    id TEXT PRIMARY KEY NOT NULL,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    parent_run_id TEXT REFERENCES runs (id),
    state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'suspend_requested', 'suspended', 'resuming', 'completed', 'failed', 'cancelled')),
    resolved_spec_hash TEXT NOT NULL,
    sandbox_spec TEXT,
    input TEXT NOT NULL,
    output TEXT,
    error TEXT,
    revision BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    lease_id TEXT UNIQUE,
    lease_holder TEXT,
    fencing_token BIGINT,
    lease_expires_at BIGINT
);
CREATE INDEX runs_session ON runs (session_id, created_at, id);
CREATE INDEX runs_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
CREATE INDEX runs_claimable ON runs (created_at, id) WHERE state IN ('queued', 'running', 'resuming');
CREATE INDEX runs_lease_holder ON runs (lease_holder) WHERE lease_holder IS NOT NULL;

CREATE TABLE checkpoints (
    id TEXT PRIMARY KEY NOT NULL,
    run_id TEXT NOT NULL REFERENCES runs (id),
    sequence BIGINT NOT NULL,
    codec_version TEXT NOT NULL,
    state TEXT NOT NULL,
    resolved_spec_hash TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    CONSTRAINT checkpoints_run_sequence UNIQUE (run_id, sequence)
);

CREATE TABLE interactions (
    id TEXT PRIMARY KEY NOT NULL,
    run_id TEXT NOT NULL REFERENCES runs (id),
    session_id TEXT NOT NULL REFERENCES sessions (id),
    interaction_type TEXT NOT NULL CHECK (interaction_type IN ('approval', 'permission', 'user_input', 'credential', 'elicitation')),
    status TEXT NOT NULL CHECK (status IN ('pending', 'resolved', 'expired', 'cancelled')),
    allowed_decisions TEXT NOT NULL,
    payload TEXT NOT NULL,
    revision BIGINT NOT NULL,
    requested_at BIGINT NOT NULL,
    expires_at BIGINT,
    decision TEXT,
    resolution_payload TEXT,
    resolved_by TEXT,
    resolved_at BIGINT
);
CREATE INDEX interactions_pending ON interactions (session_id, requested_at, id) WHERE status = 'pending';
CREATE INDEX interactions_expiry ON interactions (expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;
CREATE INDEX interactions_run ON interactions (run_id);

CREATE TABLE suspensions (
    id TEXT PRIMARY KEY NOT NULL,
    run_id TEXT NOT NULL REFERENCES runs (id),
    reason TEXT NOT NULL CHECK (reason IN ('approval_required', 'permission_required', 'input_required', 'manual_pause', 'external_event', 'resource_wait', 'policy_hold')),
    status TEXT NOT NULL CHECK (status IN ('pending', 'resolving', 'resolved', 'cancelled')),
    checkpoint_id TEXT NOT NULL REFERENCES checkpoints (id),
    interaction_id TEXT REFERENCES interactions (id),
    requested_at BIGINT NOT NULL,
    resolved_at BIGINT
);
CREATE INDEX suspensions_run ON suspensions (run_id, requested_at);

CREATE TABLE jobs (
    id TEXT PRIMARY KEY NOT NULL,
    run_id TEXT NOT NULL REFERENCES runs (id),
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    pause_behavior TEXT NOT NULL CHECK (pause_behavior IN ('continue', 'detach', 'cancel')),
    execution_affinity TEXT NOT NULL CHECK (execution_affinity IN ('sandbox', 'external')),
    state TEXT NOT NULL CHECK (state IN ('created', 'running', 'completed', 'failed', 'killed', 'orphaned')),
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX jobs_run ON jobs (run_id, created_at, id);

CREATE TABLE session_events (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    sequence BIGINT NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, sequence)
);

CREATE TABLE tokens (
    id TEXT PRIMARY KEY NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('frontend', 'runtime', 'admin')),
    tenant_id TEXT,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT,
    CHECK ((role = 'admin' AND tenant_id IS NULL) OR (role <> 'admin' AND tenant_id IS NOT NULL))
);

CREATE TABLE idempotency_keys (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('in_flight', 'done')),
    response_status BIGINT,
    response_body BLOB,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_age ON idempotency_keys (updated_at);

CREATE TABLE providers (
    provider_id TEXT PRIMARY KEY NOT NULL,
    base_url TEXT NOT NULL,
    token TEXT NOT NULL,
    capabilities TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE settings (
    key TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);

-- The monotonic fencing-token source (incremented inside the single-writer transaction).
CREATE TABLE counters (
    name TEXT PRIMARY KEY NOT NULL,
    value BIGINT NOT NULL
);
INSERT INTO counters (name, value) VALUES ('fencing_token', 0);
