-- A checkpoint's step may be unknown (a save whose step nothing it wrote records): the
-- step becomes nullable and a save is keyed by its path (one path, one save), so saves of
-- unknown step do not overwrite one another. Rows of one path kept once: the latest step.
-- Append-only: never edit a migration that has run anywhere.
CREATE TABLE checkpoints_by_path (
    job_id BIGINT NOT NULL,
    step BIGINT,
    path TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    started_ms BIGINT NOT NULL,
    duration_ms BIGINT NOT NULL,
    complete BIGINT NOT NULL,
    PRIMARY KEY (job_id, path)
);
INSERT OR REPLACE INTO checkpoints_by_path
    SELECT job_id, step, path, size_bytes, started_ms, duration_ms, complete
    FROM checkpoints ORDER BY job_id, step;
DROP TABLE checkpoints;
ALTER TABLE checkpoints_by_path RENAME TO checkpoints;
