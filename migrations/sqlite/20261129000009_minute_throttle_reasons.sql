-- One-minute rollups: GPU-seconds throttled per reason, as the hourly ones have.
-- Append-only: never edit a migration that has run anywhere.
ALTER TABLE rollup_1m ADD COLUMN thr_sw_power_cap_s REAL NOT NULL DEFAULT 0;
ALTER TABLE rollup_1m ADD COLUMN thr_hw_slowdown_s REAL NOT NULL DEFAULT 0;
ALTER TABLE rollup_1m ADD COLUMN thr_sw_thermal_s REAL NOT NULL DEFAULT 0;
ALTER TABLE rollup_1m ADD COLUMN thr_hw_thermal_s REAL NOT NULL DEFAULT 0;
ALTER TABLE rollup_1m ADD COLUMN thr_hw_power_brake_s REAL NOT NULL DEFAULT 0;
