-- A release that cannot be confirmed within its attempt budget is `needs_attention`; a
-- release the reconciler re-issues has purpose `reconcile`. SQLite cannot alter a CHECK, so
-- the table is rebuilt with the same columns in the same order.
CREATE TABLE execution_resources_next (
    run_id TEXT PRIMARY KEY NOT NULL REFERENCES runs (id),
    generation BIGINT NOT NULL CHECK (generation >= 0),
    provider_id TEXT NOT NULL,
    sandbox_ref TEXT,
    sandbox_spec TEXT NOT NULL,
    run_resolved_spec_hash TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('provisioning', 'active', 'release_blocked', 'release_requested', 'release_failed', 'released', 'restore_requested', 'needs_attention')),
    disposition TEXT CHECK (disposition IN ('detach', 'terminate', 'snapshot_and_terminate')),
    sandbox_checkpoint TEXT,
    checkpoint_lost BIGINT NOT NULL CHECK (checkpoint_lost IN (0, 1)),
    suspension_id TEXT,
    suspension_reason TEXT CHECK (suspension_reason IN ('approval_required', 'permission_required', 'input_required', 'manual_pause', 'external_event', 'resource_wait', 'policy_hold')),
    blocking_job_ids TEXT NOT NULL,
    blocking_child_run_ids TEXT NOT NULL,
    release_idempotency_key TEXT,
    release_purpose TEXT CHECK (release_purpose IN ('suspend', 'forced_terminate', 'run_ended', 'reconcile')),
    release_requested_at BIGINT,
    released_at BIGINT,
    compute_released BIGINT NOT NULL CHECK (compute_released IN (0, 1)),
    bind_idempotency_key TEXT,
    retry_count BIGINT NOT NULL CHECK (retry_count >= 0),
    next_retry_at BIGINT,
    due_at BIGINT,
    error TEXT,
    version BIGINT NOT NULL,
    -- When the record entered its current state (blocked age).
    state_since BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    provider_generation BIGINT
);
INSERT INTO execution_resources_next SELECT * FROM execution_resources;
DROP TABLE execution_resources;
ALTER TABLE execution_resources_next RENAME TO execution_resources;
CREATE INDEX execution_resources_due ON execution_resources (due_at, run_id) WHERE due_at IS NOT NULL;
CREATE INDEX execution_resources_state ON execution_resources (state, state_since, retry_count);
CREATE INDEX execution_resources_released ON execution_resources (released_at, release_requested_at, state) WHERE state = 'released';

-- Work that one replica at a time does (the reconciler), held like a run lease.
CREATE TABLE singleton_leases (
    name TEXT PRIMARY KEY NOT NULL,
    holder TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
