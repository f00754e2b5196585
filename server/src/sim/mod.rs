//! The built-in simulated cluster: Gantry's embedded default source.
//!
//! Deterministic for a seed, and time is a parameter: [`Sim::advance_to`] moves simulated
//! time forward, so tests run days in milliseconds. Scheduling is event-driven (arrivals,
//! ends, checkpoints, failures); telemetry at an instant is a pure function of the state
//! and the instant (plus noise hashed from seed, time and GPU), so readings cost
//! O(GPUs) however far time jumped.
//!
//! The simulator knows the ground truth ([`Sim::truth`]), which is computed from its own
//! state and never from readings, so tests can compare what Gantry shows with what is so.
//!
//! This file holds the state and the scheduling; `workload.rs` what jobs arrive,
//! `telemetry.rs` the readings at an instant, `model.rs` the layout and the truth.

mod control;
pub mod exporter;
pub mod fabric;
mod faults;
mod idle;
mod ledger;
mod model;
pub mod queue;
mod rng;
mod slow;
mod telemetry;
mod truth;
mod workload;

pub use faults::{Fault, TruthInterruption, DEFAULT_MEAN_GPU_HOURS};
pub use idle::TruthIdle;
pub use ledger::TruthLedger;
pub use model::{layout, layout_nvl72, SimEvent};
pub use slow::TruthSlowdown;
pub use telemetry::weak_rack;
pub use truth::{SimTruth, TruthDomain, TruthJob, TruthRack, TruthSegments};

use app::model::{Checkpoint, Inventory, Job, JobState, NodeState, UnixMs};
use faults::PlannedFault;
use rng::Rng;
use telemetry::{job_extra_watts, job_ib_bytes_per_second};
use workload::{long_run_nodes, max_random_job_nodes, mean_random_duration_ms, RANDOM_JOB_NODES};

pub use crate::telemetry::Readings;

/// GPUs per HGX node (the most any simulated node has) and the H100 SXM's numbers the
/// model uses.
pub const GPUS_PER_NODE: usize = 8;

/// Which cluster the simulator builds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Profile {
    /// HGX H100 nodes of 8 GPUs, 8 to an air-cooled rack (one liquid), blocks of 16.
    #[default]
    Hgx,
    /// GB200 NVL72 racks: 18 compute trays of 4 GPUs per liquid-cooled rack on a 132 kW
    /// bus bar, one NVLink domain and one Slurm block (`BlockSizes=18`) per rack, jobs
    /// that ask for segments; a rack whose coolant flow drops and a leak.
    Nvl72,
}

impl Profile {
    /// `hgx` or `nvl72`.
    pub fn parse(s: &str) -> Option<Profile> {
        match s {
            "hgx" => Some(Profile::Hgx),
            "nvl72" => Some(Profile::Nvl72),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Profile::Hgx => "hgx",
            Profile::Nvl72 => "nvl72",
        }
    }

    /// The most nodes it simulates: 16,384 HGX nodes (131,072 GPUs, four halls of
    /// 4,096), or 2,304 NVL72 racks of 18 trays (41,472 trays, 165,888 GPUs).
    pub fn max_nodes(self) -> usize {
        match self {
            Profile::Hgx => 16_384,
            Profile::Nvl72 => 2_304 * model::NVL72_TRAYS,
        }
    }

    pub fn gpus_per_node(self) -> usize {
        match self {
            Profile::Hgx => GPUS_PER_NODE,
            Profile::Nvl72 => 4,
        }
    }
}

/// The NVL72 profile's coolant trouble, relative to the simulator's start: one rack's flow
/// falls to 40% five minutes in; two trays of another rack report a leak ten minutes in
/// (a warning), critical two minutes later.
#[derive(Clone, Debug, PartialEq)]
pub struct CoolantScenario {
    pub flow_rack: usize,
    pub flow_from_ms: UnixMs,
    pub flow_factor: f64,
    pub leak_rack: usize,
    /// Node indices of the leaking trays.
    pub leak_trays: Vec<usize>,
    pub leak_warning_ms: UnixMs,
    pub leak_critical_ms: UnixMs,
}
/// The NVL72 profile's power shelves: one rack's shelf goes down (every supply critical and
/// offline) some minutes in; another rack has, from the start, a shelf with one supply in
/// warning and one absent.
#[derive(Clone, Debug)]
pub struct ShelfScenario {
    pub down_rack: usize,
    pub down_shelf: usize,
    pub down_from_ms: UnixMs,
    pub degraded_rack: Option<usize>,
    pub degraded_shelf: usize,
}

/// Nodes per stretch of the floor that has one of each fixed fault (ECC node, drained,
/// down, NVSwitch).
const FAULT_STRETCH: usize = 4096;

/// Where one stretch's fixed field trouble sits (node indexes).
#[derive(Debug, PartialEq, Eq)]
struct Trouble {
    ecc: usize,
    drained: usize,
    down: usize,
    switch: usize,
}

/// The fixed field trouble of a floor of `nodes`: in each stretch of up to
/// [`FAULT_STRETCH`] nodes (of at least 4), placed by fraction.
fn field_trouble(nodes: usize) -> Vec<Trouble> {
    (0..nodes)
        .step_by(FAULT_STRETCH)
        .map(|from| (from, (nodes - from).min(FAULT_STRETCH)))
        .filter(|&(_, n)| n >= 4)
        .map(|(from, n)| Trouble {
            ecc: from + n * 37 / 64,
            drained: from + n * 50 / 64,
            down: from + n * 60 / 64,
            switch: from + n * 23 / 64,
        })
        .collect()
}

/// The HGX profile's NVSwitch fault: one node's switch reports a fatal SXid from
/// `onset_ms` on, and needs a reset.
#[derive(Clone, Debug)]
pub struct SwitchFault {
    pub node: usize,
    pub switch: u32,
    pub sxid: u32,
    pub onset_ms: UnixMs,
}

/// NVSwitches on an HGX H100 baseboard, and the simulated switches' slowdown and shutdown
/// temperatures.
pub const HGX_NVSWITCHES: u32 = 4;
pub const NVSWITCH_SLOWDOWN_CELSIUS: f64 = 95.0;
pub const NVSWITCH_SHUTDOWN_CELSIUS: f64 = 105.0;

pub const GPU_MAX_POWER_WATTS: f64 = 700.0;
pub const GPU_IDLE_POWER_WATTS: f64 = 70.0;
pub const GPU_BOOST_CLOCK_MHZ: f64 = 1980.0;
pub const GPU_IDLE_CLOCK_MHZ: f64 = 345.0;
/// GPU temperature at which SW thermal slowdown starts, and HW slowdown.
pub const SW_THERMAL_CELSIUS: f64 = 85.0;
pub const HW_THERMAL_CELSIUS: f64 = 90.0;
/// Node power besides its GPUs (CPUs, memory, NICs, fans), idle and at full load.
pub const HOST_IDLE_WATTS: f64 = 500.0;
pub const HOST_LOAD_WATTS: f64 = 300.0;

const HOUR_MS: i64 = 3_600_000;
const MIN_MS: i64 = 60_000;

#[derive(Clone, Debug)]
struct SimGpuFault {
    /// GPU index on the node that throws double-bit ECC errors.
    gpu: usize,
    /// From when.
    onset_ms: UnixMs,
}

#[derive(Clone, Debug)]
struct SimNode {
    rack: usize,
    state: NodeState,
    /// Why it is drained or down, as Slurm would keep it.
    reason: Option<String>,
    job: Option<u64>,
    ecc_dbe: [u64; GPUS_PER_NODE],
    last_xid: [Option<u32>; GPUS_PER_NODE],
    /// When a GPU that threw an XID needing a reset was reset (its driver reloaded: DCGM's
    /// last-XID field reads 0 again).
    xid_reset_ms: [Option<UnixMs>; GPUS_PER_NODE],
    fault: Option<SimGpuFault>,
    /// Energy each GPU drew above idle in jobs that have ended here, in joules.
    job_energy_j: [f64; GPUS_PER_NODE],
    /// InfiniBand bytes (received plus sent) of jobs that have ended here.
    job_ib_bytes: f64,
    /// Times one of its InfiniBand links went down.
    ib_link_downed: u64,
    /// A node that stopped answering answers again at this time.
    back_at_ms: Option<UnixMs>,
}

impl SimNode {
    /// GPU `g`'s last XID as its driver reports it at `t`.
    fn xid_at(&self, g: usize, t: UnixMs) -> Option<u32> {
        match self.xid_reset_ms[g] {
            Some(r) if t >= r => None,
            _ => self.last_xid[g],
        }
    }
}

#[derive(Clone, Debug)]
struct SimJob {
    job: Job,
    nodes_needed: usize,
    /// `--segment`: its nodes come in groups of this many, each inside one block (rack).
    segment: Option<usize>,
    node_idx: Vec<usize>,
    duration_ms: i64,
    /// How hard it drives its GPUs, 0.0 to 1.0.
    intensity: f64,
    training: bool,
    ckpt_interval_ms: i64,
    next_ckpt_ms: i64,
    /// A checkpoint save in progress until this time.
    ckpt_until_ms: i64,
    /// When the save before that one ended (the last good checkpoint while a save runs).
    prev_ckpt_end_ms: i64,
    /// Checkpoints written, over every run.
    checkpoints: u32,
    step: u64,
    /// How and when this run will be interrupted (a faulty GPU under it, a random fault).
    fault: Option<PlannedFault>,
    /// A GPU of this run that straggles for a while, and when this run hangs.
    straggle: Option<slow::Straggle>,
    hang_from_ms: Option<UnixMs>,
    /// Requeues so far.
    restart_count: u32,
    /// Its run's start-up ends (GPUs idle until then).
    startup_until_ms: UnixMs,
    /// The badput ledger's truth of this job.
    truth: ledger::RunTruth,
    /// Held after a requeue-hold: never started until released.
    held: bool,
    /// A requeued job waits until then (Slurm's BeginTime of about two minutes).
    eligible_ms: UnixMs,
    /// Nodes it must not run on (indices; `ExcNodeList`).
    excluded: Vec<usize>,
    /// Its time limit, QOS, dependency, and why it waits.
    q: queue::SimQueue,
    /// GPUs it holds and leaves idle (see `idle.rs`).
    idle: Option<idle::IdlePlan>,
}

impl SimJob {
    /// When its run's GPUs began to compute (the end of its start-up).
    fn work_from(&self) -> Option<UnixMs> {
        self.job.start_ms.map(|s| s.max(self.startup_until_ms))
    }

    /// Energy each GPU of a node drew above idle in this run until `t`, in joules, and the
    /// InfiniBand bytes each node moved (none after a hang began).
    fn banked(&self, t: UnixMs) -> ([f64; GPUS_PER_NODE], f64) {
        let mut joules = [0.0; GPUS_PER_NODE];
        for (g, j) in joules.iter_mut().enumerate() {
            *j = job_extra_watts(self.intensity) * self.work_secs(g, t);
        }
        let from = self.job.start_ms.unwrap_or(t);
        let moving = (self.hang_from_ms.map_or(t, |h| h.min(t)) - from).max(0) as f64 / 1000.0;
        let ib = job_ib_bytes_per_second(self.intensity, self.node_idx.len()) * moving;
        (joules, ib)
    }
}

/// The simulated cluster.
pub struct Sim {
    seed: u64,
    profile: Profile,
    /// GPUs per node of the profile.
    gpn: usize,
    /// The NVL72 profile's coolant trouble.
    coolant: Option<CoolantScenario>,
    shelves: Option<ShelfScenario>,
    /// The NVL72 profile's NVLink faults.
    fabric: Option<fabric::FabricScenario>,
    switch_faults: Vec<SwitchFault>,
    rng: Rng,
    inv: Inventory,
    t_ms: UnixMs,
    nodes: Vec<SimNode>,
    /// Pending and running jobs, in submit order.
    active: Vec<SimJob>,
    next_job_id: u64,
    next_arrival_ms: UnixMs,
    /// Mean time between arrivals, sized to keep the cluster about 80% busy.
    arrival_mean_ms: f64,
    events: Vec<SimEvent>,
    /// When the GPUs' drivers loaded: their energy counters count from here.
    boot_ms: UnixMs,
    /// Faults' own random stream, so that they do not shift the workload's.
    fault_rng: Rng,
    /// Slowdowns' own random stream.
    slow_rng: Rng,
    /// Every straggler and hang since the start, as made.
    slowdowns: Vec<slow::TruthSlowdown>,
    /// Mean GPU-hours of job runs between random faults; `None`: none.
    fault_mean_gpu_hours: Option<f64>,
    /// Every interruption since the start, as it happened.
    interruptions: std::sync::Arc<Vec<faults::TruthInterruption>>,
    /// The badput ledger's truth: integrated through this time (`None`: not kept), kept
    /// from `ledger_from_ms`, and the finished jobs'.
    ledger_t_ms: Option<UnixMs>,
    ledger_from_ms: UnixMs,
    ledgers: ledger::Finished,
    /// Its scheduler's counters, as slurmctld's `sdiag` keeps them.
    sched_stats: queue::SchedStats,
}

impl Sim {
    /// A cluster of `nodes` nodes (1 to `Profile::max_nodes`) whose history starts 24 h before `start_ms`
    /// so that at `start_ms` it is already busy, with jobs of every age.
    pub fn new(nodes: usize, seed: u64, cluster: &str, start_ms: UnixMs) -> Sim {
        Sim::with_profile(Profile::Hgx, nodes, seed, cluster, start_ms)
    }

    /// A cluster of `profile`; NVL72 rounds `nodes` up to whole racks of 18 trays.
    pub fn with_profile(
        profile: Profile,
        nodes: usize,
        seed: u64,
        cluster: &str,
        start_ms: UnixMs,
    ) -> Sim {
        let nodes = nodes.clamp(1, profile.max_nodes());
        let inv = match profile {
            Profile::Hgx => layout(nodes, cluster),
            Profile::Nvl72 => model::layout_nvl72(nodes, cluster),
        };
        let nodes = inv.nodes.len();
        let gpn = profile.gpus_per_node();
        let coolant = (profile == Profile::Nvl72).then(|| {
            let racks = inv.racks.len();
            let per_rack = model::NVL72_TRAYS;
            let leak_rack = racks.saturating_sub(1).min(5);
            CoolantScenario {
                flow_rack: if racks > 2 { 2 } else { 0 },
                flow_from_ms: start_ms + 5 * MIN_MS,
                flow_factor: 0.4,
                leak_rack,
                leak_trays: vec![leak_rack * per_rack + 6, leak_rack * per_rack + 7],
                leak_warning_ms: start_ms + 10 * MIN_MS,
                leak_critical_ms: start_ms + 12 * MIN_MS,
            }
        });
        let shelves = (profile == Profile::Nvl72).then(|| {
            let racks = inv.racks.len();
            ShelfScenario {
                down_rack: if racks > 3 { 3 } else { 0 },
                down_shelf: 2,
                down_from_ms: start_ms + 8 * MIN_MS,
                degraded_rack: (racks > 1).then_some(1),
                degraded_shelf: 5,
            }
        });
        // NVL72: a GPU link of rack 7 (or the last) down from the start, its tray the one
        // planted in the wrong rack of the layout; a switch tray of rack 5 down six
        // minutes in.
        let fabric = (profile == Profile::Nvl72).then(|| {
            let racks = inv.racks.len();
            fabric::FabricScenario {
                link: (racks.saturating_sub(1).min(6), 0, 1, 3),
                tray_rack: if racks > 4 { 4 } else { 0 },
                switch_tray: 4,
                tray_down_from_ms: start_ms + 6 * MIN_MS,
            }
        });
        // Field trouble in proportion: placed by fraction within each stretch of up to
        // 4,096 nodes (a hall of the largest floor), so 1,024 nodes have one of each and
        // 16,384 have four.
        let stretches = field_trouble(nodes);
        // HGX: one node's NVSwitch fails three hours in (its exporter lists switch fields).
        let switch_faults: Vec<SwitchFault> = stretches
            .iter()
            .filter(|_| profile == Profile::Hgx)
            .map(|t| SwitchFault {
                node: t.switch,
                switch: 2,
                sxid: 12028,
                onset_ms: start_ms + 3 * HOUR_MS,
            })
            .collect();
        let mut rng = Rng::new(seed);
        let warmup_from = start_ms - 24 * HOUR_MS;
        let rack_ix: std::collections::HashMap<&str, usize> = inv
            .racks
            .iter()
            .enumerate()
            .map(|(i, r)| (r.name.as_str(), i))
            .collect();
        let mut sim_nodes: Vec<SimNode> = inv
            .nodes
            .iter()
            .map(|n| SimNode {
                rack: rack_ix.get(n.rack.as_str()).copied().unwrap_or(0),
                state: NodeState::Idle,
                reason: None,
                job: None,
                ecc_dbe: [0; GPUS_PER_NODE],
                last_xid: [None; GPUS_PER_NODE],
                xid_reset_ms: [None; GPUS_PER_NODE],
                fault: None,
                job_energy_j: [0.0; GPUS_PER_NODE],
                job_ib_bytes: 0.0,
                ib_link_downed: 0,
                back_at_ms: None,
            })
            .collect();
        // In each stretch: one node with a GPU that starts throwing double-bit ECC errors
        // two hours in, one drained for maintenance, one whose slurmd stopped answering.
        for t in &stretches {
            sim_nodes[t.ecc].fault = Some(SimGpuFault {
                gpu: 3,
                onset_ms: start_ms + 2 * HOUR_MS,
            });
            let drained = &mut sim_nodes[t.drained];
            drained.state = NodeState::Drained;
            drained.reason = Some("root: PSU replacement".into());
            let down = &mut sim_nodes[t.down];
            down.state = NodeState::Down;
            down.reason = Some("Not responding".into());
        }
        // Arrivals keep about 85% of what the long runs and broken nodes leave busy.
        let left_nodes = nodes
            .saturating_sub(long_run_nodes(nodes) + 3 * stretches.len().max(1))
            .max(1);
        let max_job = max_random_job_nodes(nodes);
        let mean_nodes = RANDOM_JOB_NODES
            .iter()
            .map(|&k| k.min(max_job) as f64)
            .sum::<f64>()
            / RANDOM_JOB_NODES.len() as f64;
        let mean_job_gpu_ms = mean_nodes * gpn as f64 * mean_random_duration_ms();
        let arrival_mean_ms = mean_job_gpu_ms / (0.85 * (left_nodes * gpn) as f64);
        let first_arrival = warmup_from + (rng.exp(arrival_mean_ms) as i64);
        let mut sim = Sim {
            seed,
            profile,
            gpn,
            coolant,
            shelves,
            fabric,
            switch_faults,
            rng,
            inv,
            t_ms: warmup_from,
            nodes: sim_nodes,
            active: Vec::new(),
            next_job_id: 1000,
            next_arrival_ms: first_arrival,
            arrival_mean_ms,
            events: Vec::new(),
            boot_ms: warmup_from - 30 * 24 * HOUR_MS,
            fault_rng: Rng::new(seed ^ 0x6661_756c_7473),
            slow_rng: Rng::new(seed ^ 0x736c_6f77),
            slowdowns: Vec::new(),
            fault_mean_gpu_hours: None,
            interruptions: std::sync::Arc::default(),
            ledger_t_ms: None,
            ledger_from_ms: start_ms,
            ledgers: ledger::Finished::new(),
            sched_stats: queue::SchedStats::new(warmup_from),
        };
        sim.submit_long_runs();
        sim.schedule();
        sim.submit_backlog(start_ms);
        sim.advance_to(start_ms);
        // Random faults from the start on (the history before has only the ECC node's,
        // which starts after it too).
        sim.set_fault_mean_gpu_hours(Some(DEFAULT_MEAN_GPU_HOURS));
        sim
    }

    /// Nodes whose faulty GPU takes down every job that lands on them.
    pub fn lemons(&self) -> Vec<String> {
        self.nodes
            .iter()
            .zip(&self.inv.nodes)
            .filter(|(n, _)| n.fault.is_some())
            .map(|(_, i)| i.name.clone())
            .collect()
    }

    /// The profile the simulator was built with.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// The NVL72 profile's coolant trouble, if any.
    pub fn coolant_scenario(&self) -> Option<&CoolantScenario> {
        self.coolant.as_ref()
    }

    /// Frees a job's nodes at `t` (a draining node becomes drained) and banks the energy
    /// each of their GPUs drew and the InfiniBand bytes each moved ([`SimJob::banked`]).
    fn release(&mut self, nodes: &[usize], (joules, ib): ([f64; GPUS_PER_NODE], f64)) {
        for &i in nodes {
            let n = &mut self.nodes[i];
            n.job = None;
            for (e, j) in n.job_energy_j.iter_mut().zip(joules) {
                *e += j;
            }
            n.job_ib_bytes += ib;
            n.state = match n.state {
                NodeState::Draining => NodeState::Drained,
                NodeState::Allocated => NodeState::Idle,
                other => other,
            };
        }
    }

    fn finish(&mut self, j: usize, state: JobState, t: UnixMs) {
        self.finish_with(j, state, t, String::new());
    }

    /// Ends run `j` in `state` with the scheduler's words for it (reason, exit code).
    fn finish_with(&mut self, j: usize, state: JobState, t: UnixMs, detail: String) {
        self.ledger_run_ended(j, t, state, false);
        let mut sj = self.active.remove(j);
        self.release(&sj.node_idx, sj.banked(t));
        self.end_slowdowns(sj.job.id, t);
        sj.job.state = state;
        sj.job.end_ms = Some(t);
        let id = sj.job.id;
        self.events.push(SimEvent::JobEnded {
            job: sj.job,
            detail,
        });
        self.cancel_dependents(id, state, t);
    }

    /// Moves simulated time forward to `t_ms`, processing every event on the way.
    /// Time never goes backwards: an earlier `t_ms` changes nothing.
    pub fn advance_to(&mut self, t_ms: UnixMs) {
        while let Some((when, what)) = self.next_event(t_ms) {
            self.integrate_ledgers(when);
            self.t_ms = when;
            match what {
                Next::Eligible => self.schedule(),
                Next::Arrival => {
                    self.submit_random();
                    self.next_arrival_ms = when + 1 + self.rng.exp(self.arrival_mean_ms) as i64;
                    self.schedule();
                }
                Next::End(j) => {
                    self.finish(j, JobState::Completed, when);
                    self.schedule();
                }
                Next::Fail(j) => {
                    self.strike(j, when);
                    self.schedule();
                }
                Next::NodeBack(i) => {
                    let n = &mut self.nodes[i];
                    n.back_at_ms = None;
                    if n.state == NodeState::Down {
                        n.state = NodeState::Idle;
                        n.reason = None;
                    }
                    self.schedule();
                }
                Next::Checkpoint(j) => {
                    let sj = &mut self.active[j];
                    // A hung job never reaches its next save.
                    if sj.hang_from_ms.is_some_and(|h| h <= when) {
                        sj.next_ckpt_ms = when + sj.ckpt_interval_ms;
                        continue;
                    }
                    let gpus = f64::from(sj.job.gpus);
                    let duration = (45_000.0 * (gpus / 256.0).sqrt()).max(5_000.0) as i64;
                    sj.step += (sj.ckpt_interval_ms / 1000) as u64;
                    sj.prev_ckpt_end_ms = sj.ckpt_until_ms;
                    sj.checkpoints += 1;
                    sj.ckpt_until_ms = when + duration;
                    sj.truth.saves.push((when, when + duration));
                    sj.next_ckpt_ms = when + sj.ckpt_interval_ms;
                    let ck = Checkpoint {
                        job_id: sj.job.id,
                        step: Some(sj.step),
                        path: format!(
                            "/lustre/ckpt/{}/{}/step-{}",
                            sj.job.name, sj.job.id, sj.step
                        ),
                        // About 20 GB of model and optimizer state per GPU.
                        size_bytes: (gpus * 20e9) as u64,
                        started_ms: when,
                        duration_ms: duration,
                        complete: true,
                    };
                    self.events.push(SimEvent::Checkpoint { checkpoint: ck });
                }
            }
        }
        self.integrate_ledgers(t_ms);
        self.t_ms = self.t_ms.max(t_ms);
    }

    fn next_event(&self, until: UnixMs) -> Option<(UnixMs, Next)> {
        let mut best: Option<(UnixMs, Next)> = None;
        let mut consider = |when: UnixMs, what: Next| {
            if when <= until && best.as_ref().is_none_or(|(b, _)| when < *b) {
                best = Some((when, what));
            }
        };
        consider(self.next_arrival_ms, Next::Arrival);
        for (i, n) in self.nodes.iter().enumerate() {
            if let Some(b) = n.back_at_ms {
                consider(b, Next::NodeBack(i));
            }
        }
        for (j, sj) in self.active.iter().enumerate() {
            let Some(start) = sj.job.start_ms else {
                if !sj.held && sj.eligible_ms > self.t_ms {
                    consider(sj.eligible_ms, Next::Eligible);
                }
                continue;
            };
            consider(start + sj.duration_ms, Next::End(j));
            if let Some(f) = &sj.fault {
                consider(f.at_ms, Next::Fail(j));
            }
            if sj.training {
                consider(sj.next_ckpt_ms, Next::Checkpoint(j));
            }
        }
        best
    }

    /// Events since the last call, in time order.
    pub fn drain_events(&mut self) -> Vec<SimEvent> {
        std::mem::take(&mut self.events)
    }

    pub fn now_ms(&self) -> UnixMs {
        self.t_ms
    }

    pub fn inventory(&self) -> &Inventory {
        &self.inv
    }

    /// The ground truth now, from the simulator's own state.
    pub fn truth(&self) -> SimTruth {
        truth::truth(self, &self.readings())
    }

    /// The ground truth now, reusing `readings` taken at the current time (saves a second
    /// pass over every GPU per tick).
    pub fn truth_with(&self, readings: &Readings) -> SimTruth {
        debug_assert_eq!(readings.at_ms, self.t_ms);
        truth::truth(self, readings)
    }
}

enum Next {
    Arrival,
    /// A requeued job may start again.
    Eligible,
    End(usize),
    Fail(usize),
    /// A node that stopped answering answers again.
    NodeBack(usize),
    Checkpoint(usize),
}

#[cfg(test)]
mod tests;
