-- The justification a person gave with a reply, kept with its resolution.
ALTER TABLE interactions ADD COLUMN resolution_comment TEXT;
