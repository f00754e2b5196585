//! Why a pending job waits, on the wire: one category per job, Slurm's own reason code,
//! the evidence in words, and Slurm's start estimate.

use serde::{Deserialize, Serialize};

use crate::model::UnixMs;

/// What a pending job waits for. Every reason code of every Slurm version Gantry reads
/// falls into one of these (the server's `scheduler::pending`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    /// Another job must end first (`Dependency`, `DependencyNeverSatisfied`).
    Dependency,
    /// Held by its owner or an administrator, or asked to start later (`BeginTime`).
    Held,
    /// A QOS, association, partition or account limit.
    Limit,
    /// Not enough free GPUs now; it holds the top of the queue.
    Resources,
    /// Enough GPUs in total, but no block can hold one of its `--segment`s now.
    Segment,
    /// Jobs of higher priority are ahead of it.
    Priority,
    /// Nodes it needs are down, drained or reserved, or its partition is down.
    Nodes,
    /// A run of it ended in a failure and it waits to be started again.
    Failed,
    /// Not yet looked at by the scheduler, or being set up (prolog, cleaning).
    Starting,
}

impl WaitKind {
    pub const ALL: [WaitKind; 9] = [
        WaitKind::Resources,
        WaitKind::Segment,
        WaitKind::Priority,
        WaitKind::Limit,
        WaitKind::Dependency,
        WaitKind::Held,
        WaitKind::Nodes,
        WaitKind::Failed,
        WaitKind::Starting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WaitKind::Dependency => "dependency",
            WaitKind::Held => "held",
            WaitKind::Limit => "limit",
            WaitKind::Resources => "resources",
            WaitKind::Segment => "segment",
            WaitKind::Priority => "priority",
            WaitKind::Nodes => "nodes",
            WaitKind::Failed => "failed",
            WaitKind::Starting => "starting",
        }
    }

    /// For the filter and the column.
    pub fn label(self) -> &'static str {
        match self {
            WaitKind::Dependency => "dependency",
            WaitKind::Held => "held",
            WaitKind::Limit => "limit",
            WaitKind::Resources => "GPUs",
            WaitKind::Segment => "segment",
            WaitKind::Priority => "priority",
            WaitKind::Nodes => "nodes unavailable",
            WaitKind::Failed => "after a failure",
            WaitKind::Starting => "starting",
        }
    }

    pub fn parse(s: &str) -> Option<WaitKind> {
        WaitKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Why one pending job waits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Wait {
    pub kind: WaitKind,
    /// Slurm's reason code as it gave it (`Resources`, `QOSMaxGRESPerUser`, …).
    pub reason: String,
    /// The evidence in words: what it asks against what there is now.
    pub words: String,
    /// Slurm's estimate of its start (backfill's), when it has one.
    pub est_start_ms: Option<UnixMs>,
    /// Pending jobs of its partition with a higher priority.
    pub ahead: u32,
}

/// slurmctld's own health, from `sdiag` or slurmrestd's `/diag`: its schedulers' cycles,
/// its threads and queues, and who asks it what. Times in microseconds, as Slurm gives them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct SchedHealth {
    /// When slurmctld answered, and since when its counters count (its last reset).
    pub at_ms: Option<UnixMs>,
    pub since_ms: Option<UnixMs>,
    pub server_threads: Option<u64>,
    pub agent_queue: Option<u64>,
    pub dbd_agent_queue: Option<u64>,
    pub jobs_submitted: Option<u64>,
    pub jobs_started: Option<u64>,
    pub jobs_pending: Option<u64>,
    pub jobs_running: Option<u64>,
    /// The main scheduler's cycles.
    pub main: Cycles,
    /// The backfill scheduler's cycles, its depth, and the jobs it started.
    pub backfill: Cycles,
    pub backfilled_jobs: Option<u64>,
    /// RPCs by message type and by user, most first (at most 50 of each), and in all.
    pub rpcs_by_type: Vec<RpcCount>,
    pub rpcs_by_user: Vec<RpcCount>,
    pub rpcs_total: u64,
    /// The user whose RPCs are Gantry's (the one it polls as), and their count.
    pub gantry_user: Option<String>,
    pub gantry_rpcs: Option<u64>,
}

/// One scheduler's cycles, in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Cycles {
    pub last_us: Option<u64>,
    pub mean_us: Option<u64>,
    pub max_us: Option<u64>,
    pub count: Option<u64>,
    /// Jobs looked at in the last cycle (backfill) or on average (main).
    pub depth: Option<u64>,
    /// Jobs in its queue at the last cycle.
    pub queue: Option<u64>,
}

/// RPCs of one message type or one user.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct RpcCount {
    pub name: String,
    pub count: u64,
    pub ave_us: Option<u64>,
}

/// The scheduler's health as a page or the API shows it: when it was read and how often.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct HealthView {
    pub polled_ms: UnixMs,
    pub every_ms: i64,
    pub health: SchedHealth,
}

impl HealthView {
    pub fn stale_at(&self, now_ms: UnixMs) -> bool {
        health_stale(self.polled_ms, self.every_ms, now_ms)
    }
}

/// A read of the scheduler's health taken at `polled_ms`, every `every_ms`, is stale at
/// `now_ms` once older than two reads and a second.
pub fn health_stale(polled_ms: UnixMs, every_ms: i64, now_ms: UnixMs) -> bool {
    now_ms - polled_ms > 2 * every_ms + 1_000
}

/// How far Slurm's start estimates were from the starts that followed, per partition:
/// absolute errors of the first estimate seen and of the last, in milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct EstimateAccuracy {
    pub partition: String,
    /// Runs that started after waiting with an estimate.
    pub jobs: u64,
    pub first_median_ms: i64,
    pub first_p90_ms: i64,
    pub last_median_ms: i64,
    pub last_p90_ms: i64,
    /// Runs that started after their first estimate (Slurm was optimistic).
    pub late: u64,
}

/// The accuracy answer: since when, and per partition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct EstimatesView {
    pub since_ms: UnixMs,
    pub partitions: Vec<EstimateAccuracy>,
}

/// The `q`-quantile (0 to 1) of sorted `v` by nearest rank; 0 when empty.
pub fn nearest_rank(v: &[i64], q: f64) -> i64 {
    if v.is_empty() {
        return 0;
    }
    let rank = (q * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

/// Per partition (by name): the errors of `(partition, first_est, last_est, start)` runs.
pub fn accuracy<'a>(
    runs: impl Iterator<Item = (&'a str, UnixMs, UnixMs, UnixMs)>,
) -> Vec<EstimateAccuracy> {
    let mut by: std::collections::BTreeMap<&str, (Vec<i64>, Vec<i64>, u64)> = Default::default();
    for (p, first, last, start) in runs {
        let e = by.entry(p).or_default();
        e.0.push((start - first).abs());
        e.1.push((start - last).abs());
        e.2 += u64::from(start > first);
    }
    by.into_iter()
        .map(|(p, (mut first, mut last, late))| {
            first.sort_unstable();
            last.sort_unstable();
            EstimateAccuracy {
                partition: p.to_string(),
                jobs: first.len() as u64,
                first_median_ms: nearest_rank(&first, 0.5),
                first_p90_ms: nearest_rank(&first, 0.9),
                last_median_ms: nearest_rank(&last, 0.5),
                last_p90_ms: nearest_rank(&last, 0.9),
                late,
            }
        })
        .collect()
}

/// A running job's GPUs held idle: SM activity under the threshold and no memory in use,
/// without a break, for at least the configured time (`alerts.idle_gpu_minutes`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct IdleHeld {
    pub job: u64,
    /// GPUs idle that long, of the GPUs it holds.
    pub gpus: u32,
    pub of: u32,
    /// When the longest-idle of them went idle (source time).
    pub since_ms: UnixMs,
    /// GPU-hours those GPUs sat idle so far, from when each went idle.
    pub gpu_hours: f64,
}

impl IdleHeld {
    /// "4 of 8 GPUs idle for 42 min: 2.8 GPU-hours so far".
    pub fn sentence(&self, now_ms: UnixMs) -> String {
        let min = ((now_ms - self.since_ms).max(0) / 60_000) as u64;
        let took = if min >= 120 {
            format!("{} h {} min", min / 60, min % 60)
        } else {
            format!("{min} min")
        };
        format!(
            "{} of {} GPUs idle for {took}: {:.1} GPU-hours so far",
            self.gpus, self.of, self.gpu_hours
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_by_partition_with_nearest_rank_quantiles() {
        // Ten runs in gpu: first estimates off by 1..10 minutes (late by 1, 3, 5, ...),
        // last ones exact; one in debug.
        let runs: Vec<(&str, UnixMs, UnixMs, UnixMs)> = (1..=10)
            .map(|k| {
                let start = 1_000_000;
                let off = k * 60_000;
                (
                    "gpu",
                    if k % 2 == 1 { start - off } else { start + off },
                    start,
                    start,
                )
            })
            .chain(std::iter::once(("debug", 0, 0, 30_000)))
            .collect();
        let a = accuracy(runs.iter().copied());
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].partition, "debug");
        assert_eq!((a[0].jobs, a[0].first_median_ms, a[0].late), (1, 30_000, 1));
        let g = &a[1];
        assert_eq!((g.jobs, g.late), (10, 5));
        assert_eq!(
            (g.first_median_ms, g.first_p90_ms),
            (5 * 60_000, 9 * 60_000)
        );
        assert_eq!((g.last_median_ms, g.last_p90_ms), (0, 0));
        assert_eq!(nearest_rank(&[], 0.9), 0);
    }
}
