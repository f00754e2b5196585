//! Named ingest tokens: only each token's SHA-256 is kept, and none is ever listed.

use app::model::UnixMs;
use sqlx::Row;

use super::{Result, Store};

/// A stored ingest token as listed: never the token or its digest.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct IngestTokenInfo {
    pub name: String,
    /// The Slurm account it may write for; `None`: any.
    pub account: Option<String>,
    pub created_ms: UnixMs,
    /// Kept to the minute.
    pub last_used_ms: Option<UnixMs>,
}

/// A token's last use is written at most this often.
const LAST_USED_EVERY_MS: i64 = 60_000;

fn info(r: &sqlx::any::AnyRow) -> Result<IngestTokenInfo> {
    let account: String = r.try_get("account")?;
    Ok(IngestTokenInfo {
        name: r.try_get("name")?,
        account: Some(account).filter(|a| !a.is_empty()),
        created_ms: r.try_get("created_ms")?,
        last_used_ms: r.try_get("last_used_ms")?,
    })
}

impl Store {
    /// Adds a token; `false` when one of that name exists (nothing changed).
    pub async fn put_ingest_token(
        &self,
        name: &str,
        token_sha256: &str,
        account: Option<&str>,
        now_ms: UnixMs,
    ) -> Result<bool> {
        let r = sqlx::query(
            "INSERT INTO ingest_tokens (name, token_sha256, account, created_ms) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(token_sha256)
        .bind(account.unwrap_or(""))
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() == 1)
    }

    /// Every token, by name.
    pub async fn ingest_tokens(&self) -> Result<Vec<IngestTokenInfo>> {
        let rows = sqlx::query(
            "SELECT name, account, created_ms, last_used_ms FROM ingest_tokens ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(info).collect()
    }

    /// Whether any token is stored (ingest is on with one even without `ingest_token`).
    pub async fn has_ingest_tokens(&self) -> Result<bool> {
        let row = sqlx::query("SELECT COUNT(*) FROM ingest_tokens")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<i64, _>(0)? > 0)
    }

    /// The token whose SHA-256 is `token_sha256`, marked used at `now_ms` (written at
    /// most once a minute); `None`: no such token (never added, or revoked).
    pub async fn use_ingest_token(
        &self,
        token_sha256: &str,
        now_ms: UnixMs,
    ) -> Result<Option<IngestTokenInfo>> {
        let row = sqlx::query(
            "SELECT name, account, created_ms, last_used_ms FROM ingest_tokens WHERE token_sha256 = $1",
        )
        .bind(token_sha256)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let t = info(&row)?;
        if t.last_used_ms
            .is_none_or(|u| u <= now_ms - LAST_USED_EVERY_MS)
        {
            sqlx::query(
                "UPDATE ingest_tokens SET last_used_ms = $1 WHERE name = $2 \
                 AND (last_used_ms IS NULL OR last_used_ms < $1)",
            )
            .bind(now_ms)
            .bind(&t.name)
            .execute(&self.pool)
            .await?;
        }
        Ok(Some(t))
    }

    /// Revokes (deletes) the token `name`; `false` when there is none.
    pub async fn revoke_ingest_token(&self, name: &str) -> Result<bool> {
        let r = sqlx::query("DELETE FROM ingest_tokens WHERE name = $1")
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected() == 1)
    }
}
