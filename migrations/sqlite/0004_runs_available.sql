-- Runtime claims walk runs in the order they became available (lease expiry, or creation
-- for a run without a lease) and stop at now, so live leases are never scanned.
DROP INDEX runs_claimable;
CREATE INDEX runs_available ON runs ((COALESCE(lease_expires_at, created_at)), id)
    WHERE state IN ('queued', 'running', 'resuming');
