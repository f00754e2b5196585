-- NCCL latency samples posted by training jobs, alerts and webhook deliveries.
-- Append-only: never edit a migration that has run anywhere.
CREATE TABLE nccl_samples (
    job_id BIGINT NOT NULL,
    step BIGINT NOT NULL,
    at_ms BIGINT NOT NULL,
    latency_us REAL NOT NULL,
    message_bytes BIGINT,
    PRIMARY KEY (job_id, step)
);

-- One row per firing; at most one open (firing) row per rule and subject.
CREATE TABLE alerts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    rule TEXT NOT NULL,
    subject TEXT NOT NULL,
    severity TEXT NOT NULL,
    summary TEXT NOT NULL,
    link TEXT NOT NULL,
    state TEXT NOT NULL,
    started_ms BIGINT NOT NULL,
    resolved_ms BIGINT,
    acked_by TEXT,
    acked_ms BIGINT,
    ack_note TEXT,
    silenced_until_ms BIGINT
);
CREATE UNIQUE INDEX alerts_open ON alerts (rule, subject) WHERE state = 'firing';
CREATE INDEX alerts_started ON alerts (started_ms);

CREATE TABLE webhook_deliveries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    alert_id BIGINT NOT NULL,
    event TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    attempt BIGINT NOT NULL,
    status TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX webhook_deliveries_alert ON webhook_deliveries (alert_id);
