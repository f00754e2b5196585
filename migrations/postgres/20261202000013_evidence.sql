-- Hardware evidence the readings show as a counter stepping up (a double-bit ECC error, an
-- InfiniBand link that went down), for attributing job interruptions. XIDs stay in
-- xid_events. gpu is -1 for what belongs to the node (its InfiniBand ports).
-- Append-only: never edit a migration that has run anywhere.
CREATE TABLE evidence_events (
    node TEXT NOT NULL,
    gpu BIGINT NOT NULL,
    kind TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    amount BIGINT NOT NULL,
    PRIMARY KEY (node, gpu, kind, at_ms)
);
CREATE INDEX evidence_events_at ON evidence_events (at_ms);
CREATE INDEX xid_events_at ON xid_events (at_ms);
