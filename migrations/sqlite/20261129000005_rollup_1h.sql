-- One-hour rollups: mean, min and max power, energy, SM activity, throttling.
-- Append-only: never edit a migration that has run anywhere.
CREATE TABLE rollup_1h (
    scope TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    power_watts_mean REAL NOT NULL,
    power_watts_min REAL NOT NULL,
    power_watts_max REAL NOT NULL,
    energy_wh REAL NOT NULL,
    sm_active_mean REAL,
    gpus_throttling_max BIGINT NOT NULL,
    throttled_gpu_seconds REAL NOT NULL,
    samples BIGINT NOT NULL,
    PRIMARY KEY (scope, at_ms)
);
