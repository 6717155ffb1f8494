-- Resource history is for operators only: it moves out of the session log that frontends read.
CREATE TABLE execution_resource_events (
    run_id TEXT NOT NULL REFERENCES runs (id),
    sequence BIGINT NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (run_id, sequence)
);

-- Earlier entries are numbered 1, 2, … per run; later ones take the record's version, which
-- is always greater than the number of entries its run already has.
INSERT INTO execution_resource_events (run_id, sequence, type, data, created_at)
SELECT json_extract(data, '$.run_id'),
       ROW_NUMBER() OVER (PARTITION BY json_extract(data, '$.run_id') ORDER BY sequence),
       type, data, created_at
FROM session_events
WHERE type LIKE 'lifecycle.%' AND json_extract(data, '$.run_id') IS NOT NULL;

DELETE FROM session_events WHERE type LIKE 'lifecycle.%';
