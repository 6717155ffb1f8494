-- The provider's own generation of the sandbox's compute, which grants name; NULL until a
-- provision, attach or restore has succeeded.
ALTER TABLE execution_resources ADD COLUMN provider_generation BIGINT;
