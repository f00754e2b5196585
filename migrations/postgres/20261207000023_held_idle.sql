-- GPU-seconds of running jobs' GPUs held idle past alerts.idle_gpu_minutes, per group and
-- hour/day (see server/src/aggregate/idle.rs). Append-only: never edit a migration that
-- has run.
ALTER TABLE report_1h ADD COLUMN held_idle_gs DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE report_1d ADD COLUMN held_idle_gs DOUBLE PRECISION NOT NULL DEFAULT 0;
