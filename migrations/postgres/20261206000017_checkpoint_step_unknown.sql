-- A checkpoint's step may be unknown (a save whose step nothing it wrote records): the
-- step becomes nullable and a save is keyed by its path (one path, one save), so saves of
-- unknown step do not overwrite one another. Rows of one path kept once: the latest step.
-- Append-only: never edit a migration that has run anywhere.
ALTER TABLE checkpoints DROP CONSTRAINT checkpoints_pkey;
DELETE FROM checkpoints a USING checkpoints b
    WHERE a.job_id = b.job_id AND a.path = b.path AND a.step < b.step;
ALTER TABLE checkpoints ALTER COLUMN step DROP NOT NULL;
ALTER TABLE checkpoints ADD PRIMARY KEY (job_id, path);
