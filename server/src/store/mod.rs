//! The store: inventory, job history, checkpoints and telemetry rollups, on SQLite (one
//! file, WAL; the embedded default) or PostgreSQL, chosen by the database URL.
//!
//! One set of portable queries runs on both through sqlx's `Any` driver: `$N`
//! placeholders, `ON CONFLICT ... DO UPDATE`, BIGINT integers, times as Unix ms, booleans
//! as 0/1. Only the migrations differ per dialect (`migrations/sqlite`, `migrations/postgres`),
//! and the same test story runs against both. Rows are converted into the app's model types
//! here; nothing above this module sees sqlx.

use std::str::FromStr;

use app::model::{Checkpoint, Cooling, Inventory, Job, JobState, NodeState, Rack, UnixMs};
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Row};

mod alerts;
mod auth;
mod reports;
pub use alerts::NewAlert;
pub use auth::{UserRow, AUDIT_MAX_ROWS};
pub use reports::{ReportDelta, ReportSums};

/// Which database a store talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// Storage failures. The message is for logs; HTTP maps all of these to one
/// "storage unavailable" answer without details.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unsupported database URL (expected sqlite: or postgres://)")]
    UnsupportedUrl,
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored row is invalid: {0}")]
    Corrupt(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// A handle to the database; cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    dialect: Dialect,
}

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

/// A state transition of a job.
#[derive(Clone, Debug, PartialEq)]
pub struct JobEvent {
    pub job_id: u64,
    pub at_ms: UnixMs,
    pub state: JobState,
    pub nodes: Vec<String>,
    pub detail: String,
}

fn dialect_of(url: &str) -> Result<Dialect> {
    if url.starts_with("sqlite:") {
        Ok(Dialect::Sqlite)
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Dialect::Postgres)
    } else {
        Err(StoreError::UnsupportedUrl)
    }
}

fn join_nodes(nodes: &[String]) -> String {
    nodes.join(",")
}

fn split_nodes(s: &str) -> Vec<String> {
    s.split(',')
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

fn cooling_str(c: Cooling) -> &'static str {
    match c {
        Cooling::Air => "air",
        Cooling::Liquid => "liquid",
    }
}

fn u64_of(v: i64, what: &str) -> Result<u64> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("{what} is negative: {v}")))
}

impl Store {
    /// Connects and runs the migrations of the URL's dialect. A SQLite file is created if
    /// missing and put in WAL mode.
    pub async fn connect(url: &str) -> Result<Store> {
        Self::connect_with(url, None).await
    }

    /// As [`Store::connect`], with at most `max_connections` (tests use 1 to make
    /// per-connection behaviour deterministic).
    pub async fn connect_with(url: &str, max_connections: Option<u32>) -> Result<Store> {
        sqlx::any::install_default_drivers();
        let dialect = dialect_of(url)?;
        let url = match dialect {
            Dialect::Sqlite if !url.contains("mode=") => {
                format!("{url}{}mode=rwc", if url.contains('?') { "&" } else { "?" })
            }
            _ => url.to_string(),
        };
        let opts = AnyConnectOptions::from_str(&url)?;
        let pool = AnyPoolOptions::new()
            .max_connections(max_connections.unwrap_or(if dialect == Dialect::Sqlite {
                4
            } else {
                8
            }))
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect_with(opts)
            .await?;
        if dialect == Dialect::Sqlite {
            // WAL is a property of the file: set once, it holds for every connection.
            sqlx::query("PRAGMA journal_mode=WAL")
                .execute(&pool)
                .await?;
        }
        let store = Store { pool, dialect };
        store.migrate().await?;
        Ok(store)
    }

    async fn migrate(&self) -> Result<()> {
        match self.dialect {
            Dialect::Sqlite => {
                sqlx::migrate!("../migrations/sqlite")
                    .run(&self.pool)
                    .await?
            }
            Dialect::Postgres => {
                sqlx::migrate!("../migrations/postgres")
                    .run(&self.pool)
                    .await?
            }
        }
        Ok(())
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Checks the database answers (for `/healthz`).
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// SQLite's journal mode (`wal` expected); `None` on PostgreSQL.
    pub async fn sqlite_journal_mode(&self) -> Result<Option<String>> {
        if self.dialect != Dialect::Sqlite {
            return Ok(None);
        }
        let row = sqlx::query("PRAGMA journal_mode")
            .fetch_one(&self.pool)
            .await?;
        Ok(Some(row.try_get::<String, _>(0)?))
    }

    /// Replaces the stored racks and nodes with `inv`'s, in one transaction.
    pub async fn put_inventory(&self, inv: &Inventory) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM racks").execute(&mut *tx).await?;
        sqlx::query("DELETE FROM nodes").execute(&mut *tx).await?;
        for r in &inv.racks {
            sqlx::query(
                "INSERT INTO racks (name, row_name, position, power_limit_watts, cooling, inlet_limit_celsius) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&r.name)
            .bind(&r.row)
            .bind(i64::from(r.position))
            .bind(r.power_limit_watts)
            .bind(cooling_str(r.cooling))
            .bind(r.inlet_limit_celsius)
            .execute(&mut *tx)
            .await?;
        }
        for n in &inv.nodes {
            sqlx::query("INSERT INTO nodes (name, rack, u_position, gpus) VALUES ($1, $2, $3, $4)")
                .bind(&n.name)
                .bind(&n.rack)
                .bind(i64::from(n.u_position))
                .bind(n.gpus.len() as i64)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn racks(&self) -> Result<Vec<Rack>> {
        let rows = sqlx::query(
            "SELECT name, row_name, position, power_limit_watts, cooling, inlet_limit_celsius \
             FROM racks ORDER BY row_name, position",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|r| {
                let cooling = match r.try_get::<String, _>("cooling")?.as_str() {
                    "air" => Cooling::Air,
                    "liquid" => Cooling::Liquid,
                    other => return Err(StoreError::Corrupt(format!("cooling {other:?}"))),
                };
                Ok(Rack {
                    name: r.try_get("name")?,
                    row: r.try_get("row_name")?,
                    position: u32::try_from(r.try_get::<i64, _>("position")?)
                        .map_err(|_| StoreError::Corrupt("rack position".into()))?,
                    power_limit_watts: r.try_get("power_limit_watts")?,
                    cooling,
                    inlet_limit_celsius: r.try_get("inlet_limit_celsius")?,
                })
            })
            .collect()
    }

    pub async fn node_count(&self) -> Result<u64> {
        let row = sqlx::query("SELECT COUNT(*) FROM nodes")
            .fetch_one(&self.pool)
            .await?;
        u64_of(row.try_get::<i64, _>(0)?, "node count")
    }

    /// Records a job's current state: upserts the job and appends the transition to its
    /// history (once: the same state at the same time is not recorded twice).
    pub async fn record_job(&self, job: &Job, at_ms: UnixMs, detail: &str) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let requeued = i64::from(job.state == JobState::Requeued);
        sqlx::query(
            "INSERT INTO jobs (id, name, user_name, account, partition_name, state, nodes, gpus, \
                               submit_ms, start_ms, end_ms, requeue_count, updated_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
             ON CONFLICT (id) DO UPDATE SET name = excluded.name, user_name = excluded.user_name, \
                account = excluded.account, partition_name = excluded.partition_name, \
                state = excluded.state, nodes = excluded.nodes, gpus = excluded.gpus, \
                submit_ms = excluded.submit_ms, start_ms = excluded.start_ms, end_ms = excluded.end_ms, \
                requeue_count = jobs.requeue_count + CASE WHEN jobs.state <> 'requeued' AND excluded.state = 'requeued' THEN 1 ELSE 0 END, \
                updated_ms = excluded.updated_ms",
        )
        .bind(job.id as i64)
        .bind(&job.name)
        .bind(&job.user)
        .bind(&job.account)
        .bind(&job.partition)
        .bind(job.state.label())
        .bind(join_nodes(&job.nodes))
        .bind(i64::from(job.gpus))
        .bind(job.submit_ms)
        .bind(job.start_ms)
        .bind(job.end_ms)
        .bind(requeued)
        .bind(at_ms)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO job_events (job_id, at_ms, state, nodes, detail) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (job_id, at_ms, state) DO NOTHING",
        )
        .bind(job.id as i64)
        .bind(at_ms)
        .bind(job.state.label())
        .bind(join_nodes(&job.nodes))
        .bind(detail)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    fn event_of(r: &sqlx::any::AnyRow) -> Result<JobEvent> {
        Ok(JobEvent {
            job_id: u64_of(r.try_get("job_id")?, "job id")?,
            at_ms: r.try_get("at_ms")?,
            state: JobState::parse(&r.try_get::<String, _>("state")?),
            nodes: split_nodes(&r.try_get::<String, _>("nodes")?),
            detail: r.try_get("detail")?,
        })
    }

    fn job_of(r: &sqlx::any::AnyRow) -> Result<Job> {
        Ok(Job {
            id: u64_of(r.try_get("id")?, "job id")?,
            name: r.try_get("name")?,
            user: r.try_get("user_name")?,
            account: r.try_get("account")?,
            partition: r.try_get("partition_name")?,
            state: JobState::parse(&r.try_get::<String, _>("state")?),
            nodes: split_nodes(&r.try_get::<String, _>("nodes")?),
            gpus: u32::try_from(r.try_get::<i64, _>("gpus")?)
                .map_err(|_| StoreError::Corrupt("job gpus".into()))?,
            submit_ms: r.try_get("submit_ms")?,
            start_ms: r.try_get("start_ms")?,
            end_ms: r.try_get("end_ms")?,
        })
    }

    const JOB_COLUMNS: &'static str =
        "id, name, user_name, account, partition_name, state, nodes, gpus, submit_ms, start_ms, end_ms";

    pub async fn job(&self, id: u64) -> Result<Option<Job>> {
        let q = format!("SELECT {} FROM jobs WHERE id = $1", Self::JOB_COLUMNS);
        let row = sqlx::query(&q)
            .bind(id as i64)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(Self::job_of).transpose()
    }

    /// Jobs in `state`, newest submission first.
    pub async fn jobs_in_state(&self, state: JobState, limit: u32) -> Result<Vec<Job>> {
        let q = format!(
            "SELECT {} FROM jobs WHERE state = $1 ORDER BY submit_ms DESC, id DESC LIMIT $2",
            Self::JOB_COLUMNS
        );
        let rows = sqlx::query(&q)
            .bind(state.label())
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(Self::job_of).collect()
    }

    /// Jobs matching `f`, newest submission first, a page at a time; and how many match.
    pub async fn jobs_filtered(&self, f: &app::views::JobFilter) -> Result<(Vec<Job>, u64)> {
        let per_page = f.per_page.clamp(1, 500);
        let page = f.page.min(100_000);
        let text = |o: &Option<String>| o.clone().unwrap_or_default();
        let since = f.since_ms.unwrap_or(0);
        let min_gpus = i64::from(f.min_gpus.unwrap_or(0));
        let filter = "($1 = '' OR state = $1) AND ($2 = '' OR user_name = $2) AND ($3 = '' OR account = $3) \
             AND ($4 = '' OR partition_name = $4) AND gpus >= $5 AND submit_ms >= $6";
        let q = format!(
            "SELECT {} FROM jobs WHERE {filter} ORDER BY submit_ms DESC, id DESC LIMIT $7 OFFSET $8",
            Self::JOB_COLUMNS
        );
        let rows = sqlx::query(&q)
            .bind(text(&f.state))
            .bind(text(&f.user))
            .bind(text(&f.account))
            .bind(text(&f.partition))
            .bind(min_gpus)
            .bind(since)
            .bind(i64::from(per_page))
            .bind(i64::from(page) * i64::from(per_page))
            .fetch_all(&self.pool)
            .await?;
        let jobs = rows.iter().map(Self::job_of).collect::<Result<Vec<_>>>()?;
        let c = sqlx::query(&format!("SELECT COUNT(*) FROM jobs WHERE {filter}"))
            .bind(text(&f.state))
            .bind(text(&f.user))
            .bind(text(&f.account))
            .bind(text(&f.partition))
            .bind(min_gpus)
            .bind(since)
            .fetch_one(&self.pool)
            .await?;
        Ok((jobs, u64_of(c.try_get(0)?, "count")?))
    }

    /// How often a job was requeued, if the job is known.
    pub async fn requeue_count(&self, id: u64) -> Result<Option<u64>> {
        let row = sqlx::query("SELECT requeue_count FROM jobs WHERE id = $1")
            .bind(id as i64)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| u64_of(r.try_get(0)?, "requeue count"))
            .transpose()
    }

    /// A job's transitions in time order.
    pub async fn job_events(&self, id: u64) -> Result<Vec<JobEvent>> {
        let rows = sqlx::query(
            "SELECT job_id, at_ms, state, nodes, detail FROM job_events WHERE job_id = $1 ORDER BY at_ms, id",
        )
        .bind(id as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(Self::event_of).collect()
    }

    /// Records a node's state change.
    pub async fn put_node_event(
        &self,
        node: &str,
        at_ms: UnixMs,
        state: NodeState,
        reason: &str,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO node_events (node, at_ms, state, reason) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (node, at_ms) DO UPDATE SET state = excluded.state, reason = excluded.reason",
        )
        .bind(node)
        .bind(at_ms)
        .bind(state.label())
        .bind(reason)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Node state changes from `from_ms` to `to_ms`, by node then time.
    pub async fn node_events_between(
        &self,
        from_ms: UnixMs,
        to_ms: UnixMs,
    ) -> Result<Vec<(String, UnixMs, NodeState)>> {
        let rows = sqlx::query("SELECT node, at_ms, state FROM node_events WHERE at_ms >= $1 AND at_ms <= $2 ORDER BY node, at_ms")
            .bind(from_ms)
            .bind(to_ms)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                let s: String = r.try_get("state")?;
                let state = NodeState::ALL
                    .into_iter()
                    .find(|x| x.label() == s)
                    .unwrap_or(NodeState::Unknown);
                Ok((r.try_get("node")?, r.try_get("at_ms")?, state))
            })
            .collect()
    }

    /// Every job transition from `from_ms` to `to_ms`, by job then time (for the timeline).
    pub async fn job_events_between(
        &self,
        from_ms: UnixMs,
        to_ms: UnixMs,
    ) -> Result<Vec<JobEvent>> {
        let rows = sqlx::query(
            "SELECT job_id, at_ms, state, nodes, detail FROM job_events WHERE at_ms >= $1 AND at_ms <= $2 ORDER BY job_id, at_ms, id",
        )
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(Self::event_of).collect()
    }

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

    /// Records an XID seen on a GPU (idempotent).
    pub async fn put_xid(&self, node: &str, gpu: u32, xid: u32, at_ms: UnixMs) -> Result<()> {
        sqlx::query(
            "INSERT INTO xid_events (node, gpu, xid, at_ms) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        )
        .bind(node)
        .bind(i64::from(gpu))
        .bind(i64::from(xid))
        .bind(at_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// XIDs of a node, newest first.
    pub async fn xids(&self, node: &str) -> Result<Vec<(u32, u32, UnixMs)>> {
        let rows = sqlx::query(
            "SELECT gpu, xid, at_ms FROM xid_events WHERE node = $1 ORDER BY at_ms DESC",
        )
        .bind(node)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let gpu = u32::try_from(r.try_get::<i64, _>("gpu")?)
                    .map_err(|_| StoreError::Corrupt("gpu".into()))?;
                let xid = u32::try_from(r.try_get::<i64, _>("xid")?)
                    .map_err(|_| StoreError::Corrupt("xid".into()))?;
                Ok((gpu, xid, r.try_get("at_ms")?))
            })
            .collect()
    }

    /// Writes (or rewrites) one minute's rollup.
    pub async fn put_rollup(&self, r: &Rollup) -> Result<()> {
        // A missing double is written as a literal NULL, never bound: sqlx 0.8's Any driver
        // declares a bound NULL double as float4 on PostgreSQL, and a statement prepared so
        // then refuses every real double on that connection (see ARCHITECTURE.md). It comes
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
