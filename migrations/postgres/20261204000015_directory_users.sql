-- Users signed in by a directory (LDAP) or a single sign-on provider (OpenID Connect).
-- Append-only: never edit a migration that has run anywhere.

-- Where a user comes from: 'local' (a password hash here), 'ldap' or 'oidc' (the role
-- follows the directory's groups or the provider's claim at each sign-in; the password
-- hash is a marker that never verifies).
ALTER TABLE users ADD COLUMN origin TEXT NOT NULL DEFAULT 'local';
