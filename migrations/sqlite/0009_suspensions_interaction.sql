-- A reply marks the pending suspension of each interaction it resolves: found by the
-- interaction instead of a scan of every suspension.
CREATE INDEX suspensions_pending_interaction ON suspensions (interaction_id)
    WHERE status = 'pending';
