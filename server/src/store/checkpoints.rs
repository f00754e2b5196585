//! Checkpoints: one row per save (job, path), its step when known, rewritten when the save completes.

use app::model::Checkpoint;
use sqlx::Row;

use super::{u64_of, Result, Store, StoreError};

/// The largest step, byte count, time or duration a stored row may hold: 2^53 - 1. A save's
/// start plus its duration then never overflows i64 (nor turns SQLite's sum into a float),
/// and every value survives a JSON number.
pub const MAX_STORED: i64 = (1 << 53) - 1;

/// SQL for a checkpoint row whose numbers are all in `0..=MAX_STORED`: rows an older version
/// may have stored outside it are skipped by every query (and counted once, by
/// [`Store::rows_out_of_range`]).
pub(super) const CHECKPOINT_IN_RANGE: &str =
    "(step IS NULL OR step BETWEEN 0 AND 9007199254740991) \
     AND size_bytes BETWEEN 0 AND 9007199254740991 \
     AND started_ms BETWEEN 0 AND 9007199254740991 \
     AND duration_ms BETWEEN 0 AND 9007199254740991";

/// The same for an NCCL sample.
pub(super) const NCCL_IN_RANGE: &str =
    "step BETWEEN 0 AND 9007199254740991 AND at_ms BETWEEN 0 AND 9007199254740991";

/// Why a checkpoint cannot be stored: the first field out of `0..=MAX_STORED`.
pub fn checkpoint_out_of_range(c: &Checkpoint) -> Option<&'static str> {
    let max = MAX_STORED as u64;
    if c.job_id > max {
        Some("job_id")
    } else if c.step.is_some_and(|s| s > max) {
        Some("step")
    } else if c.size_bytes > max {
        Some("bytes")
    } else if !(0..=MAX_STORED).contains(&c.started_ms) {
        Some("started_ms")
    } else if !(0..=MAX_STORED).contains(&c.duration_ms) {
        Some("duration_ms")
    } else {
        None
    }
}

impl Store {
    /// Stores a checkpoint; the same (job, path) again updates it (a save that completed,
    /// or whose step became known). A value out of range is refused (every source checks
    /// before; this is the last stop).
    pub async fn put_checkpoint(&self, c: &Checkpoint) -> Result<()> {
        if let Some(field) = checkpoint_out_of_range(c) {
            return Err(StoreError::Corrupt(format!(
                "checkpoint of job {} not stored: {field} out of range",
                c.job_id
            )));
        }
        // A NULL is written as a literal, never bound (see `put_rollup`); a step is a number.
        let step = c.step.map_or("NULL".to_string(), |s| s.to_string());
        sqlx::query(&format!(
            "INSERT INTO checkpoints (job_id, step, path, size_bytes, started_ms, duration_ms, complete) \
             VALUES ($1, {step}, $2, $3, $4, $5, $6) \
             ON CONFLICT (job_id, path) DO UPDATE SET step = excluded.step, size_bytes = excluded.size_bytes, \
                started_ms = excluded.started_ms, duration_ms = excluded.duration_ms, complete = excluded.complete",
        ))
        .bind(c.job_id as i64)
        .bind(&c.path)
        .bind(c.size_bytes as i64)
        .bind(c.started_ms)
        .bind(c.duration_ms)
        .bind(i64::from(c.complete))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A job's checkpoints in the order they were saved.
    pub async fn checkpoints(&self, job_id: u64) -> Result<Vec<Checkpoint>> {
        let rows = sqlx::query(&format!(
            "SELECT job_id, step, path, size_bytes, started_ms, duration_ms, complete \
             FROM checkpoints WHERE job_id = $1 AND {CHECKPOINT_IN_RANGE} ORDER BY started_ms, path"
        ))
        .bind(job_id as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Checkpoint {
                    job_id: u64_of(r.try_get("job_id")?, "job id")?,
                    step: r
                        .try_get::<Option<i64>, _>("step")?
                        .map(|s| u64_of(s, "step"))
                        .transpose()?,
                    path: r.try_get("path")?,
                    size_bytes: u64_of(r.try_get("size_bytes")?, "size")?,
                    started_ms: r.try_get("started_ms")?,
                    duration_ms: r.try_get("duration_ms")?,
                    complete: r.try_get::<i64, _>("complete")? != 0,
                })
            })
            .collect()
    }
}

impl Store {
    /// Checkpoint and NCCL rows with a number out of range (an older version stored them
    /// unchecked): every query skips them; this counts them, for one warning at start.
    pub async fn rows_out_of_range(&self) -> Result<(u64, u64)> {
        let count =
            |table: &str, ok: &str| format!("SELECT COUNT(*) FROM {table} WHERE NOT ({ok})");
        let c: i64 = sqlx::query(&count("checkpoints", CHECKPOINT_IN_RANGE))
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?;
        let n: i64 = sqlx::query(&count("nccl_samples", NCCL_IN_RANGE))
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?;
        Ok((u64_of(c, "count")?, u64_of(n, "count")?))
    }
}
