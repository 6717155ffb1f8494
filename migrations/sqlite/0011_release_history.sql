-- One row per confirmed release, written with the record's move to `released`: release latency
-- and attempts are measured over every release, not only over records still released now.
CREATE TABLE resource_releases (
    run_id TEXT NOT NULL REFERENCES runs (id),
    version BIGINT NOT NULL,
    released_at BIGINT NOT NULL,
    latency_ms BIGINT NOT NULL,
    attempts BIGINT NOT NULL,
    PRIMARY KEY (run_id, version)
);
CREATE INDEX resource_releases_recent ON resource_releases (released_at);

INSERT INTO resource_releases (run_id, version, released_at, latency_ms, attempts)
SELECT run_id, version, released_at, released_at - release_requested_at, retry_count + 1
FROM execution_resources
WHERE state = 'released' AND released_at IS NOT NULL AND release_requested_at IS NOT NULL;
