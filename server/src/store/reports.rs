//! Report rollups: GPU-seconds by state, losses and energy per hour and per UTC day and
//! group, added to as each hour goes (so a report sums days and never reads raw telemetry).

use app::model::UnixMs;
use sqlx::Row;

use super::{Dialect, Result, Store, StoreError};

/// Seconds and energy of one group over some time; every field adds up.
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
}

impl ReportSums {
    pub fn add(&mut self, o: &ReportSums) {
        self.capacity_gs += o.capacity_gs;
        self.allocated_gs += o.allocated_gs;
        self.busy_gs += o.busy_gs;
        self.drained_gs += o.drained_gs;
        self.down_gs += o.down_gs;
        self.throttle_lost_gs += o.throttle_lost_gs;
        self.failure_lost_gs += o.failure_lost_gs;
        self.energy_wh += o.energy_wh;
        self.rack_share_s += o.rack_share_s;
    }

    pub fn is_zero(&self) -> bool {
        *self == ReportSums::default()
    }
}

/// What to add to one group's hour.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportDelta {
    /// `cluster`, `account`, `partition`, `user`, `rack` or `domain`.
    pub kind: &'static str,
    pub key: String,
    /// The hour's start.
    pub at_ms: UnixMs,
    pub sums: ReportSums,
}

const SUMS: &str = "SUM(capacity_gs) AS capacity_gs, SUM(allocated_gs) AS allocated_gs, SUM(busy_gs) AS busy_gs, \
     SUM(drained_gs) AS drained_gs, SUM(down_gs) AS down_gs, SUM(throttle_lost_gs) AS throttle_lost_gs, \
     SUM(failure_lost_gs) AS failure_lost_gs, SUM(energy_wh) AS energy_wh, SUM(rack_share_s) AS rack_share_s";

fn sums(r: &sqlx::any::AnyRow) -> Result<ReportSums> {
    Ok(ReportSums {
        capacity_gs: r.try_get("capacity_gs")?,
        allocated_gs: r.try_get("allocated_gs")?,
        busy_gs: r.try_get("busy_gs")?,
        drained_gs: r.try_get("drained_gs")?,
        down_gs: r.try_get("down_gs")?,
        throttle_lost_gs: r.try_get("throttle_lost_gs")?,
        failure_lost_gs: r.try_get("failure_lost_gs")?,
        energy_wh: r.try_get("energy_wh")?,
        rack_share_s: r.try_get("rack_share_s")?,
    })
}

/// Rows per INSERT: 12 values each, far under SQLite's bind limit.
const BATCH: usize = 200;
const DAY_MS: i64 = 86_400_000;

/// An additive upsert of `n` rows into `table` (`report_1h` or `report_1d`).
/// The upsert of `n` rows. SQLite gets bare `?` placeholders: it looks a numbered one up by
/// a linear scan, and sqlx asks for every one of them, which made a 2,400-parameter batch
/// cost milliseconds of CPU.
fn upsert_sql(table: &str, n: usize, dialect: Dialect) -> String {
    let mut sql = format!(
        "INSERT INTO {table} (kind, group_key, at_ms, capacity_gs, allocated_gs, busy_gs, drained_gs, \
         down_gs, throttle_lost_gs, failure_lost_gs, energy_wh, rack_share_s) VALUES "
    );
    for i in 0..n {
        sql.push_str(if i == 0 { "(" } else { ",(" });
        for c in 1..=12 {
            if c > 1 {
                sql.push(',');
            }
            match dialect {
                Dialect::Sqlite => sql.push('?'),
                Dialect::Postgres => sql.push_str(&format!("${}", i * 12 + c)),
            }
        }
        sql.push(')');
    }
    sql.push_str(" ON CONFLICT (kind, at_ms, group_key) DO UPDATE SET ");
    let cols = [
        "capacity_gs",
        "allocated_gs",
        "busy_gs",
        "drained_gs",
        "down_gs",
        "throttle_lost_gs",
        "failure_lost_gs",
        "energy_wh",
        "rack_share_s",
    ];
    let set: Vec<String> = cols
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
                    q = q
                        .bind(*kind)
                        .bind(*key)
                        .bind(*at_ms)
                        .bind(s.capacity_gs)
                        .bind(s.allocated_gs)
                        .bind(s.busy_gs)
                        .bind(s.drained_gs)
                        .bind(s.down_gs)
                        .bind(s.throttle_lost_gs)
                        .bind(s.failure_lost_gs)
                        .bind(s.energy_wh)
                        .bind(s.rack_share_s);
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
            "SELECT group_key, {SUMS} FROM {table} WHERE kind = $1 AND at_ms >= $2 AND at_ms < $3 \
             GROUP BY group_key ORDER BY group_key"
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
            "SELECT ((at_ms - $4) / $5) * $5 + $4 AS bucket, {SUMS} FROM {table} \
             WHERE kind = $1 AND group_key = $2 AND at_ms >= $3 AND at_ms < $6 \
             GROUP BY 1 ORDER BY 1"
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
