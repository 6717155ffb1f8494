-- What an operator allows one tenant beyond the defaults (a tenant without a row has none):
-- `allow_host_network` lets its runs ask for `network: host`.
CREATE TABLE tenant_policies (
    tenant_id TEXT PRIMARY KEY NOT NULL,
    allow_host_network BIGINT NOT NULL CHECK (allow_host_network IN (0, 1)),
    updated_at BIGINT NOT NULL
);
