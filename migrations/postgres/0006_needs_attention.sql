-- A release that cannot be confirmed within its attempt budget is `needs_attention`.
ALTER TABLE execution_resources DROP CONSTRAINT execution_resources_state_check;
ALTER TABLE execution_resources ADD CONSTRAINT execution_resources_state_check
    CHECK (state IN ('provisioning', 'active', 'release_blocked', 'release_requested', 'release_failed', 'released', 'restore_requested', 'needs_attention'));
