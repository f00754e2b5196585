//! Checkpoints: one row per (job, step), rewritten when a save completes.

use app::model::Checkpoint;
use sqlx::Row;

use super::{u64_of, Result, Store};

impl Store {
    /// Stores a checkpoint; the same (job, step) again updates it (a save that completed).
    pub async fn put_checkpoint(&self, c: &Checkpoint) -> Result<()> {
        sqlx::query(
            "INSERT INTO checkpoints (job_id, step, path, size_bytes, started_ms, duration_ms, complete) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (job_id, step) DO UPDATE SET path = excluded.path, size_bytes = excluded.size_bytes, \
                started_ms = excluded.started_ms, duration_ms = excluded.duration_ms, complete = excluded.complete",
        )
        .bind(c.job_id as i64)
        .bind(c.step as i64)
        .bind(&c.path)
        .bind(c.size_bytes as i64)
        .bind(c.started_ms)
        .bind(c.duration_ms)
        .bind(i64::from(c.complete))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A job's checkpoints by step.
    pub async fn checkpoints(&self, job_id: u64) -> Result<Vec<Checkpoint>> {
        let rows = sqlx::query(
            "SELECT job_id, step, path, size_bytes, started_ms, duration_ms, complete \
             FROM checkpoints WHERE job_id = $1 ORDER BY step",
        )
        .bind(job_id as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Checkpoint {
                    job_id: u64_of(r.try_get("job_id")?, "job id")?,
                    step: u64_of(r.try_get("step")?, "step")?,
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
