//! Users, sessions and the audit log: the same portable SQL on both databases.
//!
//! Every change of a user (password, role, disabled, deleted) and every revocation of a
//! session runs in one transaction with the bump of `auth_epoch`, so that whoever holds
//! sessions open (live streams) notices with one cheap read ([`Store::auth_epoch`]) and
//! rechecks them all in one query ([`Store::sessions_valid`]).

use std::collections::HashSet;

use app::actions::{AuditEntry, AuditFilter, Role};
use app::model::UnixMs;
use sqlx::Row;

use super::{Result, Store, StoreError};

/// A stored user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserRow {
    pub name: String,
    pub password_hash: String,
    pub role: Role,
    /// A disabled user cannot sign in, and a proxy naming one gets no role.
    pub disabled: bool,
    /// Where the user comes from: a local password, or a directory that says who they are.
    pub origin: Origin,
}

/// Where a user comes from (`users.origin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A password hash here (`gantry user add`).
    Local,
    /// An LDAP directory: the role follows its groups at each sign-in and check.
    Ldap,
    /// An OpenID provider: the role follows its claim at each sign-in.
    Oidc,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Local => "local",
            Origin::Ldap => "ldap",
            Origin::Oidc => "oidc",
        }
    }

    fn parse(s: &str) -> Result<Origin> {
        match s {
            "local" => Ok(Origin::Local),
            "ldap" => Ok(Origin::Ldap),
            "oidc" => Ok(Origin::Oidc),
            _ => Err(StoreError::Corrupt(format!("unknown user origin {s:?}"))),
        }
    }

    /// The password hash of a directory user: not a PHC string, so it never verifies.
    fn marker(self) -> String {
        format!("!{}", self.as_str())
    }
}

/// What [`Store::put_directory_user`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirectoryPut {
    /// The user is new here.
    Added,
    /// The role changed.
    RoleChanged,
    /// Nothing changed.
    Same,
    /// A user of that name comes from elsewhere (a local user, or the other directory):
    /// nothing was written.
    Taken(Origin),
}

pub use app::actions::{SessionInfo, UserInfo};

/// A session's last-seen time is written at most this often: a request within it of
/// the last write writes nothing.
pub const LAST_SEEN_EVERY_MS: i64 = 60_000;

/// Digests per query of [`Store::sessions_valid`] (well under every placeholder limit).
const VALID_CHUNK: usize = 500;

/// A session valid at `$now` (a placeholder number) joined with its user `u`.
fn valid_at(now: &str) -> String {
    format!("s.expires_ms > {now} AND s.last_seen_ms + s.idle_ms > {now} AND u.disabled = 0")
}

fn role_of(s: &str) -> Result<Role> {
    Role::parse(s).ok_or_else(|| StoreError::Corrupt(format!("unknown role {s:?}")))
}

/// Longest audit listing served at once.
pub const AUDIT_MAX_ROWS: u32 = 10_000;

type Tx<'a> = sqlx::Transaction<'a, sqlx::Any>;

/// Ends every session of `user` and bumps the epoch, in `tx`; how many sessions ended.
async fn end_sessions_of(tx: &mut Tx<'_>, user: &str) -> Result<u64> {
    let r = sqlx::query("DELETE FROM sessions WHERE user_name = $1")
        .bind(user)
        .execute(&mut **tx)
        .await?;
    bump_epoch(tx).await?;
    Ok(r.rows_affected())
}

async fn bump_epoch(tx: &mut Tx<'_>) -> Result<()> {
    sqlx::query("UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1")
        .execute(&mut **tx)
        .await?;
    Ok(())
}

impl Store {
    /// Creates or replaces a user (a new password or role for an existing name, which
    /// ends that user's sessions; a disabled user stays disabled), bumping the epoch. How
    /// many sessions ended.
    pub async fn put_user(
        &self,
        name: &str,
        password_hash: &str,
        role: Role,
        now_ms: UnixMs,
    ) -> Result<u64> {
        let mut tx = self.pool.begin().await?;
        // A write first: on SQLite a transaction that reads and then writes fails at once
        // ("database is locked") when another connection wrote in between.
        bump_epoch(&mut tx).await?;
        let existed = sqlx::query("SELECT 1 FROM users WHERE name = $1")
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?
            .is_some();
        sqlx::query(
            "INSERT INTO users (name, password_hash, role, created_ms) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (name) DO UPDATE SET password_hash = excluded.password_hash, role = excluded.role, \
             origin = 'local'",
        )
        .bind(name)
        .bind(password_hash)
        .bind(role.as_str())
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
        let ended = if existed {
            sqlx::query("DELETE FROM sessions WHERE user_name = $1")
                .bind(name)
                .execute(&mut *tx)
                .await?
                .rows_affected()
        } else {
            0
        };
        tx.commit().await?;
        Ok(ended)
    }

    pub async fn user(&self, name: &str) -> Result<Option<UserRow>> {
        let row = sqlx::query(
            "SELECT name, password_hash, role, disabled, origin FROM users WHERE name = $1",
        )
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            Ok(UserRow {
                name: r.try_get("name")?,
                password_hash: r.try_get("password_hash")?,
                role: role_of(&r.try_get::<String, _>("role")?)?,
                disabled: r.try_get::<i64, _>("disabled")? != 0,
                origin: Origin::parse(&r.try_get::<String, _>("origin")?)?,
            })
        })
        .transpose()
    }

    /// Records a user whom `origin` has just vouched for, with the role it gives: added if
    /// new, its role updated if changed (its sessions then carry the new role at once; a
    /// role change bumps the epoch so that live streams recheck). A local user of that
    /// name is never overwritten by a directory.
    pub async fn put_directory_user(
        &self,
        name: &str,
        origin: Origin,
        role: Role,
        now_ms: UnixMs,
    ) -> Result<DirectoryPut> {
        let mut tx = self.pool.begin().await?;
        // A write first (see `put_user`; an UPDATE takes SQLite's write lock whether or not
        // it matches a row): the role, if this is that directory's user.
        let changed = sqlx::query(
            "UPDATE users SET role = $3 WHERE name = $1 AND origin = $2 AND role <> $3",
        )
        .bind(name)
        .bind(origin.as_str())
        .bind(role.as_str())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if changed > 0 {
            bump_epoch(&mut tx).await?;
            tx.commit().await?;
            return Ok(DirectoryPut::RoleChanged);
        }
        let existing = sqlx::query("SELECT origin FROM users WHERE name = $1")
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(r) = existing {
            let theirs = Origin::parse(&r.try_get::<String, _>("origin")?)?;
            tx.rollback().await?;
            return Ok(if theirs == origin {
                DirectoryPut::Same
            } else {
                DirectoryPut::Taken(theirs)
            });
        }
        sqlx::query(
            "INSERT INTO users (name, password_hash, role, created_ms, origin) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(name)
        .bind(origin.marker())
        .bind(role.as_str())
        .bind(now_ms)
        .bind(origin.as_str())
        .execute(&mut *tx)
        .await?;
        bump_epoch(&mut tx).await?;
        tx.commit().await?;
        Ok(DirectoryPut::Added)
    }

    /// The users of `origin` that hold a session valid at `now_ms`: whom a directory check
    /// looks up again.
    pub async fn directory_users_signed_in(
        &self,
        origin: Origin,
        now_ms: UnixMs,
    ) -> Result<Vec<(String, Role)>> {
        let rows = sqlx::query(&format!(
            "SELECT DISTINCT u.name, u.role FROM users u JOIN sessions s ON s.user_name = u.name \
             WHERE u.origin = $2 AND {} ORDER BY u.name",
            valid_at("$1")
        ))
        .bind(now_ms)
        .bind(origin.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("name")?,
                    role_of(&r.try_get::<String, _>("role")?)?,
                ))
            })
            .collect()
    }

    /// Ends every session of `name` (a directory no longer vouches for them), bumping the
    /// epoch; how many ended.
    pub async fn end_sessions(&self, name: &str) -> Result<u64> {
        let mut tx = self.pool.begin().await?;
        let n = end_sessions_of(&mut tx, name).await?;
        tx.commit().await?;
        Ok(n)
    }

    pub async fn user_count(&self) -> Result<u64> {
        let row = sqlx::query("SELECT COUNT(*) FROM users")
            .fetch_one(&self.pool)
            .await?;
        super::u64_of(row.try_get(0)?, "user count")
    }

    /// Every user, by name, with how many sessions each has valid at `now_ms`.
    pub async fn users(&self, now_ms: UnixMs) -> Result<Vec<UserInfo>> {
        let rows = sqlx::query(&format!(
            "SELECT u.name, u.role, u.disabled, u.disabled_ms, u.created_ms, u.origin, \
             (SELECT COUNT(*) FROM sessions s WHERE s.user_name = u.name AND {}) AS sessions \
             FROM users u ORDER BY u.name",
            valid_at("$1")
        ))
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(UserInfo {
                    name: r.try_get("name")?,
                    role: role_of(&r.try_get::<String, _>("role")?)?,
                    disabled: r.try_get::<i64, _>("disabled")? != 0,
                    disabled_ms: r.try_get("disabled_ms")?,
                    created_ms: r.try_get("created_ms")?,
                    sessions: super::u64_of(r.try_get("sessions")?, "session count")?,
                    origin: r.try_get("origin")?,
                })
            })
            .collect()
    }

    /// Admins that are not disabled.
    pub async fn enabled_admins(&self) -> Result<u64> {
        let row = sqlx::query("SELECT COUNT(*) FROM users WHERE role = 'admin' AND disabled = 0")
            .fetch_one(&self.pool)
            .await?;
        super::u64_of(row.try_get(0)?, "admin count")
    }

    /// Runs `update` (binding `$1` to the name, then `binds`) on user `name` and, if it
    /// changed the row, ends the user's sessions in the same transaction. An `update` whose
    /// `WHERE` matches only rows it would change (`AND role <> $2`) leaves the sessions of
    /// a user it would not change alone ([`UserChange::Unchanged`]).
    async fn change_user(&self, name: &str, update: &str, binds: Binds<'_>) -> Result<UserChange> {
        let mut tx = self.pool.begin().await?;
        let mut q = sqlx::query(update).bind(name);
        for b in binds {
            q = match b {
                Bind::Text(s) => q.bind(*s),
                Bind::Int(i) => q.bind(*i),
            };
        }
        let hit = q.execute(&mut *tx).await?.rows_affected();
        if hit == 0 {
            let exists = sqlx::query("SELECT 1 FROM users WHERE name = $1")
                .bind(name)
                .fetch_optional(&mut *tx)
                .await?
                .is_some();
            tx.rollback().await?;
            return Ok(if exists {
                UserChange::Unchanged
            } else {
                UserChange::NoSuchUser
            });
        }
        let ended = end_sessions_of(&mut tx, name).await?;
        tx.commit().await?;
        Ok(UserChange::Changed {
            sessions_ended: ended,
        })
    }

    /// A new password hash for `name`; ends its sessions (a new hash is always a change).
    pub async fn set_password_hash(&self, name: &str, password_hash: &str) -> Result<UserChange> {
        self.change_user(
            name,
            "UPDATE users SET password_hash = $2 WHERE name = $1",
            &[Bind::Text(password_hash)],
        )
        .await
    }

    /// A new role for `name`; ends its sessions if the role was another.
    pub async fn set_role(&self, name: &str, role: Role) -> Result<UserChange> {
        self.change_user(
            name,
            "UPDATE users SET role = $2 WHERE name = $1 AND role <> $2",
            &[Bind::Text(role.as_str())],
        )
        .await
    }

    /// Disables (ending its sessions) or enables `name`; a user already so is unchanged.
    pub async fn set_disabled(
        &self,
        name: &str,
        disabled: bool,
        now_ms: UnixMs,
    ) -> Result<UserChange> {
        // A NULL is written as a literal, never bound (see `put_rollup`).
        if disabled {
            self.change_user(
                name,
                "UPDATE users SET disabled = 1, disabled_ms = $2 WHERE name = $1 AND disabled = 0",
                &[Bind::Int(now_ms)],
            )
            .await
        } else {
            self.change_user(
                name,
                "UPDATE users SET disabled = 0, disabled_ms = NULL WHERE name = $1 AND disabled <> 0",
                &[],
            )
            .await
        }
    }

    /// Deletes `name` and its sessions.
    pub async fn delete_user(&self, name: &str) -> Result<UserChange> {
        self.change_user(name, "DELETE FROM users WHERE name = $1", &[])
            .await
    }

    /// A new session: `id` is its opaque name in listings, `token_sha256` what the cookie
    /// is checked against. It ends at `expires_ms`, or `idle_ms` after it was last seen.
    pub async fn put_session(
        &self,
        token_sha256: &str,
        id: &str,
        user: &str,
        now_ms: UnixMs,
        expires_ms: UnixMs,
        idle_ms: i64,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO sessions (token_sha256, id, user_name, created_ms, last_seen_ms, expires_ms, idle_ms) \
             VALUES ($1, $2, $3, $4, $4, $5, $6)",
        )
        .bind(token_sha256)
        .bind(id)
        .bind(user)
        .bind(now_ms)
        .bind(expires_ms)
        .bind(idle_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The user and role of a valid session: not expired, not idle too long, its user
    /// there and not disabled; else `None`. Marks it seen at `now_ms` when it was last
    /// marked [`LAST_SEEN_EVERY_MS`] or more before (so at most one write a minute).
    pub async fn session_user(
        &self,
        token_sha256: &str,
        now_ms: UnixMs,
    ) -> Result<Option<(String, Role)>> {
        let row = sqlx::query(&format!(
            "SELECT u.name, u.role, s.last_seen_ms FROM sessions s JOIN users u ON u.name = s.user_name \
             WHERE s.token_sha256 = $1 AND {}",
            valid_at("$2")
        ))
        .bind(token_sha256)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await?;
        let Some(r) = row else {
            return Ok(None);
        };
        let seen: i64 = r.try_get(2)?;
        if seen <= now_ms - LAST_SEEN_EVERY_MS {
            sqlx::query(
                "UPDATE sessions SET last_seen_ms = $1 WHERE token_sha256 = $2 AND last_seen_ms < $1",
            )
            .bind(now_ms)
            .bind(token_sha256)
            .execute(&self.pool)
            .await?;
        }
        Ok(Some((
            r.try_get::<String, _>(0)?,
            role_of(&r.try_get::<String, _>(1)?)?,
        )))
    }

    /// Which of `digests` (session token SHA-256s, hex) are valid sessions at `now_ms`,
    /// by the rule of [`Store::session_user`], in one query per 500. Marks none seen.
    pub async fn sessions_valid(
        &self,
        digests: &[String],
        now_ms: UnixMs,
    ) -> Result<HashSet<String>> {
        let mut valid = HashSet::new();
        for chunk in digests.chunks(VALID_CHUNK) {
            let marks: Vec<String> = (2..chunk.len() + 2).map(|i| format!("${i}")).collect();
            let sql = format!(
                "SELECT s.token_sha256 FROM sessions s JOIN users u ON u.name = s.user_name \
                 WHERE s.token_sha256 IN ({}) AND {}",
                marks.join(", "),
                valid_at("$1")
            );
            let mut q = sqlx::query(&sql).bind(now_ms);
            for d in chunk {
                q = q.bind(d.as_str());
            }
            for r in q.fetch_all(&self.pool).await? {
                valid.insert(r.try_get::<String, _>(0)?);
            }
        }
        Ok(valid)
    }

    /// The revocation counter: it grows in the same transaction as every change of a user
    /// and every session revoked (by a user change, an admin, signing out); never falls.
    pub async fn auth_epoch(&self) -> Result<i64> {
        let row = sqlx::query("SELECT epoch FROM auth_epoch WHERE id = 1")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get(0)?)
    }

    /// Sessions valid at `now_ms`, newest first.
    pub async fn sessions(&self, now_ms: UnixMs) -> Result<Vec<SessionInfo>> {
        let rows = sqlx::query(&format!(
            "SELECT s.id, s.user_name, s.created_ms, s.last_seen_ms, s.expires_ms, s.idle_ms \
             FROM sessions s JOIN users u ON u.name = s.user_name WHERE {} \
             ORDER BY s.created_ms DESC, s.id",
            valid_at("$1")
        ))
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let seen: i64 = r.try_get("last_seen_ms")?;
                Ok(SessionInfo {
                    id: r.try_get("id")?,
                    user: r.try_get("user_name")?,
                    created_ms: r.try_get("created_ms")?,
                    last_seen_ms: seen,
                    expires_ms: r.try_get("expires_ms")?,
                    idle_expires_ms: seen + r.try_get::<i64, _>("idle_ms")?,
                })
            })
            .collect()
    }

    /// Revokes the session with opaque id `id`: its user, or `None` when there is none.
    pub async fn revoke_session(&self, id: &str) -> Result<Option<String>> {
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query("DELETE FROM sessions WHERE id = $1 RETURNING user_name")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            tx.rollback().await?;
            return Ok(None);
        };
        bump_epoch(&mut tx).await?;
        tx.commit().await?;
        Ok(Some(row.try_get(0)?))
    }

    /// Ends one session (signing out), bumping the epoch when there was one.
    pub async fn delete_session(&self, token_sha256: &str) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let r = sqlx::query("DELETE FROM sessions WHERE token_sha256 = $1")
            .bind(token_sha256)
            .execute(&mut *tx)
            .await?;
        if r.rows_affected() > 0 {
            bump_epoch(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Removes expired and idle sessions; returns how many. Not a revocation: no epoch.
    pub async fn prune_sessions(&self, now_ms: UnixMs) -> Result<u64> {
        let r = sqlx::query(
            "DELETE FROM sessions WHERE expires_ms <= $1 OR last_seen_ms + idle_ms <= $1",
        )
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected())
    }

    /// Writes an audit row in state `started` before an action runs; returns its id.
    pub async fn audit_begin(
        &self,
        at_ms: UnixMs,
        user: &str,
        role: Role,
        action: &str,
        target: &str,
        detail: &str,
    ) -> Result<i64> {
        let row = sqlx::query(
            "INSERT INTO audit (at_ms, user_name, role, action, target, detail, status) \
             VALUES ($1, $2, $3, $4, $5, $6, 'started') RETURNING id",
        )
        .bind(at_ms)
        .bind(user)
        .bind(role.as_str())
        .bind(action)
        .bind(target)
        .bind(detail)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get(0)?)
    }

    /// Completes an audit row with the verified result.
    pub async fn audit_finish(
        &self,
        id: i64,
        status: &str,
        result: &str,
        finished_ms: UnixMs,
    ) -> Result<()> {
        sqlx::query("UPDATE audit SET status = $1, result = $2, finished_ms = $3 WHERE id = $4")
            .bind(status)
            .bind(result)
            .bind(finished_ms)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Audit rows matching `f`, newest first. Filters match exactly (user, action) or as a
    /// substring (target).
    /// Audit rows about incident `id`: actions whose reason names it (`incident N: …`, as
    /// the remedies and policies write it) and mutes of its cause's alert; oldest first.
    pub async fn audit_of_incident(&self, id: i64) -> Result<Vec<AuditEntry>> {
        let rows = sqlx::query(
            "SELECT id, at_ms, user_name, role, action, target, detail, status, result, finished_ms \
             FROM audit WHERE detail LIKE $1 OR target LIKE $2 ORDER BY id LIMIT 500",
        )
        .bind(format!("%incident {id}:%"))
        .bind(format!("alert {id}:%"))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(audit_row).collect()
    }

    pub async fn audit(&self, f: &AuditFilter) -> Result<Vec<AuditEntry>> {
        let limit = f.limit.unwrap_or(500).clamp(1, AUDIT_MAX_ROWS);
        let rows = sqlx::query(
            "SELECT id, at_ms, user_name, role, action, target, detail, status, result, finished_ms \
             FROM audit WHERE ($1 = '' OR user_name = $1) AND ($2 = '' OR action = $2) \
             AND ($3 = '' OR target LIKE $4) ORDER BY id DESC LIMIT $5",
        )
        .bind(f.user.as_deref().unwrap_or(""))
        .bind(f.action.as_deref().unwrap_or(""))
        .bind(f.target.as_deref().unwrap_or(""))
        .bind(format!(
            "%{}%",
            f.target
                .as_deref()
                .unwrap_or("")
                .replace(['%', '_'], "")
        ))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(audit_row).collect()
    }
}

fn audit_row(r: &sqlx::any::AnyRow) -> Result<AuditEntry> {
    Ok(AuditEntry {
        id: r.try_get("id")?,
        at_ms: r.try_get("at_ms")?,
        user: r.try_get("user_name")?,
        role: r.try_get("role")?,
        action: r.try_get("action")?,
        target: r.try_get("target")?,
        detail: r.try_get("detail")?,
        status: r.try_get("status")?,
        result: r.try_get("result")?,
        finished_ms: r.try_get("finished_ms")?,
    })
}

/// What a change of a user did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserChange {
    NoSuchUser,
    /// The user was already so: nothing written, no session ended.
    Unchanged,
    Changed {
        sessions_ended: u64,
    },
}

/// A bound value of [`Store::change_user`]'s update.
enum Bind<'a> {
    Text(&'a str),
    Int(i64),
}

type Binds<'a> = &'a [Bind<'a>];
