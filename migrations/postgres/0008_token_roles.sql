-- A `metrics` role (read-only, not bound to a tenant) and tokens that expire.
ALTER TABLE tokens DROP CONSTRAINT tokens_role_check;
ALTER TABLE tokens DROP CONSTRAINT tokens_check;
ALTER TABLE tokens ADD CONSTRAINT tokens_role_check
    CHECK (role IN ('frontend', 'runtime', 'admin', 'metrics'));
ALTER TABLE tokens ADD CONSTRAINT tokens_tenant_check
    CHECK ((role IN ('admin', 'metrics') AND tenant_id IS NULL)
        OR (role IN ('frontend', 'runtime') AND tenant_id IS NOT NULL));
ALTER TABLE tokens ADD COLUMN expires_at BIGINT;
