-- How often an alert's condition came back within the hold after it resolved (the same
-- row reopened), and since when its condition is unknown for want of readings.
-- Append-only: never edit a migration that has run anywhere.
ALTER TABLE alerts ADD COLUMN flaps BIGINT NOT NULL DEFAULT 0;
ALTER TABLE alerts ADD COLUMN no_data_since_ms BIGINT;
