-- Node state transitions (drains, downtime), for the timeline.
-- Append-only: never edit a migration that has run anywhere.
CREATE TABLE node_events (
    node TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (node, at_ms)
);
CREATE INDEX node_events_at ON node_events (at_ms);
