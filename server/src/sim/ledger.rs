//! The simulator's own badput ledger per job, as it knows it: each run's start-up, saves,
//! hang and end are events of its own, so those buckets are exact spans; only throttling
//! (each busy GPU's clock deficit, which follows the temperature second by second) is
//! integrated, at a fixed step, from the same state the readings come from. Off unless
//! asked for ([`Sim::track_ledgers`]): it costs a GPU state per GPU per step.

use std::collections::BTreeMap;

use app::model::{JobState, UnixMs};

use super::{Sim, SimJob};

/// The integration step of throttling.
const STEP_MS: i64 = 10_000;
/// The most finished jobs the truth keeps (the lowest ids go first).
const MAX_JOBS: usize = 20_000;

/// One job's GPU-seconds by bucket over every run the truth saw whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct TruthLedger {
    pub job: u64,
    pub allocated_gs: f64,
    pub startup_gs: f64,
    pub checkpoint_gs: f64,
    pub hung_gs: f64,
    pub throttle_gs: f64,
    pub reexec_gs: f64,
    pub restart_wait_gs: f64,
    pub productive_gs: f64,
    /// A run of it began before the truth did: its buckets are not whole.
    pub partial: bool,
    /// It left GPUs idle: they count as productive here, as idle in Gantry's ledger.
    pub leaves_idle: bool,
    /// Its GPUs' energy over its runs, in joules: what their energy counters rose by.
    pub gpu_energy_j: f64,
    /// Its GPUs, and the runs the truth saw.
    pub gpus: u32,
    pub runs: u32,
}

impl TruthLedger {
    /// Productive over allocated plus restart wait.
    pub fn ettr(&self) -> f64 {
        let wall = self.allocated_gs + self.restart_wait_gs;
        if wall > 0.0 {
            self.productive_gs / wall
        } else {
            0.0
        }
    }

    fn add(&mut self, o: &TruthLedger) {
        self.allocated_gs += o.allocated_gs;
        self.startup_gs += o.startup_gs;
        self.checkpoint_gs += o.checkpoint_gs;
        self.hung_gs += o.hung_gs;
        self.throttle_gs += o.throttle_gs;
        self.reexec_gs += o.reexec_gs;
        self.restart_wait_gs += o.restart_wait_gs;
        self.productive_gs += o.productive_gs;
        self.partial |= o.partial;
        self.leaves_idle |= o.leaves_idle;
        self.gpu_energy_j += o.gpu_energy_j;
        self.gpus = self.gpus.max(o.gpus);
        self.runs += o.runs;
    }
}

/// A run's start-up: accelerator and communicator init, loading the checkpoint and the
/// first batches; longer for more nodes, at most five minutes.
pub(super) fn startup_ms(nodes: usize) -> i64 {
    (60_000 + 10_000 * nodes as i64).min(300_000)
}

/// What the truth keeps of a run while it goes.
#[derive(Clone, Debug, Default)]
pub(super) struct RunTruth {
    pub saves: Vec<(UnixMs, UnixMs)>,
    /// Clock deficit so far, and since the end of the last save that had ended.
    throttle_gs: f64,
    since_throttle_gs: f64,
    since_mark_ms: UnixMs,
    /// Over the job's runs before this one.
    pub ledger: TruthLedger,
    pub waiting_since: Option<UnixMs>,
}

/// Run `sj`'s buckets were it to end at `t` (`interrupted`: its work since the last save
/// that had ended is lost).
fn close(sj: &SimJob, t: UnixMs, interrupted: bool) -> TruthLedger {
    let Some(s) = sj.job.start_ms else {
        return TruthLedger::default();
    };
    let g = f64::from(sj.job.gpus);
    let secs = |a: UnixMs, b: UnixMs| (b - a).max(0) as f64 / 1000.0;
    let su = sj.startup_until_ms.min(t);
    let work_end = sj.hang_from_ms.map_or(t, |h| h.clamp(su, t));
    let saving = |from: UnixMs| -> f64 {
        sj.truth
            .saves
            .iter()
            .map(|&(a, b)| secs(a.max(from).max(su), b.min(work_end)))
            .sum()
    };
    let checkpoint = saving(su);
    let computing = secs(su, work_end) - checkpoint;
    let mut out = TruthLedger {
        job: sj.job.id,
        allocated_gs: g * secs(s, t),
        startup_gs: g * secs(s, su),
        checkpoint_gs: g * checkpoint,
        hung_gs: g * secs(work_end, t),
        throttle_gs: sj.truth.throttle_gs,
        leaves_idle: sj.idle.is_some(),
        gpu_energy_j: run_energy_j(sj, s, t),
        gpus: sj.job.gpus,
        runs: 1,
        ..TruthLedger::default()
    };
    if interrupted {
        let good = sj
            .truth
            .saves
            .iter()
            .map(|&(_, b)| b)
            .filter(|&b| b <= work_end)
            .max()
            .unwrap_or(su)
            .max(su);
        let since = secs(good, work_end) - saving(good);
        out.reexec_gs = (g * since - sj.truth.since_throttle_gs).max(0.0);
    }
    out.productive_gs = g * computing - out.throttle_gs - out.reexec_gs;
    out
}

/// What the energy counters of run `sj`'s GPUs rose by from its start `s` to `t`: idle
/// power all along, and its load's extra from the end of its start-up while each GPU
/// worked (the counter's own model, `telemetry.rs`).
fn run_energy_j(sj: &SimJob, s: UnixMs, t: UnixMs) -> f64 {
    let nodes = sj.node_idx.len();
    if nodes == 0 {
        return 0.0;
    }
    let per_node = sj.job.gpus as usize / nodes;
    let idle = super::GPU_IDLE_POWER_WATTS * (t - s).max(0) as f64 / 1000.0;
    let extra = super::telemetry::job_extra_watts(sj.intensity);
    let per_gpu: f64 = (0..per_node)
        .map(|g| idle + extra * sj.work_secs(g, t))
        .sum();
    per_gpu * nodes as f64
}

impl Sim {
    /// Keeps every job's badput ledger from now on (see the module).
    pub fn track_ledgers(&mut self) {
        self.ledger_t_ms = Some(self.t_ms);
        self.ledger_from_ms = self.t_ms;
    }

    /// Every job's ledger: those that ended, and the running ones as if they ended now.
    pub fn ledgers(&self) -> Vec<TruthLedger> {
        let mut all = self.recent_ledgers(usize::MAX);
        all.sort_by_key(|l| l.job);
        all
    }

    /// The running jobs' ledgers and the newest `finished` finished ones', when kept.
    pub(super) fn recent_ledgers(&self, finished: usize) -> Vec<TruthLedger> {
        if self.ledger_t_ms.is_none() {
            return Vec::new();
        }
        let mut out: Vec<TruthLedger> = self
            .ledgers
            .values()
            .rev()
            .take(finished)
            .copied()
            .collect();
        for sj in &self.active {
            let mut l = sj.truth.ledger;
            l.add(&close(sj, self.t_ms, false));
            if l.allocated_gs > 0.0 {
                l.job = sj.job.id;
                out.push(l);
            }
        }
        out
    }

    /// A run of active job `j` starts at `t`.
    pub(super) fn ledger_run_started(&mut self, j: usize, t: UnixMs) {
        let from = self.ledger_from_ms;
        let tracking = self.ledger_t_ms.is_some();
        let sj = &mut self.active[j];
        sj.startup_until_ms = t + startup_ms(sj.node_idx.len());
        let g = f64::from(sj.job.gpus);
        let r = &mut sj.truth;
        r.saves.clear();
        r.throttle_gs = 0.0;
        r.since_throttle_gs = 0.0;
        r.since_mark_ms = t;
        if let Some(w) = r.waiting_since.take() {
            r.ledger.restart_wait_gs += g * (t - w).max(0) as f64 / 1000.0;
        }
        if !tracking || t < from {
            r.ledger.partial = true;
        }
    }

    /// Active job `j`'s run ends at `t` in `state`; `requeued`: it will run again.
    pub(super) fn ledger_run_ended(
        &mut self,
        j: usize,
        t: UnixMs,
        state: JobState,
        requeued: bool,
    ) {
        let interrupted = matches!(
            state,
            JobState::Failed | JobState::NodeFail | JobState::Timeout | JobState::Requeued
        );
        let sj = &mut self.active[j];
        let run = close(sj, t, interrupted);
        sj.truth.ledger.add(&run);
        sj.truth.ledger.job = sj.job.id;
        if requeued {
            sj.truth.waiting_since = Some(t);
            return;
        }
        if self.ledger_t_ms.is_some() {
            self.ledgers.insert(sj.job.id, sj.truth.ledger);
            while self.ledgers.len() > MAX_JOBS {
                self.ledgers.pop_first();
            }
        }
    }

    /// Integrates the running jobs' throttling up to `until` (a step at a time, each at
    /// the state of its own instant).
    pub(super) fn integrate_ledgers(&mut self, until: UnixMs) {
        let Some(mut at) = self.ledger_t_ms else {
            return;
        };
        let keep_t = self.t_ms;
        while at + STEP_MS <= until {
            at += STEP_MS;
            self.t_ms = at;
            let mut deficits = Vec::with_capacity(self.active.len());
            for sj in &self.active {
                if sj.job.start_ms.is_none() || at < sj.startup_until_ms {
                    deficits.push(0.0);
                    continue;
                }
                let mut d = 0.0;
                for &i in &sj.node_idx {
                    let inlet = self.gpu_inlet_celsius(i, at, Some(sj));
                    for g in 0..self.gpn {
                        let s = self.gpu_state(i, g, inlet, Some(sj));
                        if s.busy {
                            d += 1.0 - s.clock_factor;
                        }
                    }
                }
                deficits.push(d * STEP_MS as f64 / 1000.0);
            }
            for (sj, d) in self.active.iter_mut().zip(deficits) {
                let r = &mut sj.truth;
                // The last save that has ended by now is where lost work counts from.
                if let Some(end) = r.saves.iter().map(|&(_, b)| b).filter(|&b| b <= at).max() {
                    if end > r.since_mark_ms {
                        r.since_mark_ms = end;
                        r.since_throttle_gs = 0.0;
                    }
                }
                r.throttle_gs += d;
                if at > r.since_mark_ms {
                    r.since_throttle_gs += d;
                }
            }
        }
        self.ledger_t_ms = Some(at);
        self.t_ms = keep_t;
    }
}

/// Finished jobs' ledgers by id.
pub(super) type Finished = BTreeMap<u64, TruthLedger>;
