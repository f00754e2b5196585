//! Users, sessions and the audit log: the same portable SQL on both databases.

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
}

fn role_of(s: &str) -> Result<Role> {
    Role::parse(s).ok_or_else(|| StoreError::Corrupt(format!("unknown role {s:?}")))
}

/// Longest audit listing served at once.
pub const AUDIT_MAX_ROWS: u32 = 10_000;

impl Store {
    /// Creates or replaces a user (a new password or role for an existing name).
    pub async fn put_user(
        &self,
        name: &str,
        password_hash: &str,
        role: Role,
        now_ms: UnixMs,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO users (name, password_hash, role, created_ms) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (name) DO UPDATE SET password_hash = excluded.password_hash, role = excluded.role",
        )
        .bind(name)
        .bind(password_hash)
        .bind(role.as_str())
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn user(&self, name: &str) -> Result<Option<UserRow>> {
        let row = sqlx::query("SELECT name, password_hash, role FROM users WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            Ok(UserRow {
                name: r.try_get("name")?,
                password_hash: r.try_get("password_hash")?,
                role: role_of(&r.try_get::<String, _>("role")?)?,
            })
        })
        .transpose()
    }

    pub async fn user_count(&self) -> Result<u64> {
        let row = sqlx::query("SELECT COUNT(*) FROM users")
            .fetch_one(&self.pool)
            .await?;
        super::u64_of(row.try_get(0)?, "user count")
    }

    pub async fn put_session(
        &self,
        token_sha256: &str,
        user: &str,
        now_ms: UnixMs,
        expires_ms: UnixMs,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO sessions (token_sha256, user_name, created_ms, expires_ms) VALUES ($1, $2, $3, $4)",
        )
        .bind(token_sha256)
        .bind(user)
        .bind(now_ms)
        .bind(expires_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The user and role of a live session; expired sessions and deleted users give `None`.
    pub async fn session_user(
        &self,
        token_sha256: &str,
        now_ms: UnixMs,
    ) -> Result<Option<(String, Role)>> {
        let row = sqlx::query(
            "SELECT u.name, u.role FROM sessions s JOIN users u ON u.name = s.user_name \
             WHERE s.token_sha256 = $1 AND s.expires_ms > $2",
        )
        .bind(token_sha256)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            Ok((
                r.try_get::<String, _>(0)?,
                role_of(&r.try_get::<String, _>(1)?)?,
            ))
        })
        .transpose()
    }

    pub async fn delete_session(&self, token_sha256: &str) -> Result<()> {
        sqlx::query("DELETE FROM sessions WHERE token_sha256 = $1")
            .bind(token_sha256)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Removes expired sessions; returns how many.
    pub async fn prune_sessions(&self, now_ms: UnixMs) -> Result<u64> {
        let r = sqlx::query("DELETE FROM sessions WHERE expires_ms <= $1")
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
        rows.iter()
            .map(|r| {
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
            })
            .collect()
    }
}
