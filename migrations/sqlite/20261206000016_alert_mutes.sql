-- Who silenced an alert, when and why (acknowledgements already carry theirs).
-- Append-only: never edit a migration that has run anywhere.
ALTER TABLE alerts ADD COLUMN silenced_by TEXT;
ALTER TABLE alerts ADD COLUMN silenced_ms BIGINT;
ALTER TABLE alerts ADD COLUMN silence_note TEXT;
