-- The GPUs' own energy per group and hour/day (see server/src/reports/accumulate.rs):
-- DCGM's energy counter's increase where it counts, else their power integrated; and of
-- it, what was integrated (estimated). Append-only: never edit a migration that has run.
ALTER TABLE report_1h ADD COLUMN gpu_energy_wh REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1h ADD COLUMN gpu_energy_est_wh REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1d ADD COLUMN gpu_energy_wh REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1d ADD COLUMN gpu_energy_est_wh REAL NOT NULL DEFAULT 0;
