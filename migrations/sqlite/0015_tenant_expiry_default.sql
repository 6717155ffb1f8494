-- The deadline a tenant's interactions get when they name neither a deadline nor a policy.
ALTER TABLE tenant_policies ADD COLUMN expires_in_seconds BIGINT;
ALTER TABLE tenant_policies ADD COLUMN warn_before_seconds BIGINT;
ALTER TABLE tenant_policies ADD COLUMN on_expiry TEXT CHECK (on_expiry IN ('fail', 'cancel', 'decide'));
ALTER TABLE tenant_policies ADD COLUMN expiry_decision TEXT;
