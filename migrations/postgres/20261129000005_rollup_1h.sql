-- One-hour rollups: mean, min and max power, energy, SM activity, throttling.
-- Append-only: never edit a migration that has run anywhere.
CREATE TABLE rollup_1h (
    scope TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    power_watts_mean DOUBLE PRECISION NOT NULL,
    power_watts_min DOUBLE PRECISION NOT NULL,
    power_watts_max DOUBLE PRECISION NOT NULL,
    energy_wh DOUBLE PRECISION NOT NULL,
    sm_active_mean DOUBLE PRECISION,
    gpus_throttling_max BIGINT NOT NULL,
    throttled_gpu_seconds DOUBLE PRECISION NOT NULL,
    samples BIGINT NOT NULL,
    PRIMARY KEY (scope, at_ms)
);
