//! Jobs that hold GPUs and leave them idle, the waste no scheduler sees: a one-node job
//! launched with half the ranks its allocation has GPUs for (the other half idle from its
//! start), and a one-node job whose owner walked away (every GPU idle from some time into
//! its run, until its time runs out). Chosen by a hash of the seed and the job's id, so
//! the random stream (and every other seeded fact) is what it was without them; one-node
//! jobs only, so the straggler and hang radar (two nodes or more) never sees them.

use serde::Serialize;

use app::model::UnixMs;

use super::rng::hash_unit;
use super::{Sim, SimJob, GPUS_PER_NODE, MIN_MS};

/// A working GPU's framebuffer in use (model, optimizer state, activations), in MiB.
pub const FB_USED_MIB: f64 = 71_234.0;

/// The share of one-node random jobs that leave GPUs idle.
const SHARE: f64 = 0.4;

/// Which GPUs of each node a job leaves idle, and from when into its run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct IdlePlan {
    /// GPUs with this index and up.
    pub from_gpu: usize,
    /// From this long after its start.
    pub after_ms: i64,
}

/// One job's GPUs idle now, as the simulator knows them: served in `/sim/truth`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TruthIdle {
    pub job: u64,
    /// GPUs idle (SM activity 0, no memory in use) of the GPUs it holds.
    pub gpus: u32,
    pub of: u32,
    /// Since when (its start, or the time its owner walked away).
    pub since_ms: UnixMs,
}

impl IdlePlan {
    /// The plan of a one-node job `id` of `gpn` GPUs per node, if it has one.
    pub(super) fn of(seed: u64, id: u64, gpn: usize) -> Option<IdlePlan> {
        if hash_unit(seed, 0, 5_000_000 + id) >= SHARE {
            return None;
        }
        Some(if hash_unit(seed, 0, 6_000_000 + id) < 0.5 {
            IdlePlan {
                from_gpu: gpn / 2,
                after_ms: 0,
            }
        } else {
            let after = 10 + (hash_unit(seed, 0, 7_000_000 + id) * 30.0) as i64;
            IdlePlan {
                from_gpu: 0,
                after_ms: after * MIN_MS,
            }
        })
    }
}

impl SimJob {
    /// When GPU `g` of each of its nodes goes idle in this run, if it does.
    fn idle_from(&self, g: usize) -> Option<UnixMs> {
        let p = self.idle?;
        let start = self.job.start_ms?;
        (g >= p.from_gpu).then_some(start + p.after_ms)
    }

    /// Whether it leaves GPU `g` of its nodes idle at `t`.
    pub(super) fn leaves_idle(&self, g: usize, t: UnixMs) -> bool {
        self.idle_from(g).is_some_and(|f| t >= f)
    }

    /// Seconds GPU `g` of its nodes computed (or saved) in this run until `t`: from the end
    /// of its start-up until it was left idle.
    pub(super) fn work_secs(&self, g: usize, t: UnixMs) -> f64 {
        let Some(from) = self.work_from() else {
            return 0.0;
        };
        let until = self.idle_from(g).map_or(t, |i| i.min(t));
        (until - from).max(0) as f64 / 1000.0
    }
}

impl Sim {
    /// The running jobs' GPUs idle now.
    pub(super) fn idle_truth(&self) -> Vec<TruthIdle> {
        let t = self.t_ms;
        self.active
            .iter()
            .filter(|j| j.job.state == app::model::JobState::Running)
            .filter_map(|j| {
                let per_node = (0..self.gpn.min(GPUS_PER_NODE))
                    .filter(|&g| j.leaves_idle(g, t))
                    .count();
                let since = (0..self.gpn).filter_map(|g| j.idle_from(g)).min()?;
                (per_node > 0).then(|| TruthIdle {
                    job: j.job.id,
                    gpus: (per_node * j.node_idx.len()) as u32,
                    of: j.job.gpus,
                    since_ms: since,
                })
            })
            .collect()
    }
}
