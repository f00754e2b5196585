-- Actions as durable work. Append-only: never edit a migration that has run anywhere.

-- One row per action: the record of intent, written with every target's audit row in one
-- transaction before anything is called. state: queued, running, done, or stopped (the
-- audit log could not be written mid-action; the note names what was done).
CREATE TABLE actions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms BIGINT NOT NULL,
    user_name TEXT NOT NULL,
    role TEXT NOT NULL,
    action TEXT NOT NULL,
    detail TEXT NOT NULL,
    state TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    finished_ms BIGINT
);
CREATE INDEX actions_state ON actions (state);

-- Each audit row belongs to its action (NULL for rows from before); it is 'pending' until
-- its call, 'calling' from just before the call (called_ms; for a requeue, the restart
-- count it had in before_value) until the read-back, then final. A restart reconciles
-- 'calling' rows by reading the scheduler back, never by calling again.
ALTER TABLE audit ADD COLUMN action_id BIGINT;
ALTER TABLE audit ADD COLUMN called_ms BIGINT;
ALTER TABLE audit ADD COLUMN before_value TEXT NOT NULL DEFAULT '';
CREATE INDEX audit_action ON audit (action_id);
