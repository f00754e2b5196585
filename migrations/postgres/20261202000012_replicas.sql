-- Several replicas on one database. Append-only: never edit a migration that has run anywhere.

-- The leader lease: one row. A replica holds it while expires_ms (the database's clock on
-- PostgreSQL) is ahead; each new holder raises term. accounted_ms is how far report deltas
-- have been added (source time), written in the same transaction as the deltas and only
-- by the holder of the current term: the fence that keeps reports from double-counting.
CREATE TABLE leader_lease (
    id BIGINT PRIMARY KEY,
    holder TEXT NOT NULL,
    term BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL,
    accounted_ms BIGINT
);
INSERT INTO leader_lease (id, holder, term, expires_ms, accounted_ms) VALUES (1, '', 0, 0, NULL);

-- Standbys say they are there (the leader publishes ticks only while one is).
CREATE TABLE replicas (
    holder TEXT PRIMARY KEY,
    seen_ms BIGINT NOT NULL,
    addr TEXT NOT NULL DEFAULT ''
);

-- The leader's newest ticks for standbys (gzip'd JSON); a few are kept.
CREATE TABLE replica_ticks (
    id BIGSERIAL PRIMARY KEY,
    term BIGINT NOT NULL,
    published_ms BIGINT NOT NULL,
    body BYTEA NOT NULL
);

-- The per-user action limit counts a user's last minute of actions, on any replica.
CREATE INDEX actions_user_at ON actions (user_name, at_ms);
