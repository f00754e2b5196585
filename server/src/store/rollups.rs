//! Telemetry rollups: one row per scope and minute (`rollup_1m`) and per scope and hour
//! (`rollup_1h`), the per-reason throttle columns they share, and their retention.

use app::model::UnixMs;
use sqlx::Row;

use super::{Result, Store, StoreError};

/// One rollup row: a scope (`cluster`, `rack:A01`) over one minute.
#[derive(Clone, Debug, PartialEq)]
pub struct Rollup {
    pub scope: String,
    pub at_ms: UnixMs,
    pub power_watts_mean: f64,
    pub sm_active_mean: Option<f64>,
    pub gpus_throttling_max: u32,
    /// GPU-seconds throttled per reason, in the order of `aggregate::REASONS`.
    pub throttled_s_by_reason: [f64; 5],
    pub samples: u32,
}

/// One hour of a scope (`cluster`, `rack:A01`, `job:1042`).
#[derive(Clone, Debug, PartialEq)]
pub struct Rollup1h {
    pub scope: String,
    pub at_ms: UnixMs,
    pub power_watts_mean: f64,
    pub power_watts_min: f64,
    pub power_watts_max: f64,
    /// Power integrated over the hour's ticks.
    pub energy_wh: f64,
    pub sm_active_mean: Option<f64>,
    pub gpus_throttling_max: u32,
    /// GPUs throttling integrated over time: GPU-seconds.
    pub throttled_gpu_seconds: f64,
    /// The same per reason, in the order of `aggregate::REASONS` (a GPU throttled for two
    /// reasons counts under both).
    pub throttled_s_by_reason: [f64; 5],
    pub samples: u32,
}

/// The per-reason throttle columns of the rollup tables, in the order of
/// `aggregate::REASONS` (`thr_hw_thermal_s`, ...): one source for names and order.
fn thr_columns() -> impl Iterator<Item = String> {
    crate::aggregate::REASONS
        .iter()
        .map(|(_, name)| format!("thr_{name}_s"))
}

/// `thr_a_s, thr_b_s, ...`, and `thr_a_s = excluded.thr_a_s, ...` for an upsert.
fn thr_list() -> String {
    thr_columns().collect::<Vec<_>>().join(", ")
}

fn thr_set() -> String {
    thr_columns()
        .map(|c| format!("{c} = excluded.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A row's throttled seconds per reason.
fn thr_of(r: &sqlx::any::AnyRow) -> Result<[f64; 5]> {
    let mut out = [0.0; 5];
    for (v, c) in out.iter_mut().zip(thr_columns()) {
        *v = r.try_get(c.as_str())?;
    }
    Ok(out)
}

impl Store {
    /// Writes (or rewrites) one minute's rollup.
    pub async fn put_rollup(&self, r: &Rollup) -> Result<()> {
        // A missing double is written as a literal NULL, never bound: sqlx 0.8's Any driver
        // declares a bound NULL double as float4 on PostgreSQL, and a statement prepared so
        // then refuses every real double on that connection (see docs/design.md). It comes
        // last, so the other placeholders keep their numbers.
        let sm = r.sm_active_mean.map(|_| "$11").unwrap_or("NULL");
        let sql = format!(
            "INSERT INTO rollup_1m (scope, at_ms, power_watts_mean, gpus_throttling_max, samples, \
                                    {thr}, sm_active_mean) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, {sm}) \
             ON CONFLICT (scope, at_ms) DO UPDATE SET power_watts_mean = excluded.power_watts_mean, \
                sm_active_mean = excluded.sm_active_mean, gpus_throttling_max = excluded.gpus_throttling_max, \
                samples = excluded.samples, {set}",
            thr = thr_list(),
            set = thr_set(),
        );
        let mut q = sqlx::query(&sql)
            .bind(&r.scope)
            .bind(r.at_ms)
            .bind(r.power_watts_mean)
            .bind(i64::from(r.gpus_throttling_max))
            .bind(i64::from(r.samples));
        for v in r.throttled_s_by_reason {
            q = q.bind(v);
        }
        if let Some(v) = r.sm_active_mean {
            q = q.bind(v);
        }
        q.execute(&self.pool).await?;
        Ok(())
    }

    /// Rollups of a scope with `from_ms <= at_ms < to_ms`, oldest first.
    pub async fn rollups(
        &self,
        scope: &str,
        from_ms: UnixMs,
        to_ms: UnixMs,
    ) -> Result<Vec<Rollup>> {
        let rows = sqlx::query(&format!(
            "SELECT scope, at_ms, power_watts_mean, sm_active_mean, gpus_throttling_max, samples, {} \
             FROM rollup_1m WHERE scope = $1 AND at_ms >= $2 AND at_ms < $3 ORDER BY at_ms",
            thr_list()
        ))
        .bind(scope)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Rollup {
                    scope: r.try_get("scope")?,
                    at_ms: r.try_get("at_ms")?,
                    power_watts_mean: r.try_get("power_watts_mean")?,
                    sm_active_mean: r.try_get("sm_active_mean")?,
                    gpus_throttling_max: u32::try_from(r.try_get::<i64, _>("gpus_throttling_max")?)
                        .map_err(|_| StoreError::Corrupt("throttling".into()))?,
                    samples: u32::try_from(r.try_get::<i64, _>("samples")?)
                        .map_err(|_| StoreError::Corrupt("samples".into()))?,
                    throttled_s_by_reason: thr_of(r)?,
                })
            })
            .collect()
    }

    /// Writes (or rewrites) one hour's rollup.
    pub async fn put_rollup_1h(&self, r: &Rollup1h) -> Result<()> {
        // A missing double is a literal NULL, never bound (see `put_rollup`); it comes last
        // so the other placeholders keep their numbers.
        let sm = r.sm_active_mean.map(|_| "$15").unwrap_or("NULL");
        let sql = format!(
            "INSERT INTO rollup_1h (scope, at_ms, power_watts_mean, power_watts_min, power_watts_max, energy_wh, \
                                    gpus_throttling_max, throttled_gpu_seconds, samples, {thr}, sm_active_mean) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, {sm}) \
             ON CONFLICT (scope, at_ms) DO UPDATE SET power_watts_mean = excluded.power_watts_mean, \
                power_watts_min = excluded.power_watts_min, power_watts_max = excluded.power_watts_max, \
                energy_wh = excluded.energy_wh, sm_active_mean = excluded.sm_active_mean, \
                gpus_throttling_max = excluded.gpus_throttling_max, \
                throttled_gpu_seconds = excluded.throttled_gpu_seconds, samples = excluded.samples, {set}",
            thr = thr_list(),
            set = thr_set(),
        );
        let mut q = sqlx::query(&sql)
            .bind(&r.scope)
            .bind(r.at_ms)
            .bind(r.power_watts_mean)
            .bind(r.power_watts_min)
            .bind(r.power_watts_max)
            .bind(r.energy_wh)
            .bind(i64::from(r.gpus_throttling_max))
            .bind(r.throttled_gpu_seconds)
            .bind(i64::from(r.samples));
        for v in r.throttled_s_by_reason {
            q = q.bind(v);
        }
        if let Some(v) = r.sm_active_mean {
            q = q.bind(v);
        }
        q.execute(&self.pool).await?;
        Ok(())
    }

    /// One-hour rollups of a scope with `from_ms <= at_ms < to_ms`, oldest first.
    pub async fn rollups_1h(
        &self,
        scope: &str,
        from_ms: UnixMs,
        to_ms: UnixMs,
    ) -> Result<Vec<Rollup1h>> {
        let rows = sqlx::query(&format!(
            "SELECT scope, at_ms, power_watts_mean, power_watts_min, power_watts_max, energy_wh, sm_active_mean, \
                    gpus_throttling_max, throttled_gpu_seconds, samples, {} \
             FROM rollup_1h WHERE scope = $1 AND at_ms >= $2 AND at_ms < $3 ORDER BY at_ms",
            thr_list()
        ))
        .bind(scope)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Rollup1h {
                    scope: r.try_get("scope")?,
                    at_ms: r.try_get("at_ms")?,
                    power_watts_mean: r.try_get("power_watts_mean")?,
                    power_watts_min: r.try_get("power_watts_min")?,
                    power_watts_max: r.try_get("power_watts_max")?,
                    energy_wh: r.try_get("energy_wh")?,
                    sm_active_mean: r.try_get("sm_active_mean")?,
                    gpus_throttling_max: u32::try_from(r.try_get::<i64, _>("gpus_throttling_max")?)
                        .map_err(|_| StoreError::Corrupt("throttling".into()))?,
                    throttled_gpu_seconds: r.try_get("throttled_gpu_seconds")?,
                    throttled_s_by_reason: thr_of(r)?,
                    samples: u32::try_from(r.try_get::<i64, _>("samples")?)
                        .map_err(|_| StoreError::Corrupt("samples".into()))?,
                })
            })
            .collect()
    }

    /// Removes one-hour rollups older than `before_ms`; returns how many.
    pub async fn prune_rollups_1h(&self, before_ms: UnixMs) -> Result<u64> {
        let done = sqlx::query("DELETE FROM rollup_1h WHERE at_ms < $1")
            .bind(before_ms)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    pub async fn prune_rollups(&self, before_ms: UnixMs) -> Result<u64> {
        let done = sqlx::query("DELETE FROM rollup_1m WHERE at_ms < $1")
            .bind(before_ms)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }
}
