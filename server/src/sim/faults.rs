//! Interruptions: what ends a job's run before its time, in about the proportions of the
//! 419 unexpected interruptions of Llama 3's 54-day run on 16,384 H100 (GPU 30%, HBM 17%,
//! software 13%, network 8%, host 8%, then smaller classes), plus the jobs' own errors.
//! Each fault leaves the evidence a real one leaves where a real exporter or scheduler
//! shows it: an XID in the DCGM field, a double-bit ECC counter step, an InfiniBand port's
//! link-down counter step, a node that stops answering (and comes back), the exit code or
//! signal in the scheduler's words; one class leaves nothing. The truth keeps each cause.
//!
//! Faults come from their own random stream (so they do not shift the workload's) and only
//! from the simulator's start: the history before it has none, as nobody watched it.

use app::model::{JobState, NodeState, UnixMs};
use app::reliability::Cause;
use serde::Serialize;

use super::{Sim, SimEvent, MIN_MS};

/// Mean GPU-hours of job runs between interruptions by default: one every few hours at
/// 512 GPUs, about 25 times Llama 3's rate (50,700 GPU-hours), so a demo shows some.
pub const DEFAULT_MEAN_GPU_HOURS: f64 = 2_000.0;

/// How a simulated run is interrupted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// An XID of a failed GPU (79: fallen off the bus; 119: GSP timeout).
    Gpu { xid: u32 },
    /// 48 (double-bit ECC, with the counter's step) or 94 (contained ECC error).
    Memory { xid: u32 },
    /// XID 74.
    NvLink,
    /// One port's link goes down; NCCL gives up and the job exits 1.
    Network,
    /// The node stops answering; Slurm ends the job NODE_FAIL.
    Host,
    /// Killed by SIGABRT (an NCCL watchdog timeout).
    Software,
    /// The job's own error: exit code 1 and nothing else.
    User,
    /// Ends with nothing to show why (silent data corruption, a hang killed by hand).
    Silent,
}

/// The mix, in percent.
const MIX: [(u32, Fault); 10] = [
    (20, Fault::Gpu { xid: 79 }),
    (10, Fault::Gpu { xid: 119 }),
    (12, Fault::Memory { xid: 48 }),
    (5, Fault::Memory { xid: 94 }),
    (4, Fault::NvLink),
    (8, Fault::Network),
    (8, Fault::Host),
    (13, Fault::Software),
    (12, Fault::User),
    (8, Fault::Silent),
];

impl Fault {
    pub fn cause(self) -> Cause {
        match self {
            Fault::Gpu { .. } => Cause::Gpu,
            Fault::Memory { .. } => Cause::GpuMemory,
            Fault::NvLink => Cause::NvLink,
            Fault::Network => Cause::Network,
            Fault::Host => Cause::Host,
            Fault::Software => Cause::Software,
            Fault::User => Cause::UserApplication,
            Fault::Silent => Cause::Unknown,
        }
    }
}

/// A planned fault of a running job: when, what, and on which node and GPU (`None`: one
/// picked when it strikes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct PlannedFault {
    pub at_ms: UnixMs,
    pub fault: Fault,
    pub node: Option<usize>,
    pub gpu: Option<usize>,
}

/// One interruption as the simulator knows it: served at `/sim/truth`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TruthInterruption {
    pub job: u64,
    pub at_ms: UnixMs,
    pub gpus: u32,
    pub cause: Cause,
    /// Whether it left evidence (`false`: attribution should say unknown).
    pub evidence: bool,
    /// The node the fault struck.
    pub node: Option<String>,
}

/// The most interruptions the truth keeps (the oldest go first).
const MAX_TRUTH: usize = 20_000;

impl Sim {
    /// Random faults from now on with a mean of `gpu_hours` GPU-hours of job runs between
    /// two (`None`: none; the ECC node still fails its jobs). Running jobs draw anew.
    pub fn set_fault_mean_gpu_hours(&mut self, gpu_hours: Option<f64>) {
        self.fault_mean_gpu_hours = gpu_hours.filter(|h| h.is_finite() && *h > 0.0);
        for j in 0..self.active.len() {
            if self.active[j].job.start_ms.is_some() {
                let from = self.t_ms;
                let ecc = self.active[j]
                    .fault
                    .filter(|f| matches!(f.fault, Fault::Memory { xid: 48 }) && f.node.is_some());
                self.active[j].fault = ecc.or_else(|| self.draw_fault(j, from));
            }
        }
    }

    /// A random fault for run `j` starting at `from`, if one strikes before its end.
    pub(super) fn draw_fault(&mut self, j: usize, from: UnixMs) -> Option<PlannedFault> {
        let mean = self.fault_mean_gpu_hours?;
        let sj = &self.active[j];
        let gpus = f64::from(sj.job.gpus.max(1));
        let end = sj.job.start_ms.unwrap_or(from) + sj.duration_ms;
        let after = self.fault_rng.exp(mean * 3_600_000.0 / gpus) as i64;
        let pick = self.fault_rng.below(100) as u32;
        let at_ms = from + after.max(MIN_MS);
        if at_ms >= end {
            return None;
        }
        let mut acc = 0;
        let fault = MIX
            .iter()
            .find(|(w, _)| {
                acc += w;
                pick < acc
            })
            .map_or(Fault::Silent, |(_, f)| *f);
        Some(PlannedFault {
            at_ms,
            fault,
            node: None,
            gpu: None,
        })
    }

    /// Strikes run `j`'s planned fault at `t`: leaves its evidence, ends the run.
    pub(super) fn strike(&mut self, j: usize, t: UnixMs) {
        let Some(pf) = self.active[j].fault.take() else {
            return;
        };
        let len = self.active[j].node_idx.len().max(1);
        let i = pf.node.unwrap_or_else(|| {
            let k = self.fault_rng.below(len as u64) as usize;
            self.active[j].node_idx.get(k).copied().unwrap_or(0)
        });
        let g = pf
            .gpu
            .unwrap_or_else(|| self.fault_rng.below(self.gpn as u64) as usize);
        let node_name = self.inv.nodes[i].name.clone();
        let xid = |sim: &mut Sim, x: u32| {
            sim.nodes[i].last_xid[g] = Some(x);
            // A GPU that failed is reset before long (an epilog or health check reloads
            // its driver); double-bit ECC errors stay until the GPU is replaced.
            sim.nodes[i].xid_reset_ms[g] = (x != 48).then_some(t + 10 * MIN_MS);
            sim.events.push(SimEvent::Xid {
                node: node_name.clone(),
                gpu: g as u32,
                xid: x,
                at_ms: t,
            });
        };
        let exit_1 = "NonZeroExitCode; exit code 1";
        let (state, detail) = match pf.fault {
            Fault::Gpu { xid: x } | Fault::Memory { xid: x } => {
                if x == 48 {
                    self.nodes[i].ecc_dbe[g] += 1;
                }
                xid(self, x);
                (JobState::Failed, exit_1)
            }
            Fault::NvLink => {
                xid(self, 74);
                (JobState::Failed, exit_1)
            }
            Fault::Network => {
                self.nodes[i].ib_link_downed += 1;
                (JobState::Failed, exit_1)
            }
            Fault::Host => {
                let n = &mut self.nodes[i];
                n.state = NodeState::Down;
                n.reason = Some("Not responding".into());
                n.back_at_ms = Some(t + (30 + self.fault_rng.below(61) as i64) * MIN_MS);
                (JobState::NodeFail, "NodeDown")
            }
            Fault::Software => (JobState::Failed, "RaisedSignal:6(Aborted); exit code 0"),
            Fault::User => (JobState::Failed, exit_1),
            Fault::Silent => (JobState::Failed, ""),
        };
        let sj = &self.active[j];
        self.note_interruption(TruthInterruption {
            job: sj.job.id,
            at_ms: t,
            gpus: sj.job.gpus,
            cause: pf.fault.cause(),
            evidence: pf.fault != Fault::Silent,
            node: Some(self.inv.nodes[i].name.clone()),
        });
        self.finish_with(j, state, t, detail.to_string());
    }

    pub(super) fn note_interruption(&mut self, i: TruthInterruption) {
        // Copied only while a published truth still shares the list: once per interruption.
        let list = std::sync::Arc::make_mut(&mut self.interruptions);
        if list.len() >= MAX_TRUTH {
            list.remove(0);
        }
        list.push(i);
    }

    /// Interruptions since the start, oldest first.
    pub fn interruptions(&self) -> &[TruthInterruption] {
        &self.interruptions
    }
}
