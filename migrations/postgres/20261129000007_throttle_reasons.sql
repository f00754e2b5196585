-- Hourly rollups: GPU-seconds throttled per reason (SW power cap, HW slowdown, SW thermal,
-- HW thermal, HW power brake), beside the total.
-- Append-only: never edit a migration that has run anywhere.
ALTER TABLE rollup_1h ADD COLUMN thr_sw_power_cap_s DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE rollup_1h ADD COLUMN thr_hw_slowdown_s DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE rollup_1h ADD COLUMN thr_sw_thermal_s DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE rollup_1h ADD COLUMN thr_hw_thermal_s DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE rollup_1h ADD COLUMN thr_hw_power_brake_s DOUBLE PRECISION NOT NULL DEFAULT 0;
