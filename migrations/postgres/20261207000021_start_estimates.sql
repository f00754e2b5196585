-- Slurm's start estimates against real starts: for each run of a job that waited with an
-- estimate, the first estimate seen (and when), the last, and the start that followed.
-- Append-only: never edit a migration that has run anywhere.
CREATE TABLE start_estimates (
    job_id BIGINT NOT NULL,
    start_ms BIGINT NOT NULL,
    partition_name TEXT NOT NULL,
    first_seen_ms BIGINT NOT NULL,
    first_est_ms BIGINT NOT NULL,
    last_est_ms BIGINT NOT NULL,
    PRIMARY KEY (job_id, start_ms)
);
CREATE INDEX start_estimates_by_start ON start_estimates (start_ms);
