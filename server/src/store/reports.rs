//! Report rollups: GPU-seconds by state, losses and energy per hour and per UTC day and
//! group, added to as each hour goes (so a report sums days and never reads raw telemetry).

use app::model::UnixMs;
use sqlx::Row;

use super::{Dialect, Result, Store, StoreError};

/// Seconds and energy of one group over some time; every field adds up.
///
/// The last eight are the badput ledger (the reports' ledger module defines them): they
/// split `allocated_gs` with the idle remainder, and `restart_wait_gs` adds the time a job
/// waited to run again after an interruption.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReportSums {
    pub capacity_gs: f64,
    pub allocated_gs: f64,
    pub busy_gs: f64,
    pub drained_gs: f64,
    pub down_gs: f64,
    pub throttle_lost_gs: f64,
    pub failure_lost_gs: f64,
    pub energy_wh: f64,
    /// Rack-seconds this group stands for (a GPU-second is 1/GPUs-in-its-rack of one),
    /// which the rack overhead is charged by.
    pub rack_share_s: f64,
    pub startup_gs: f64,
    pub unseen_gs: f64,
    pub checkpoint_gs: f64,
    pub hung_gs: f64,
    pub computing_gs: f64,
    pub slowed_gs: f64,
    pub reexec_gs: f64,
    pub restart_wait_gs: f64,
    /// The GPUs' own energy: DCGM's energy counter's increase where it counts, else their
    /// power integrated over the tick; of which `gpu_energy_est_wh` was integrated.
    pub gpu_energy_wh: f64,
    pub gpu_energy_est_wh: f64,
    /// GPU-seconds of running jobs' GPUs held idle past `alerts.idle_gpu_minutes`.
    pub held_idle_gs: f64,
}

/// The columns of [`ReportSums`], in the order of [`ReportSums::values`].
const COLS: [&str; 20] = [
    "capacity_gs",
    "allocated_gs",
    "busy_gs",
    "drained_gs",
    "down_gs",
    "throttle_lost_gs",
    "failure_lost_gs",
    "energy_wh",
    "rack_share_s",
    "startup_gs",
    "unseen_gs",
    "checkpoint_gs",
    "hung_gs",
    "computing_gs",
    "slowed_gs",
    "reexec_gs",
    "restart_wait_gs",
    "gpu_energy_wh",
    "gpu_energy_est_wh",
    "held_idle_gs",
];

impl ReportSums {
    pub fn values(&self) -> [f64; 20] {
        [
            self.capacity_gs,
            self.allocated_gs,
            self.busy_gs,
            self.drained_gs,
            self.down_gs,
            self.throttle_lost_gs,
            self.failure_lost_gs,
            self.energy_wh,
            self.rack_share_s,
            self.startup_gs,
            self.unseen_gs,
            self.checkpoint_gs,
            self.hung_gs,
            self.computing_gs,
            self.slowed_gs,
            self.reexec_gs,
            self.restart_wait_gs,
            self.gpu_energy_wh,
            self.gpu_energy_est_wh,
            self.held_idle_gs,
        ]
    }

    pub fn from_values(v: [f64; 20]) -> ReportSums {
        let [capacity_gs, allocated_gs, busy_gs, drained_gs, down_gs, throttle_lost_gs, failure_lost_gs, energy_wh, rack_share_s, startup_gs, unseen_gs, checkpoint_gs, hung_gs, computing_gs, slowed_gs, reexec_gs, restart_wait_gs, gpu_energy_wh, gpu_energy_est_wh, held_idle_gs] =
            v;
        ReportSums {
            capacity_gs,
            allocated_gs,
            busy_gs,
            drained_gs,
            down_gs,
            throttle_lost_gs,
            failure_lost_gs,
            energy_wh,
            rack_share_s,
            startup_gs,
            unseen_gs,
            checkpoint_gs,
            hung_gs,
            computing_gs,
            slowed_gs,
            reexec_gs,
            restart_wait_gs,
            gpu_energy_wh,
            gpu_energy_est_wh,
            held_idle_gs,
        }
    }

    pub fn add(&mut self, o: &ReportSums) {
        let (a, b) = (self.values(), o.values());
        *self = ReportSums::from_values(std::array::from_fn(|i| a[i] + b[i]));
    }

    pub fn scaled(&self, f: f64) -> ReportSums {
        ReportSums::from_values(self.values().map(|v| v * f))
    }

    pub fn is_zero(&self) -> bool {
        *self == ReportSums::default()
    }
}

/// What to add to one group's hour.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportDelta {
    /// `cluster`, `account`, `partition`, `user`, `rack`, `domain` or `job` (its id).
    pub kind: &'static str,
    pub key: String,
    /// The hour's start.
    pub at_ms: UnixMs,
    pub sums: ReportSums,
}

/// `SUM(c) AS c` for every column.
fn sums_sql() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| {
        COLS.iter()
            .map(|c| format!("SUM({c}) AS {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

fn sums(r: &sqlx::any::AnyRow) -> Result<ReportSums> {
    let mut v = [0.0; COLS.len()];
    for (x, c) in v.iter_mut().zip(COLS) {
        *x = r.try_get(c)?;
    }
    Ok(ReportSums::from_values(v))
}

/// Rows per INSERT: 20 values each, far under SQLite's and PostgreSQL's bind limits.
const BATCH: usize = 200;
const DAY_MS: i64 = 86_400_000;

/// An additive upsert of `n` rows into `table` (`report_1h` or `report_1d`).
/// The upsert of `n` rows. SQLite gets bare `?` placeholders: it looks a numbered one up by
/// a linear scan, and sqlx asks for every one of them, which made a 2,400-parameter batch
/// cost milliseconds of CPU.
fn upsert_sql(table: &str, n: usize, dialect: Dialect) -> String {
    const WIDTH: usize = 3 + COLS.len();
    let mut sql = format!(
        "INSERT INTO {table} (kind, group_key, at_ms, {}) VALUES ",
        COLS.join(", ")
    );
    for i in 0..n {
        sql.push_str(if i == 0 { "(" } else { ",(" });
        for c in 1..=WIDTH {
            if c > 1 {
                sql.push(',');
            }
            match dialect {
                Dialect::Sqlite => sql.push('?'),
                Dialect::Postgres => sql.push_str(&format!("${}", i * WIDTH + c)),
            }
        }
        sql.push(')');
    }
    sql.push_str(" ON CONFLICT (kind, at_ms, group_key) DO UPDATE SET ");
    let set: Vec<String> = COLS
        .iter()
        .map(|c| format!("{c} = {table}.{c} + excluded.{c}"))
        .collect();
    sql.push_str(&set.join(", "));
    sql
}

impl Store {
    /// Adds `deltas` to their hours and days, in one transaction: all or nothing.
    pub async fn add_report_deltas(&self, deltas: &[ReportDelta]) -> Result<()> {
        self.add_report_deltas_as(deltas, None).await
    }

    /// As [`Store::add_report_deltas`], as the leader of `fence`'s term, noting that
    /// reports are now accounted through `through_ms` (source time) in the same
    /// transaction; refused ([`StoreError::Fenced`]) once another replica holds a newer
    /// term, so a deposed leader can never add a delta twice.
    pub async fn add_report_deltas_fenced(
        &self,
        deltas: &[ReportDelta],
        fence: &super::Fence,
        through_ms: UnixMs,
    ) -> Result<()> {
        self.add_report_deltas_as(deltas, Some((fence, through_ms)))
            .await
    }

    async fn add_report_deltas_as(
        &self,
        deltas: &[ReportDelta],
        fence: Option<(&super::Fence, UnixMs)>,
    ) -> Result<()> {
        // One row per key and table: PostgreSQL refuses an upsert that touches a row twice.
        type Merged<'a> = std::collections::BTreeMap<(&'a str, &'a str, UnixMs), ReportSums>;
        let (mut hours, mut days) = (Merged::new(), Merged::new());
        for d in deltas {
            let day = d.at_ms - d.at_ms.rem_euclid(DAY_MS);
            for (m, at) in [(&mut hours, d.at_ms), (&mut days, day)] {
                m.entry((d.kind, d.key.as_str(), at))
                    .or_default()
                    .add(&d.sums);
            }
        }
        let mut tx = self.pool.begin().await?;
        if let Some((f, through_ms)) = fence {
            // First, so the lease row stays locked (PostgreSQL) until the deltas commit: a
            // takeover waits for them, and this leader's later writes see its new term.
            let done = sqlx::query(
                "UPDATE leader_lease SET accounted_ms = $1 WHERE id = 1 AND holder = $2 AND term = $3",
            )
            .bind(through_ms)
            .bind(&f.holder)
            .bind(f.term)
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() != 1 {
                return Err(StoreError::Fenced(f.term));
            }
        }
        for (table, rows) in [("report_1h", hours), ("report_1d", days)] {
            let rows: Vec<_> = rows.into_iter().collect();
            for chunk in rows.chunks(BATCH) {
                let sql = upsert_sql(table, chunk.len(), self.dialect);
                let mut q = sqlx::query(&sql);
                for ((kind, key, at_ms), s) in chunk {
                    q = q.bind(*kind).bind(*key).bind(*at_ms);
                    for v in s.values() {
                        q = q.bind(v);
                    }
                }
                q.execute(&mut *tx).await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// Each group of `kind` summed over hours `from_ms <= at_ms < to_ms`, by key; from the
    /// daily rows when the bounds are whole UTC days (every report period is).
    pub async fn report_groups(
        &self,
        kind: &str,
        from_ms: UnixMs,
        to_ms: UnixMs,
    ) -> Result<Vec<(String, ReportSums)>> {
        let table = if from_ms.rem_euclid(DAY_MS) == 0 && to_ms.rem_euclid(DAY_MS) == 0 {
            "report_1d"
        } else {
            "report_1h"
        };
        let rows = sqlx::query(&format!(
            "SELECT group_key, {} FROM {table} WHERE kind = $1 AND at_ms >= $2 AND at_ms < $3 \
             GROUP BY group_key ORDER BY group_key",
            sums_sql()
        ))
        .bind(kind)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("group_key")?, sums(r)?)))
            .collect()
    }

    /// One group's sums over hours `from_ms <= at_ms < to_ms` (zero when it has no rows),
    /// and the first of those hours with a row: when the rollups began counting it.
    pub async fn report_total(
        &self,
        kind: &str,
        key: &str,
        from_ms: UnixMs,
        to_ms: UnixMs,
    ) -> Result<(ReportSums, Option<UnixMs>)> {
        let row = sqlx::query(&format!(
            "SELECT COUNT(*) AS n, MIN(at_ms) AS first_ms, {} FROM report_1h \
             WHERE kind = $1 AND group_key = $2 AND at_ms >= $3 AND at_ms < $4",
            sums_sql()
        ))
        .bind(kind)
        .bind(key)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_one(&self.pool)
        .await?;
        if row.try_get::<i64, _>("n")? == 0 {
            return Ok((ReportSums::default(), None));
        }
        Ok((sums(&row)?, row.try_get::<Option<i64>, _>("first_ms")?))
    }

    /// The first hour at or after `from_ms` with a row of `kind`'s group `key` (one step
    /// down the primary key's index): when the rollups began counting it.
    pub async fn report_first_at(
        &self,
        kind: &str,
        key: &str,
        from_ms: UnixMs,
    ) -> Result<Option<UnixMs>> {
        let row = sqlx::query(
            "SELECT MIN(at_ms) AS at_ms FROM report_1h \
             WHERE kind = $1 AND group_key = $2 AND at_ms >= $3",
        )
        .bind(kind)
        .bind(key)
        .bind(from_ms)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get::<Option<i64>, _>("at_ms")?)
    }

    /// One group's sums per bucket of `bucket_ms` (a multiple of an hour), oldest first.
    pub async fn report_series(
        &self,
        kind: &str,
        key: &str,
        from_ms: UnixMs,
        to_ms: UnixMs,
        bucket_ms: i64,
    ) -> Result<Vec<(UnixMs, ReportSums)>> {
        let bucket_ms = bucket_ms.max(3_600_000);
        let table = if bucket_ms.rem_euclid(DAY_MS) == 0 && from_ms.rem_euclid(DAY_MS) == 0 {
            "report_1d"
        } else {
            "report_1h"
        };
        // Integer division in both dialects: the bucket's start, counted from `from_ms`.
        let rows = sqlx::query(&format!(
            "SELECT ((at_ms - $4) / $5) * $5 + $4 AS bucket, {} FROM {table} \
             WHERE kind = $1 AND group_key = $2 AND at_ms >= $3 AND at_ms < $6 \
             GROUP BY 1 ORDER BY 1",
            sums_sql()
        ))
        .bind(kind)
        .bind(key)
        .bind(from_ms)
        .bind(from_ms)
        .bind(bucket_ms)
        .bind(to_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("bucket")?, sums(r)?)))
            .collect()
    }

    /// Removes hours, and days that ended, before `before_ms`.
    pub async fn prune_report_rollups(&self, before_ms: UnixMs) -> Result<u64> {
        let hours = sqlx::query("DELETE FROM report_1h WHERE at_ms < $1")
            .bind(before_ms)
            .execute(&self.pool)
            .await?;
        let days = sqlx::query("DELETE FROM report_1d WHERE at_ms < $1")
            .bind(before_ms - DAY_MS)
            .execute(&self.pool)
            .await?;
        Ok(hours.rows_affected() + days.rows_affected())
    }
}
