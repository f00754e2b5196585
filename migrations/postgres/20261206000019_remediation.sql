-- Remediation policies: every decision a policy took on an incident (what it did, would do
-- or recommends, or which limit held it), once per incident, node, action, outcome and
-- limit; and what admins switch at run time (the kill switch, modes, open breakers).
-- Append-only: never edit a migration that has run anywhere.
CREATE TABLE remediation_decisions (
    id BIGSERIAL PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    incident_id BIGINT NOT NULL,
    cause TEXT NOT NULL,
    node TEXT NOT NULL,
    action TEXT NOT NULL,
    mode TEXT NOT NULL,
    outcome TEXT NOT NULL,
    held_by TEXT NOT NULL,
    detail TEXT NOT NULL,
    action_id BIGINT
);
CREATE UNIQUE INDEX remediation_decisions_once
    ON remediation_decisions (incident_id, node, action, outcome, held_by);
CREATE INDEX remediation_decisions_at ON remediation_decisions (at_ms);
-- key: `kill_switch`, `mode:<cause>`, `breaker:<domain>`.
CREATE TABLE remediation_settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    by_user TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    note TEXT NOT NULL
);
