//! Slow and stuck runs: a GPU that straggles for a while (a slow link, a hot spot) and a
//! run whose collectives hang until the NCCL watchdog kills it. Drawn when a run of two or
//! more nodes starts, from their own random stream, only while faults are on. Their
//! readings show what real ones show: the straggler's SM activity and power fall below its
//! peers'; a hung run's GPUs read fully utilised at a flat, low power with their nodes'
//! InfiniBand traffic stopped. The truth keeps every episode.

use app::model::UnixMs;
use serde::Serialize;

use super::faults::{Fault, PlannedFault};
use super::{Sim, MIN_MS};

/// Share of multi-node runs with a straggling GPU, and with a hang, in percent.
pub const STRAGGLE_PERCENT: u64 = 15;
pub const HANG_PERCENT: u64 = 4;
/// A straggler works at this share of its peers' pace.
pub const STRAGGLE_FACTOR: f64 = 0.55;
/// A hang ends when the NCCL watchdog kills the job (SIGABRT), this long after it began.
pub const WATCHDOG_MS: i64 = 30 * MIN_MS;
/// A hung GPU's power above idle: spinning in a collective, the same every second.
pub const HUNG_EXTRA_WATTS: f64 = 60.0;

/// A GPU of a run that works slower than its peers for a while.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Straggle {
    pub node: usize,
    pub gpu: usize,
    pub from_ms: UnixMs,
    pub to_ms: UnixMs,
}

/// One slowdown as the simulator made it: served at `/sim/truth`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TruthSlowdown {
    pub job: u64,
    /// `straggler` or `hang`.
    pub kind: &'static str,
    pub node: Option<String>,
    pub gpu: Option<u32>,
    pub from_ms: UnixMs,
    /// When it ended (the run's end, if that came first).
    pub to_ms: UnixMs,
}

/// The most slowdowns the truth keeps (the oldest go first).
const MAX_TRUTH: usize = 20_000;

impl Sim {
    /// Draws run `j`'s slowdowns as it starts at `t` (faults on, two or more nodes).
    pub(super) fn draw_slowdowns(&mut self, j: usize, t: UnixMs) {
        if self.fault_mean_gpu_hours.is_none() || self.active[j].node_idx.len() < 2 {
            return;
        }
        let end = t + self.active[j].duration_ms;
        let roll = self.slow_rng.below(100);
        let id = self.active[j].job.id;
        if roll < STRAGGLE_PERCENT {
            let from_ms = t + (10 + self.slow_rng.below(111) as i64) * MIN_MS;
            let to_ms = (from_ms + (20 + self.slow_rng.below(71) as i64) * MIN_MS).min(end);
            let k = self.slow_rng.below(self.active[j].node_idx.len() as u64) as usize;
            let gpu = self.slow_rng.below(self.gpn as u64) as usize;
            let node = self.active[j].node_idx[k];
            if from_ms < to_ms {
                self.active[j].straggle = Some(Straggle {
                    node,
                    gpu,
                    from_ms,
                    to_ms,
                });
                self.note_slowdown(TruthSlowdown {
                    job: id,
                    kind: "straggler",
                    node: Some(self.inv.nodes[node].name.clone()),
                    gpu: Some(gpu as u32),
                    from_ms,
                    to_ms,
                });
            }
        } else if roll < STRAGGLE_PERCENT + HANG_PERCENT {
            let from_ms = t + (20 + self.slow_rng.below(161) as i64) * MIN_MS;
            let killed = from_ms + WATCHDOG_MS;
            let first = self.active[j].fault.is_none_or(|f| f.at_ms > killed);
            if killed < end && first {
                self.active[j].hang_from_ms = Some(from_ms);
                self.active[j].fault = Some(PlannedFault {
                    at_ms: killed,
                    fault: Fault::Software,
                    node: self.active[j].node_idx.first().copied(),
                    gpu: None,
                });
                self.note_slowdown(TruthSlowdown {
                    job: id,
                    kind: "hang",
                    node: None,
                    gpu: None,
                    from_ms,
                    to_ms: killed,
                });
            }
        }
    }

    /// A run of job `id` ended at `t`: its slowdowns end there too.
    /// (Slowdowns are drawn when a run starts, so a run's own are among the newest.)
    pub(super) fn end_slowdowns(&mut self, id: u64, t: UnixMs) {
        for s in self.slowdowns.iter_mut().rev().take(64) {
            if s.job == id && s.to_ms > t {
                s.to_ms = t.max(s.from_ms);
            }
        }
    }

    fn note_slowdown(&mut self, s: TruthSlowdown) {
        if self.slowdowns.len() >= MAX_TRUTH {
            self.slowdowns.remove(0);
        }
        self.slowdowns.push(s);
    }

    /// Every slowdown since the start, oldest first.
    pub fn slowdowns(&self) -> &[TruthSlowdown] {
        &self.slowdowns
    }
}
