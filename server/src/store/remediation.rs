//! Remediation: the decisions policies took, and what admins switch at run time.

use app::model::UnixMs;
use app::remediation::{Mode, RemedyDecision};
use sqlx::Row;

use super::{Result, Store};

/// A decision as the store records it.
#[derive(Clone, Copy, Debug)]
pub struct NewDecision<'a> {
    pub at_ms: UnixMs,
    pub incident: i64,
    pub cause: &'a str,
    pub node: &'a str,
    pub action: &'a str,
    pub mode: Mode,
    pub outcome: &'a str,
    /// Which limit held it (`kill_switch`, `cooldown`, `breaker`, `hourly_limit`), else empty.
    pub held_by: &'a str,
    pub detail: &'a str,
    pub action_id: Option<i64>,
}

/// A setting an admin (or a breaker tripping) wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    pub key: String,
    pub value: String,
    pub by: String,
    pub at_ms: UnixMs,
    pub note: String,
}

/// A decision as the policy task remembers it.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    pub incident: i64,
    pub node: String,
    pub action: String,
    pub outcome: String,
    pub held_by: String,
    pub at_ms: UnixMs,
    pub cause: String,
}

const COLS: &str = "id, at_ms, incident_id, cause, node, action, mode, outcome, detail, action_id";

fn decision(r: &sqlx::any::AnyRow) -> Result<RemedyDecision> {
    let mode: String = r.try_get("mode")?;
    Ok(RemedyDecision {
        id: r.try_get("id")?,
        at_ms: r.try_get("at_ms")?,
        incident: r.try_get("incident_id")?,
        cause: r.try_get("cause")?,
        node: r.try_get("node")?,
        action: r.try_get("action")?,
        mode: Mode::parse(&mode).unwrap_or(Mode::Observe),
        outcome: r.try_get("outcome")?,
        detail: r.try_get("detail")?,
        action_id: r.try_get("action_id")?,
    })
}

impl Store {
    /// Records `d` unless the same incident, node, action, outcome and limit is recorded
    /// already; whether it was new.
    pub async fn record_decision(&self, d: &NewDecision<'_>) -> Result<bool> {
        let done = sqlx::query(
            "INSERT INTO remediation_decisions \
             (at_ms, incident_id, cause, node, action, mode, outcome, held_by, detail, action_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (incident_id, node, action, outcome, held_by) DO NOTHING",
        )
        .bind(d.at_ms)
        .bind(d.incident)
        .bind(d.cause)
        .bind(d.node)
        .bind(d.action)
        .bind(d.mode.as_str())
        .bind(d.outcome)
        .bind(d.held_by)
        .bind(d.detail)
        .bind(d.action_id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The newest decisions, at most `limit`.
    pub async fn decisions(&self, limit: u32) -> Result<Vec<RemedyDecision>> {
        let q = format!(
            "SELECT {COLS} FROM remediation_decisions ORDER BY at_ms DESC, id DESC LIMIT $1"
        );
        let rows = sqlx::query(&q)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(decision).collect()
    }

    /// Decisions on these incidents, newest first.
    pub async fn decisions_on(&self, incidents: &[i64]) -> Result<Vec<RemedyDecision>> {
        let mut out = Vec::new();
        for chunk in incidents.chunks(500) {
            // Incident ids are integers, written into the SQL as such.
            let list = chunk
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(",");
            let q =
                format!("SELECT {COLS} FROM remediation_decisions WHERE incident_id IN ({list})");
            for r in sqlx::query(&q).fetch_all(&self.pool).await?.iter() {
                out.push(decision(r)?);
            }
        }
        out.sort_by_key(|d| std::cmp::Reverse((d.at_ms, d.id)));
        Ok(out)
    }

    /// Decisions with `outcome` since `since_ms`.
    pub async fn decisions_counted(&self, since_ms: UnixMs, outcome: &str) -> Result<u32> {
        let n: i64 = sqlx::query(
            "SELECT COUNT(*) FROM remediation_decisions WHERE at_ms >= $1 AND outcome = $2",
        )
        .bind(since_ms)
        .bind(outcome)
        .fetch_one(&self.pool)
        .await?
        .try_get(0)?;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// Decisions since `since_ms`, for the policy task's memory.
    pub async fn decisions_since(&self, since_ms: UnixMs) -> Result<Vec<Recorded>> {
        let rows = sqlx::query(
            "SELECT incident_id, node, action, outcome, held_by, at_ms, cause \
             FROM remediation_decisions WHERE at_ms >= $1",
        )
        .bind(since_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Recorded {
                    incident: r.try_get(0)?,
                    node: r.try_get(1)?,
                    action: r.try_get(2)?,
                    outcome: r.try_get(3)?,
                    held_by: r.try_get(4)?,
                    at_ms: r.try_get(5)?,
                    cause: r.try_get(6)?,
                })
            })
            .collect()
    }

    pub async fn remediation_settings(&self) -> Result<Vec<Setting>> {
        let rows = sqlx::query(
            "SELECT key, value, by_user, at_ms, note FROM remediation_settings ORDER BY key",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Setting {
                    key: r.try_get(0)?,
                    value: r.try_get(1)?,
                    by: r.try_get(2)?,
                    at_ms: r.try_get(3)?,
                    note: r.try_get(4)?,
                })
            })
            .collect()
    }

    /// Sets `key` (replacing what it held).
    pub async fn set_remediation_setting(&self, s: &Setting) -> Result<()> {
        sqlx::query(
            "INSERT INTO remediation_settings (key, value, by_user, at_ms, note) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (key) DO UPDATE SET value = $2, by_user = $3, at_ms = $4, note = $5",
        )
        .bind(&s.key)
        .bind(&s.value)
        .bind(&s.by)
        .bind(s.at_ms)
        .bind(&s.note)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Removes `key`; whether it was there.
    pub async fn clear_remediation_setting(&self, key: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM remediation_settings WHERE key = $1")
            .bind(key)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}
