-- Job events by time, for the timeline's window (it read every event before).
-- Append-only: never edit a migration that has run anywhere.
CREATE INDEX job_events_at ON job_events (at_ms);
