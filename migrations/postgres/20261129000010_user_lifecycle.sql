-- User, session and ingest-token lifecycle. Append-only: never edit a migration that has run anywhere.

-- A disabled user cannot sign in, and a trusted proxy naming one gets no role.
ALTER TABLE users ADD COLUMN disabled BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN disabled_ms BIGINT;

-- Each session: an opaque id for the admin API (never the token or its digest), when it
-- was last seen (updated at most once a minute) and its idle timeout, fixed at sign-in
-- as its absolute expiry is. Sessions from before get a fresh idle window.
ALTER TABLE sessions ADD COLUMN id TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN last_seen_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN idle_ms BIGINT NOT NULL DEFAULT 3600000;
UPDATE sessions SET id = substr(md5(random()::text || token_sha256), 1, 16),
    last_seen_ms = (extract(epoch FROM now()) * 1000)::BIGINT;
CREATE UNIQUE INDEX sessions_id ON sessions (id);

-- One row: a counter bumped in the same transaction as every revocation of sessions and
-- every change of a user, so live streams notice with one cheap read.
CREATE TABLE auth_epoch (
    id BIGINT PRIMARY KEY NOT NULL,
    epoch BIGINT NOT NULL
);
INSERT INTO auth_epoch (id, epoch) VALUES (1, 0);

-- Named ingest tokens, kept only as a SHA-256; account '' writes for any account.
CREATE TABLE ingest_tokens (
    name TEXT PRIMARY KEY NOT NULL,
    token_sha256 TEXT NOT NULL UNIQUE,
    account TEXT NOT NULL DEFAULT '',
    created_ms BIGINT NOT NULL,
    last_used_ms BIGINT
);
