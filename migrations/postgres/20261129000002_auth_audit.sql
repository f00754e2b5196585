-- Users, sessions and the audit log. Append-only: never edit a migration that has run anywhere.
CREATE TABLE users (
    name TEXT PRIMARY KEY NOT NULL,
    -- argon2id, PHC string format (salt and parameters inside).
    password_hash TEXT NOT NULL,
    role TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);

-- Only a SHA-256 of each session token is kept: a copy of the database opens no session.
CREATE TABLE sessions (
    token_sha256 TEXT PRIMARY KEY NOT NULL,
    user_name TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_name);

-- One row per action on one target, written before the call (status 'started') and
-- completed after the end state was read back ('ok', 'failed', 'unverified').
CREATE TABLE audit (
    id BIGSERIAL PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    user_name TEXT NOT NULL,
    role TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL,
    status TEXT NOT NULL,
    result TEXT NOT NULL DEFAULT '',
    finished_ms BIGINT
);
CREATE INDEX audit_at ON audit (at_ms);
