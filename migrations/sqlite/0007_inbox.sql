-- The inbox: a tenant's pending interactions across its sessions, newest first. The tenant
-- is copied from the session so that one index range serves a page.
ALTER TABLE interactions ADD COLUMN tenant_id TEXT NOT NULL DEFAULT '';
UPDATE interactions SET tenant_id = (SELECT s.tenant_id FROM sessions s WHERE s.id = interactions.session_id);
CREATE INDEX interactions_inbox ON interactions (tenant_id, requested_at DESC, id DESC) WHERE status = 'pending';
