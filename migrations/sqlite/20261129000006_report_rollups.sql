-- Report rollups: per hour and group (cluster, account, partition, user, rack, domain),
-- GPU-seconds by state, losses, energy and rack shares, added to as the hour goes.
-- report_1d holds the same per UTC day, so a 90-day report sums 90 rows per group, not 2,160.
-- Append-only: never edit a migration that has run anywhere.
CREATE TABLE report_1h (
    kind TEXT NOT NULL,
    group_key TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    capacity_gs REAL NOT NULL,
    allocated_gs REAL NOT NULL,
    busy_gs REAL NOT NULL,
    drained_gs REAL NOT NULL,
    down_gs REAL NOT NULL,
    throttle_lost_gs REAL NOT NULL,
    failure_lost_gs REAL NOT NULL,
    energy_wh REAL NOT NULL,
    rack_share_s REAL NOT NULL,
    PRIMARY KEY (kind, at_ms, group_key)
);

CREATE TABLE report_1d (
    kind TEXT NOT NULL,
    group_key TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    capacity_gs REAL NOT NULL,
    allocated_gs REAL NOT NULL,
    busy_gs REAL NOT NULL,
    drained_gs REAL NOT NULL,
    down_gs REAL NOT NULL,
    throttle_lost_gs REAL NOT NULL,
    failure_lost_gs REAL NOT NULL,
    energy_wh REAL NOT NULL,
    rack_share_s REAL NOT NULL,
    PRIMARY KEY (kind, at_ms, group_key)
);
