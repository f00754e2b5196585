-- Gantry schema v1 (SQLite). Append-only: never edit a migration that has run anywhere.
-- Integers are BIGINT and times Unix milliseconds so one set of queries serves both dialects.
CREATE TABLE racks (
    name TEXT PRIMARY KEY NOT NULL,
    row_name TEXT NOT NULL,
    position BIGINT NOT NULL,
    power_limit_watts REAL NOT NULL,
    cooling TEXT NOT NULL,
    inlet_limit_celsius REAL NOT NULL
);

CREATE TABLE nodes (
    name TEXT PRIMARY KEY NOT NULL,
    rack TEXT NOT NULL,
    u_position BIGINT NOT NULL,
    gpus BIGINT NOT NULL
);

CREATE TABLE jobs (
    id BIGINT PRIMARY KEY NOT NULL,
    name TEXT NOT NULL,
    user_name TEXT NOT NULL,
    account TEXT NOT NULL,
    partition_name TEXT NOT NULL,
    state TEXT NOT NULL,
    nodes TEXT NOT NULL,
    gpus BIGINT NOT NULL,
    submit_ms BIGINT NOT NULL,
    start_ms BIGINT,
    end_ms BIGINT,
    requeue_count BIGINT NOT NULL DEFAULT 0,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX jobs_state ON jobs (state);
CREATE INDEX jobs_submit ON jobs (submit_ms);

CREATE TABLE job_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id BIGINT NOT NULL,
    at_ms BIGINT NOT NULL,
    state TEXT NOT NULL,
    nodes TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX job_events_once ON job_events (job_id, at_ms, state);

CREATE TABLE checkpoints (
    job_id BIGINT NOT NULL,
    step BIGINT NOT NULL,
    path TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    started_ms BIGINT NOT NULL,
    duration_ms BIGINT NOT NULL,
    complete BIGINT NOT NULL,
    PRIMARY KEY (job_id, step)
);

CREATE TABLE xid_events (
    node TEXT NOT NULL,
    gpu BIGINT NOT NULL,
    xid BIGINT NOT NULL,
    at_ms BIGINT NOT NULL,
    PRIMARY KEY (node, gpu, at_ms, xid)
);

CREATE TABLE rollup_1m (
    scope TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    power_watts_mean REAL NOT NULL,
    sm_active_mean REAL,
    gpus_throttling_max BIGINT NOT NULL,
    samples BIGINT NOT NULL,
    PRIMARY KEY (scope, at_ms)
);
