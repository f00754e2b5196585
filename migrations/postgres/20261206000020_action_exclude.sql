-- A requeue's nodes its jobs must not run on again (Slurm's ExcNodeList), comma-separated
-- node names; empty for every other action. Kept with the action so that one found
-- unfinished at start-up runs as it was asked.
-- Append-only: never edit a migration that has run anywhere.
ALTER TABLE actions ADD COLUMN exclude TEXT NOT NULL DEFAULT '';
