-- The audit trail: append-only records, one hash chain per tenant (`*` for changes that
-- belong to none). No foreign keys: records outlive the sessions, runs and tokens they name.
CREATE TABLE audit_records (
    tenant_id TEXT NOT NULL,
    sequence BIGINT NOT NULL,
    at BIGINT NOT NULL,
    kind TEXT NOT NULL,
    actor TEXT NOT NULL,
    actor_name TEXT,
    subject TEXT NOT NULL,
    data TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (tenant_id, sequence)
);
CREATE INDEX audit_records_at ON audit_records (tenant_id, at);

-- Each chain's last record, locked by the transaction that appends to it.
CREATE TABLE audit_heads (
    tenant_id TEXT PRIMARY KEY NOT NULL,
    sequence BIGINT NOT NULL,
    hash TEXT NOT NULL
);
