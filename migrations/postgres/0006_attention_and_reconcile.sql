-- A release that cannot be confirmed within its attempt budget is `needs_attention`; a
-- release the reconciler re-issues has purpose `reconcile`.
ALTER TABLE execution_resources DROP CONSTRAINT execution_resources_state_check;
ALTER TABLE execution_resources ADD CONSTRAINT execution_resources_state_check
    CHECK (state IN ('provisioning', 'active', 'release_blocked', 'release_requested', 'release_failed', 'released', 'restore_requested', 'needs_attention'));
ALTER TABLE execution_resources DROP CONSTRAINT execution_resources_release_purpose_check;
ALTER TABLE execution_resources ADD CONSTRAINT execution_resources_release_purpose_check
    CHECK (release_purpose IN ('suspend', 'forced_terminate', 'run_ended', 'reconcile'));

-- Work that one replica at a time does (the reconciler), held like a run lease.
CREATE TABLE singleton_leases (
    name TEXT PRIMARY KEY NOT NULL,
    holder TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
