-- The badput ledger: allocated GPU-seconds split by what they did (see
-- server/src/reports/accumulate.rs), per group and hour/day; 'job' rows are per job id.
-- Append-only: never edit a migration that has run anywhere.
ALTER TABLE report_1h ADD COLUMN startup_gs REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1h ADD COLUMN unseen_gs REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1h ADD COLUMN checkpoint_gs REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1h ADD COLUMN hung_gs REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1h ADD COLUMN computing_gs REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1h ADD COLUMN slowed_gs REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1h ADD COLUMN reexec_gs REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1h ADD COLUMN restart_wait_gs REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1d ADD COLUMN startup_gs REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1d ADD COLUMN unseen_gs REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1d ADD COLUMN checkpoint_gs REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1d ADD COLUMN hung_gs REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1d ADD COLUMN computing_gs REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1d ADD COLUMN slowed_gs REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1d ADD COLUMN reexec_gs REAL NOT NULL DEFAULT 0;
ALTER TABLE report_1d ADD COLUMN restart_wait_gs REAL NOT NULL DEFAULT 0;
