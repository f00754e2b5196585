//! Jobs (one row each, upserted as they change) and their state transitions.

use app::model::{Job, JobState, UnixMs};
use sqlx::Row;

use super::{u64_of, Result, Store, StoreError};

/// A state transition of a job.
#[derive(Clone, Debug, PartialEq)]
pub struct JobEvent {
    pub job_id: u64,
    pub at_ms: UnixMs,
    pub state: JobState,
    pub nodes: Vec<String>,
    pub detail: String,
}

/// A run's start with the estimates Slurm gave it while it waited.
#[derive(Clone, Debug, PartialEq)]
pub struct StartEstimate {
    pub job_id: u64,
    pub partition: String,
    pub first_seen_ms: UnixMs,
    pub first_est_ms: UnixMs,
    pub last_est_ms: UnixMs,
    pub start_ms: UnixMs,
}

/// Runs read at most by one accuracy query (a week of a busy cluster's starts).
pub const MAX_ESTIMATES: i64 = 200_000;

fn join_nodes(nodes: &[String]) -> String {
    nodes.join(",")
}

fn split_nodes(s: &str) -> Vec<String> {
    s.split(',')
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

impl Store {
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

    pub(super) fn job_of(r: &sqlx::any::AnyRow) -> Result<Job> {
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

    pub(super) const JOB_COLUMNS: &'static str =
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
}

impl Store {
    /// Records a run's start with its estimates (once per job and start).
    pub async fn put_start_estimate(&self, e: &StartEstimate) -> Result<()> {
        sqlx::query(
            "INSERT INTO start_estimates (job_id, start_ms, partition_name, first_seen_ms, \
                                          first_est_ms, last_est_ms) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (job_id, start_ms) DO NOTHING",
        )
        .bind(e.job_id as i64)
        .bind(e.start_ms)
        .bind(&e.partition)
        .bind(e.first_seen_ms)
        .bind(e.first_est_ms)
        .bind(e.last_est_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Runs that started at or after `since_ms`, newest first, at most [`MAX_ESTIMATES`].
    pub async fn start_estimates_since(&self, since_ms: UnixMs) -> Result<Vec<StartEstimate>> {
        let rows = sqlx::query(
            "SELECT job_id, partition_name, first_seen_ms, first_est_ms, last_est_ms, start_ms \
             FROM start_estimates WHERE start_ms >= $1 ORDER BY start_ms DESC LIMIT $2",
        )
        .bind(since_ms)
        .bind(MAX_ESTIMATES)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(StartEstimate {
                    job_id: u64_of(r.try_get(0)?, "job id")?,
                    partition: r.try_get(1)?,
                    first_seen_ms: r.try_get(2)?,
                    first_est_ms: r.try_get(3)?,
                    last_est_ms: r.try_get(4)?,
                    start_ms: r.try_get(5)?,
                })
            })
            .collect()
    }
}
