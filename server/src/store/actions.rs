//! Actions as durable work: the action row and its targets' audit rows, written in one
//! transaction before anything is called, then moved on target by target.

use app::actions::{ActionKind, ActionStatus, Role, TargetOutcome};
use app::model::UnixMs;
use sqlx::Row;

use super::{Result, Store, StoreError};

/// One target of a stored action (its audit row).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredTarget {
    pub audit_id: i64,
    pub target: String,
    /// `pending`, `calling`, or an end (see [`TargetOutcome::status`]).
    pub status: String,
    pub result: String,
    /// When the call was about to be sent (set with `calling`).
    pub called_ms: Option<UnixMs>,
    /// What the read-back compares against (a requeue's restart count before the call).
    pub before: String,
}

/// A stored action with its targets in the order they run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredAction {
    pub id: i64,
    pub at_ms: UnixMs,
    pub user: String,
    pub role: Role,
    pub kind: ActionKind,
    /// The drain reason as stored in Slurm (with the user's name), else empty.
    pub detail: String,
    /// A requeue's nodes its jobs must not run on again; empty for other actions.
    pub exclude: Vec<String>,
    pub state: String,
    pub note: String,
    pub finished_ms: Option<UnixMs>,
    pub targets: Vec<StoredTarget>,
}

impl StoredAction {
    pub fn status(&self) -> ActionStatus {
        ActionStatus {
            id: self.id,
            action: self.kind,
            user: self.user.clone(),
            at_ms: self.at_ms,
            state: self.state.clone(),
            note: self.note.clone(),
            finished_ms: self.finished_ms,
            outcomes: self
                .targets
                .iter()
                .map(|t| TargetOutcome {
                    target: t.target.clone(),
                    status: t.status.clone(),
                    message: t.result.clone(),
                    audit_id: t.audit_id,
                })
                .collect(),
            url: ActionStatus::url_of(self.id),
        }
    }
}

/// An action as it is recorded, with its targets in the order they run.
#[derive(Clone, Copy, Debug)]
pub struct NewAction<'a> {
    pub at_ms: UnixMs,
    pub user: &'a str,
    pub role: Role,
    pub kind: ActionKind,
    /// The drain reason as stored in Slurm (a requeue's reason), with the user's name.
    pub detail: &'a str,
    /// A requeue's nodes its jobs must not run on again (validated node names).
    pub exclude: &'a [String],
    pub targets: &'a [String],
}

/// PostgreSQL's advisory lock key that serializes the per-user action count ("GANTRY", 2).
const RATE_LIMIT_KEY: i64 = 0x4741_4e54_5259_0002;

impl Store {
    /// Records an action and every target's audit row (`pending`) in one transaction;
    /// returns the action's id and the audit ids in target order.
    pub async fn action_record(
        &self,
        at_ms: UnixMs,
        user: &str,
        role: Role,
        kind: ActionKind,
        detail: &str,
        targets: &[String],
    ) -> Result<(i64, Vec<i64>)> {
        let a = NewAction {
            at_ms,
            user,
            role,
            kind,
            detail,
            exclude: &[],
            targets,
        };
        self.action_record_limited(&a, None)
            .await?
            .ok_or_else(|| StoreError::Corrupt("an unlimited action was refused".into()))
    }

    /// As [`Store::action_record`], refused (`None`) when `user` has recorded
    /// `per_minute` actions in the minute before `at_ms` already: a limit every replica of
    /// the database shares (counted under an advisory lock on PostgreSQL, so two replicas
    /// cannot both let the last one through).
    pub async fn action_record_limited(
        &self,
        a: &NewAction<'_>,
        per_minute: Option<u32>,
    ) -> Result<Option<(i64, Vec<i64>)>> {
        let NewAction {
            at_ms,
            user,
            role,
            kind,
            detail,
            exclude,
            targets,
        } = *a;
        let mut tx = self.pool.begin().await?;
        if per_minute.is_some() && self.dialect == super::Dialect::Postgres {
            sqlx::query("SELECT COUNT(*) FROM (SELECT pg_advisory_xact_lock($1)) AS l")
                .bind(RATE_LIMIT_KEY)
                .fetch_one(&mut *tx)
                .await?;
        }
        // The write first: on SQLite it takes the write lock (waiting for another writer),
        // where a read first would fail to upgrade while another transaction writes.
        let id: i64 = sqlx::query(
            "INSERT INTO actions (at_ms, user_name, role, action, detail, exclude, state) \
             VALUES ($1, $2, $3, $4, $5, $6, 'queued') RETURNING id",
        )
        .bind(at_ms)
        .bind(user)
        .bind(role.as_str())
        .bind(kind.as_str())
        .bind(detail)
        .bind(exclude.join(","))
        .fetch_one(&mut *tx)
        .await?
        .try_get(0)?;
        if let Some(limit) = per_minute {
            // This one included.
            let n: i64 =
                sqlx::query("SELECT COUNT(*) FROM actions WHERE user_name = $1 AND at_ms > $2")
                    .bind(user)
                    .bind(at_ms - 60_000)
                    .fetch_one(&mut *tx)
                    .await?
                    .try_get(0)?;
            if n > i64::from(limit) {
                tx.rollback().await?;
                return Ok(None);
            }
        }
        let mut audit_ids = Vec::with_capacity(targets.len());
        for t in targets {
            let a: i64 = sqlx::query(
                "INSERT INTO audit (at_ms, user_name, role, action, target, detail, status, action_id) \
                 VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7) RETURNING id",
            )
            .bind(at_ms)
            .bind(user)
            .bind(role.as_str())
            .bind(kind.as_str())
            .bind(t)
            .bind(detail)
            .bind(id)
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
            audit_ids.push(a);
        }
        tx.commit().await?;
        Ok(Some((id, audit_ids)))
    }

    /// Moves action `id` to `state` (with `note`; `finished_ms` for an end).
    pub async fn action_set_state(
        &self,
        id: i64,
        state: &str,
        note: &str,
        finished_ms: Option<UnixMs>,
    ) -> Result<()> {
        sqlx::query("UPDATE actions SET state = $1, note = $2, finished_ms = $3 WHERE id = $4")
            .bind(state)
            .bind(note)
            .bind(finished_ms)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Marks a target `calling`, just before its call is sent, with what its read-back
    /// compares against. Only a `pending` row moves: `false` when it was not pending.
    pub async fn audit_calling(
        &self,
        audit_id: i64,
        called_ms: UnixMs,
        before: &str,
    ) -> Result<bool> {
        let r = sqlx::query(
            "UPDATE audit SET status = 'calling', called_ms = $1, before_value = $2 \
             WHERE id = $3 AND status = 'pending'",
        )
        .bind(called_ms)
        .bind(before)
        .bind(audit_id)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() == 1)
    }

    /// Action `id` with its targets, or `None`.
    pub async fn action(&self, id: i64) -> Result<Option<StoredAction>> {
        let row = sqlx::query(
            "SELECT id, at_ms, user_name, role, action, detail, exclude, state, note, finished_ms \
             FROM actions WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        match row {
            None => Ok(None),
            Some(r) => Ok(Some(self.with_targets(&r).await?)),
        }
    }

    /// Every action not yet at an end (`queued` or `running`), oldest first.
    pub async fn unfinished_actions(&self) -> Result<Vec<StoredAction>> {
        let rows = sqlx::query(
            "SELECT id, at_ms, user_name, role, action, detail, exclude, state, note, finished_ms \
             FROM actions WHERE state = 'queued' OR state = 'running' ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            out.push(self.with_targets(r).await?);
        }
        Ok(out)
    }

    async fn with_targets(&self, r: &sqlx::any::AnyRow) -> Result<StoredAction> {
        let id: i64 = r.try_get("id")?;
        let role: String = r.try_get("role")?;
        let kind: String = r.try_get("action")?;
        let targets = sqlx::query(
            "SELECT id, target, status, result, called_ms, before_value FROM audit \
             WHERE action_id = $1 ORDER BY id",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|t| {
            Ok(StoredTarget {
                audit_id: t.try_get("id")?,
                target: t.try_get("target")?,
                status: t.try_get("status")?,
                result: t.try_get("result")?,
                called_ms: t.try_get("called_ms")?,
                before: t.try_get("before_value")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
        Ok(StoredAction {
            id,
            at_ms: r.try_get("at_ms")?,
            user: r.try_get("user_name")?,
            role: Role::parse(&role)
                .ok_or_else(|| StoreError::Corrupt(format!("unknown role {role:?}")))?,
            kind: ActionKind::parse(&kind)
                .ok_or_else(|| StoreError::Corrupt(format!("unknown action {kind:?}")))?,
            detail: r.try_get("detail")?,
            exclude: {
                let x: String = r.try_get("exclude")?;
                x.split(',')
                    .filter(|n| !n.is_empty())
                    .map(String::from)
                    .collect()
            },
            state: r.try_get("state")?,
            note: r.try_get("note")?,
            finished_ms: r.try_get("finished_ms")?,
            targets,
        })
    }

    /// Audit rows written before `before_ms` and left `started` (rows without an action:
    /// user changes, and actions of a server from before actions were durable):
    /// `(id, action, target)`.
    pub async fn legacy_started_audit(
        &self,
        before_ms: UnixMs,
    ) -> Result<Vec<(i64, String, String)>> {
        sqlx::query(
            "SELECT id, action, target FROM audit WHERE status = 'started' AND action_id IS NULL \
             AND at_ms < $1 ORDER BY id",
        )
        .bind(before_ms)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
        .collect()
    }
}
