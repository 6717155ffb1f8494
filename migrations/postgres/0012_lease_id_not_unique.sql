-- A lease id is random, so a unique index adds nothing but locks: with it every lease change
-- takes the row's FOR UPDATE lock, which waits for (and deadlocks with) the foreign-key checks
-- of a child's creation. A plain index keeps heartbeats by lease id fast.
-- (SQLite writes one transaction at a time and keeps its column constraint.)
ALTER TABLE runs DROP CONSTRAINT runs_lease_id_key;
CREATE INDEX runs_lease_id ON runs (lease_id) WHERE lease_id IS NOT NULL;
