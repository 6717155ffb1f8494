-- What a pending interaction's deadline does (fail its run, cancel it, or decide for it),
-- and when the deadline is announced (cleared once announced).
ALTER TABLE interactions ADD COLUMN on_expiry TEXT NOT NULL DEFAULT 'fail' CHECK (on_expiry IN ('fail', 'cancel', 'decide'));
ALTER TABLE interactions ADD COLUMN expiry_decision TEXT;
ALTER TABLE interactions ADD COLUMN warn_at BIGINT;
CREATE INDEX interactions_warning ON interactions (warn_at) WHERE status = 'pending' AND warn_at IS NOT NULL;
