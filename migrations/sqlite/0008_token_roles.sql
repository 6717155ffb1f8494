-- A `metrics` role (read-only, not bound to a tenant) and tokens that expire. SQLite cannot
-- alter a CHECK, so the table is rebuilt.
CREATE TABLE tokens_next (
    id TEXT PRIMARY KEY NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('frontend', 'runtime', 'admin', 'metrics')),
    tenant_id TEXT,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT,
    expires_at BIGINT,
    CHECK ((role IN ('admin', 'metrics') AND tenant_id IS NULL)
        OR (role IN ('frontend', 'runtime') AND tenant_id IS NOT NULL))
);
INSERT INTO tokens_next (id, role, tenant_id, secret_hash, created_at, revoked_at)
    SELECT id, role, tenant_id, secret_hash, created_at, revoked_at FROM tokens;
DROP TABLE tokens;
ALTER TABLE tokens_next RENAME TO tokens;
