-- A token's display name, and the name of the token that resolved an interaction as it was
-- when it did (evidence that later renames and revocations do not change).
ALTER TABLE tokens ADD COLUMN name TEXT;
ALTER TABLE interactions ADD COLUMN resolved_by_name TEXT;
