//! What reliability reads: hardware evidence (counter steps the pipeline saw), XIDs, node
//! state changes with their reasons, operators' requeues and the jobs involved, for a
//! period. Bounded: each read stops at [`MAX_ROWS`] rows.

use app::model::{Job, NodeState, UnixMs};
use sqlx::Row;

use super::{u64_of, Result, Store, StoreError};

/// The most rows one reliability read returns (per kind).
pub const MAX_ROWS: i64 = 200_000;

/// A hardware counter's step.
#[derive(Clone, Debug, PartialEq)]
pub struct EvidenceRow {
    pub node: String,
    pub gpu: Option<u32>,
    pub kind: String,
    pub at_ms: UnixMs,
    pub amount: u64,
}

/// An XID seen on a GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct XidRow {
    pub node: String,
    pub gpu: u32,
    pub xid: u32,
    pub at_ms: UnixMs,
}

/// A node state change with the scheduler's reason.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeEventRow {
    pub node: String,
    pub at_ms: UnixMs,
    pub state: NodeState,
    pub reason: String,
}

fn u32_of(v: i64, what: &str) -> Result<u32> {
    u32::try_from(v).map_err(|_| StoreError::Corrupt(format!("{what} out of range: {v}")))
}

impl Store {
    /// Records a hardware counter's step (idempotent).
    pub async fn put_evidence(
        &self,
        node: &str,
        gpu: Option<u32>,
        kind: &str,
        at_ms: UnixMs,
        amount: u64,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO evidence_events (node, gpu, kind, at_ms, amount) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT DO NOTHING",
        )
        .bind(node)
        .bind(gpu.map_or(-1, i64::from))
        .bind(kind)
        .bind(at_ms)
        .bind(i64::try_from(amount).unwrap_or(i64::MAX))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Counter steps from `from_ms` to `to_ms`, in time order.
    pub async fn evidence_between(
        &self,
        from_ms: UnixMs,
        to_ms: UnixMs,
    ) -> Result<Vec<EvidenceRow>> {
        let rows = sqlx::query(
            "SELECT node, gpu, kind, at_ms, amount FROM evidence_events \
             WHERE at_ms >= $1 AND at_ms <= $2 ORDER BY at_ms, node, gpu LIMIT $3",
        )
        .bind(from_ms)
        .bind(to_ms)
        .bind(MAX_ROWS)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let gpu: i64 = r.try_get("gpu")?;
                Ok(EvidenceRow {
                    node: r.try_get("node")?,
                    gpu: (gpu >= 0).then(|| u32_of(gpu, "gpu")).transpose()?,
                    kind: r.try_get("kind")?,
                    at_ms: r.try_get("at_ms")?,
                    amount: u64_of(r.try_get("amount")?, "amount")?,
                })
            })
            .collect()
    }

    /// XIDs from `from_ms` to `to_ms`, in time order.
    pub async fn xids_between(&self, from_ms: UnixMs, to_ms: UnixMs) -> Result<Vec<XidRow>> {
        let rows = sqlx::query(
            "SELECT node, gpu, xid, at_ms FROM xid_events \
             WHERE at_ms >= $1 AND at_ms <= $2 ORDER BY at_ms, node, gpu LIMIT $3",
        )
        .bind(from_ms)
        .bind(to_ms)
        .bind(MAX_ROWS)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(XidRow {
                    node: r.try_get("node")?,
                    gpu: u32_of(r.try_get("gpu")?, "gpu")?,
                    xid: u32_of(r.try_get("xid")?, "xid")?,
                    at_ms: r.try_get("at_ms")?,
                })
            })
            .collect()
    }

    /// Node state changes with reasons from `from_ms` to `to_ms`, by node then time.
    pub async fn node_events_with_reasons(
        &self,
        from_ms: UnixMs,
        to_ms: UnixMs,
    ) -> Result<Vec<NodeEventRow>> {
        let rows = sqlx::query(
            "SELECT node, at_ms, state, reason FROM node_events \
             WHERE at_ms >= $1 AND at_ms <= $2 ORDER BY node, at_ms LIMIT $3",
        )
        .bind(from_ms)
        .bind(to_ms)
        .bind(MAX_ROWS)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let s: String = r.try_get("state")?;
                Ok(NodeEventRow {
                    node: r.try_get("node")?,
                    at_ms: r.try_get("at_ms")?,
                    state: NodeState::ALL
                        .into_iter()
                        .find(|x| x.label() == s)
                        .unwrap_or(NodeState::Unknown),
                    reason: r.try_get("reason")?,
                })
            })
            .collect()
    }

    /// Requeues operators asked for through Gantry from `from_ms` to `to_ms`: (job id, when
    /// the call was made, else when it was recorded).
    pub async fn operator_requeues(
        &self,
        from_ms: UnixMs,
        to_ms: UnixMs,
    ) -> Result<Vec<(u64, UnixMs)>> {
        let rows = sqlx::query(
            "SELECT target, COALESCE(called_ms, at_ms) AS at FROM audit \
             WHERE action IN ('requeue', 'requeue_hold') AND at_ms >= $1 AND at_ms <= $2 \
             ORDER BY at_ms LIMIT $3",
        )
        .bind(from_ms)
        .bind(to_ms)
        .bind(MAX_ROWS)
        .fetch_all(&self.pool)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let target: String = r.try_get("target")?;
            // Targets of job actions are job ids; anything else is not a requeue of a job.
            if let Ok(id) = target.trim().parse::<u64>() {
                out.push((id, r.try_get("at")?));
            }
        }
        Ok(out)
    }

    /// The jobs with a transition from `from_ms` to `to_ms`.
    pub async fn jobs_with_events_between(
        &self,
        from_ms: UnixMs,
        to_ms: UnixMs,
    ) -> Result<Vec<Job>> {
        let q = format!(
            "SELECT {} FROM jobs WHERE id IN \
             (SELECT DISTINCT job_id FROM job_events WHERE at_ms >= $1 AND at_ms <= $2) LIMIT $3",
            Self::JOB_COLUMNS
        );
        let rows = sqlx::query(&q)
            .bind(from_ms)
            .bind(to_ms)
            .bind(MAX_ROWS)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(Self::job_of).collect()
    }
}
