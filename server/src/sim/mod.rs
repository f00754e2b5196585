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

mod control;
pub mod exporter;
mod model;
mod rng;

pub use model::{layout, SimEvent, SimTruth, TruthDomain, TruthJob, TruthRack};

use app::model::{
    Checkpoint, GpuReading, Inventory, Job, JobState, NodeState, RackReading, ThrottleReasons,
    UnixMs,
};
use rng::{hash_unit, Rng};

pub use crate::aggregate::Readings;

/// GPUs per node and the H100 SXM's numbers the model uses.
pub const GPUS_PER_NODE: usize = 8;
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
    fault: Option<SimGpuFault>,
    /// Energy each GPU drew above idle in jobs that have ended here, in joules.
    job_energy_j: f64,
    /// InfiniBand bytes (received plus sent) of jobs that have ended here.
    job_ib_bytes: f64,
}

#[derive(Clone, Debug)]
struct SimJob {
    job: Job,
    nodes_needed: usize,
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
    /// When this job will crash because it sits on a faulty GPU.
    fail_at_ms: Option<i64>,
    /// Requeues so far.
    restart_count: u32,
    /// Held after a requeue-hold: never started until released.
    held: bool,
    /// A requeued job waits until then (Slurm's BeginTime of about two minutes).
    eligible_ms: UnixMs,
}

/// The simulated cluster.
pub struct Sim {
    seed: u64,
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
}

/// A job's mean power per GPU above idle while it computes (checkpoint pauses and noise
/// left out): what the energy counters integrate.
fn job_extra_watts(intensity: f64) -> f64 {
    (20.0 + intensity * 610.0).min(GPU_MAX_POWER_WATTS - GPU_IDLE_POWER_WATTS)
}

/// A node's InfiniBand traffic, received plus sent, in bytes per second: management and
/// storage chatter always, plus the all-reduce of a job spread over several nodes (4 x
/// 400 Gb/s HCAs, a quarter of their 200 GB/s each way at full intensity).
const IB_IDLE_BYTES_PER_SECOND: f64 = 1e6;
fn job_ib_bytes_per_second(intensity: f64, nodes: usize) -> f64 {
    if nodes > 1 {
        intensity * 100e9
    } else {
        0.0
    }
}

impl Sim {
    /// A cluster of `nodes` nodes (1 to 2,048) whose history starts 24 h before `start_ms`
    /// so that at `start_ms` it is already busy, with jobs of every age.
    pub fn new(nodes: usize, seed: u64, cluster: &str, start_ms: UnixMs) -> Sim {
        let nodes = nodes.clamp(1, 2048);
        let inv = layout(nodes, cluster);
        let mut rng = Rng::new(seed);
        let warmup_from = start_ms - 24 * HOUR_MS;
        let mut sim_nodes: Vec<SimNode> = inv
            .nodes
            .iter()
            .map(|n| SimNode {
                rack: inv.racks.iter().position(|r| r.name == n.rack).unwrap_or(0),
                state: NodeState::Idle,
                reason: None,
                job: None,
                ecc_dbe: [0; GPUS_PER_NODE],
                last_xid: [None; GPUS_PER_NODE],
                fault: None,
                job_energy_j: 0.0,
                job_ib_bytes: 0.0,
            })
            .collect();
        // Field trouble, placed by fraction so every size has it: one node with a GPU that
        // starts throwing double-bit ECC errors two hours in, one drained for maintenance,
        // one whose slurmd stopped answering.
        if nodes >= 4 {
            let ecc = nodes * 37 / 64;
            sim_nodes[ecc].fault = Some(SimGpuFault {
                gpu: 3,
                onset_ms: start_ms + 2 * HOUR_MS,
            });
            sim_nodes[nodes * 50 / 64].state = NodeState::Drained;
            sim_nodes[nodes * 50 / 64].reason = Some("root: PSU replacement".into());
            sim_nodes[nodes * 60 / 64].state = NodeState::Down;
            sim_nodes[nodes * 60 / 64].reason = Some("Not responding".into());
        }
        // Arrivals keep about 85% of what the long runs and broken nodes leave busy.
        let left_nodes = nodes.saturating_sub(long_run_nodes(nodes) + 3).max(1);
        let max_job = max_random_job_nodes(nodes);
        let mean_nodes = RANDOM_JOB_NODES
            .iter()
            .map(|&k| k.min(max_job) as f64)
            .sum::<f64>()
            / RANDOM_JOB_NODES.len() as f64;
        let mean_job_gpu_ms = mean_nodes * GPUS_PER_NODE as f64 * mean_random_duration_ms();
        let arrival_mean_ms = mean_job_gpu_ms / (0.85 * (left_nodes * GPUS_PER_NODE) as f64);
        let first_arrival = warmup_from + (rng.exp(arrival_mean_ms) as i64);
        let mut sim = Sim {
            seed,
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
        };
        sim.submit_long_runs();
        sim.schedule();
        sim.advance_to(start_ms);
        sim
    }

    /// A few multi-day training runs, present from the start of history.
    fn submit_long_runs(&mut self) {
        let n = self.nodes.len();
        let sizes = [n / 8, n / 16, n / 16];
        let names = [
            "llama-405b-pretrain",
            "mixtral-8x22b-pretrain",
            "code-70b-continued-pretrain",
        ];
        for (size, name) in sizes.into_iter().zip(names) {
            if size == 0 {
                continue;
            }
            let duration = (3 * 24 + self.rng.below(48) as i64) * HOUR_MS;
            self.submit(name, size, duration, true);
        }
    }

    fn submit(&mut self, name: &str, nodes_needed: usize, duration_ms: i64, training: bool) {
        let id = self.next_job_id;
        self.next_job_id += 1;
        let users = ["alice", "bob", "carol", "dave", "erin", "frank"];
        let accounts = ["llm-pretrain", "llm-finetune", "research", "eval"];
        let user = users[self.rng.below(users.len() as u64) as usize];
        let account = if training && name.contains("pretrain") {
            accounts[0]
        } else {
            accounts[1 + self.rng.below(3) as usize]
        };
        let gpus = (nodes_needed * GPUS_PER_NODE) as u32;
        // Checkpoint every 30 to 60 minutes; the save takes about 45 s at 256 GPUs.
        let ckpt_interval_ms = (30 + self.rng.below(31) as i64) * MIN_MS;
        self.active.push(SimJob {
            job: Job {
                id,
                name: name.into(),
                user: user.into(),
                account: account.into(),
                partition: "gpu".into(),
                state: JobState::Pending,
                nodes: Vec::new(),
                gpus,
                submit_ms: self.t_ms,
                start_ms: None,
                end_ms: None,
            },
            nodes_needed,
            node_idx: Vec::new(),
            duration_ms,
            // 0.45 to 0.9: a full rack of busy nodes runs near, not past, a 40 kW limit.
            intensity: 0.45 + 0.45 * self.rng.unit(),
            training,
            ckpt_interval_ms,
            next_ckpt_ms: 0,
            ckpt_until_ms: 0,
            prev_ckpt_end_ms: 0,
            checkpoints: 0,
            step: 0,
            fail_at_ms: None,
            restart_count: 0,
            held: false,
            eligible_ms: 0,
        });
        self.events.push(SimEvent::JobSubmitted {
            job: self.active[self.active.len() - 1].job.clone(),
        });
    }

    fn submit_random(&mut self) {
        let choices = RANDOM_JOB_NODES;
        let want = choices[self.rng.below(choices.len() as u64) as usize]
            .min(max_random_job_nodes(self.nodes.len()));
        let kinds = [
            ("llama-70b-sft", true),
            ("rlhf-ppo", true),
            ("mistral-7b-lora", true),
            ("eval-harness", false),
            ("vision-encoder-pretrain", true),
            ("data-dedup-embed", false),
        ];
        let (name, training) = kinds[self.rng.below(kinds.len() as u64) as usize];
        let (lo, hi) = random_duration_bounds_ms();
        let duration = (lo.ln() + (hi.ln() - lo.ln()) * self.rng.unit()).exp() as i64;
        self.submit(name, want, duration, training);
    }

    /// Starts pending jobs in submit order where they fit (first fit with backfill),
    /// preferring nodes on the leaf switches with the most free nodes.
    fn schedule(&mut self) {
        let t = self.t_ms;
        for j in 0..self.active.len() {
            let sj = &self.active[j];
            if sj.job.state != JobState::Pending || sj.held || sj.eligible_ms > t {
                continue;
            }
            let need = self.active[j].nodes_needed;
            let Some(picked) = self.pick_nodes(need) else {
                continue;
            };
            let id = self.active[j].job.id;
            for &i in &picked {
                self.nodes[i].job = Some(id);
                self.nodes[i].state = NodeState::Allocated;
            }
            let names: Vec<String> = picked
                .iter()
                .map(|&i| self.inv.nodes[i].name.clone())
                .collect();
            let faulty = picked
                .iter()
                .find_map(|&i| self.nodes[i].fault.as_ref().map(|f| f.onset_ms));
            let fail_delay = (10 + self.rng.below(31) as i64) * MIN_MS;
            let sj = &mut self.active[j];
            sj.job.state = JobState::Running;
            sj.job.start_ms = Some(t);
            sj.job.nodes = names;
            sj.node_idx = picked;
            sj.next_ckpt_ms = t + sj.ckpt_interval_ms;
            sj.fail_at_ms = faulty.map(|onset| onset.max(t) + fail_delay);
            self.events.push(SimEvent::JobStarted {
                job: sj.job.clone(),
            });
        }
    }

    fn pick_nodes(&self, need: usize) -> Option<Vec<usize>> {
        let free: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].state == NodeState::Idle && self.nodes[i].job.is_none())
            .collect();
        if free.len() < need {
            return None;
        }
        // Group free nodes by rack (= leaf switch); fill from the fullest free rack.
        let racks = self.inv.racks.len();
        let mut by_rack: Vec<Vec<usize>> = vec![Vec::new(); racks];
        for &i in &free {
            by_rack[self.nodes[i].rack].push(i);
        }
        let mut order: Vec<usize> = (0..racks).collect();
        order.sort_by_key(|&r| (std::cmp::Reverse(by_rack[r].len()), r));
        let mut out = Vec::with_capacity(need);
        for r in order {
            for &i in &by_rack[r] {
                if out.len() == need {
                    break;
                }
                out.push(i);
            }
        }
        out.sort_unstable();
        Some(out)
    }

    /// Frees a job's nodes at `t` (a draining node becomes drained) and banks the energy
    /// the job drew on them.
    fn release(&mut self, nodes: &[usize], intensity: f64, start_ms: Option<UnixMs>, t: UnixMs) {
        let secs = (t - start_ms.unwrap_or(t)).max(0) as f64 / 1000.0;
        let joules = job_extra_watts(intensity) * secs;
        let ib = job_ib_bytes_per_second(intensity, nodes.len()) * secs;
        for &i in nodes {
            let n = &mut self.nodes[i];
            n.job = None;
            n.job_energy_j += joules;
            n.job_ib_bytes += ib;
            n.state = match n.state {
                NodeState::Draining => NodeState::Drained,
                NodeState::Allocated => NodeState::Idle,
                other => other,
            };
        }
    }

    /// GPU `g` of node `node`'s energy counter at the current time, in joules: idle power
    /// since boot, plus what ended jobs drew, plus the running job so far.
    fn energy_joules(&self, node: usize, g: usize, job: Option<&SimJob>) -> f64 {
        let since_boot = (self.t_ms - self.boot_ms) as f64 / 1000.0;
        let running = job
            .and_then(|j| j.job.start_ms.map(|s| (j.intensity, s)))
            .map(|(intensity, s)| {
                job_extra_watts(intensity) * (self.t_ms - s).max(0) as f64 / 1000.0
            })
            .unwrap_or(0.0);
        // Drivers loaded a few hours apart, so GPUs do not all read the same.
        let offset = 3.6e6 * hash_unit(self.seed, 0, (node * GPUS_PER_NODE + g) as u64);
        GPU_IDLE_POWER_WATTS * since_boot + self.nodes[node].job_energy_j + running + offset
    }

    /// Node `node`'s InfiniBand counter (bytes received plus sent since boot) and rate now;
    /// `None` for a node that is off.
    fn ib(&self, node: usize, job: Option<&SimJob>) -> Option<(f64, f64)> {
        let n = &self.nodes[node];
        if matches!(n.state, NodeState::Down | NodeState::NotResponding) {
            return None;
        }
        let since_boot = (self.t_ms - self.boot_ms) as f64 / 1000.0;
        let (rate, running) = job
            .and_then(|j| j.job.start_ms.map(|s| (j, s)))
            .map(|(j, s)| {
                let r = job_ib_bytes_per_second(j.intensity, j.node_idx.len());
                (r, r * (self.t_ms - s).max(0) as f64 / 1000.0)
            })
            .unwrap_or((0.0, 0.0));
        // Whole bytes, as the counters are.
        let total = (IB_IDLE_BYTES_PER_SECOND * since_boot + n.job_ib_bytes + running).round();
        Some((total, IB_IDLE_BYTES_PER_SECOND + rate))
    }

    fn finish(&mut self, j: usize, state: JobState, t: UnixMs) {
        let mut sj = self.active.remove(j);
        self.release(&sj.node_idx, sj.intensity, sj.job.start_ms, t);
        sj.job.state = state;
        sj.job.end_ms = Some(t);
        self.events.push(SimEvent::JobEnded { job: sj.job });
    }

    /// Moves simulated time forward to `t_ms`, processing every event on the way.
    /// Time never goes backwards: an earlier `t_ms` changes nothing.
    pub fn advance_to(&mut self, t_ms: UnixMs) {
        while let Some((when, what)) = self.next_event(t_ms) {
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
                    let fault = self.active[j]
                        .node_idx
                        .iter()
                        .find_map(|&i| self.nodes[i].fault.as_ref().map(|f| (i, f.gpu)));
                    if let Some((i, g)) = fault {
                        self.nodes[i].ecc_dbe[g] += 1;
                        self.nodes[i].last_xid[g] = Some(48);
                        self.events.push(SimEvent::Xid {
                            node: self.inv.nodes[i].name.clone(),
                            gpu: g as u32,
                            xid: 48,
                            at_ms: when,
                        });
                    }
                    self.finish(j, JobState::Failed, when);
                    self.schedule();
                }
                Next::Checkpoint(j) => {
                    let sj = &mut self.active[j];
                    let gpus = f64::from(sj.job.gpus);
                    let duration = (45_000.0 * (gpus / 256.0).sqrt()).max(5_000.0) as i64;
                    sj.step += (sj.ckpt_interval_ms / 1000) as u64;
                    sj.prev_ckpt_end_ms = sj.ckpt_until_ms;
                    sj.checkpoints += 1;
                    sj.ckpt_until_ms = when + duration;
                    sj.next_ckpt_ms = when + sj.ckpt_interval_ms;
                    let ck = Checkpoint {
                        job_id: sj.job.id,
                        step: sj.step,
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
        for (j, sj) in self.active.iter().enumerate() {
            let Some(start) = sj.job.start_ms else {
                if !sj.held && sj.eligible_ms > self.t_ms {
                    consider(sj.eligible_ms, Next::Eligible);
                }
                continue;
            };
            consider(start + sj.duration_ms, Next::End(j));
            if let Some(f) = sj.fail_at_ms {
                consider(f, Next::Fail(j));
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

    /// Rack inlet temperature: a daily cycle peaking at 15:00 UTC; the weak-cooling rack
    /// (the sixth, or the last of small clusters) climbs about 17 °C higher in warm hours.
    fn inlet_celsius(&self, rack: usize, t: UnixMs) -> f64 {
        let hour = (t.rem_euclid(24 * HOUR_MS)) as f64 / HOUR_MS as f64;
        let day = (std::f64::consts::TAU * (hour - 9.0) / 24.0).sin();
        let weak = rack == weak_rack(self.inv.racks.len());
        let extra = if weak { 17.0 * day.max(0.0) } else { 0.0 };
        22.0 + 3.0 * day
            + extra
            + 0.5 * (hash_unit(self.seed, t / 1000, 1_000_000 + rack as u64) - 0.5)
    }

    /// The readings of one GPU at the current time: a pure function of state and time.
    fn gpu_reading(&self, node: usize, g: usize, inlet: f64, job: Option<&SimJob>) -> GpuReading {
        let t = self.t_ms;
        let n = &self.nodes[node];
        let gid = (node * GPUS_PER_NODE + g) as u64;
        let noise = |k: u64| hash_unit(self.seed, t / 1000, gid * 8 + k) - 0.5;
        let responding = !matches!(n.state, NodeState::Down | NodeState::NotResponding);
        if !responding {
            return GpuReading {
                node: self.inv.nodes[node].name.clone(),
                index: g as u32,
                ..GpuReading::default()
            };
        }
        let (load, saving) = match job {
            Some(j) => (j.intensity, t < j.ckpt_until_ms),
            None => (0.0, false),
        };
        let busy = load > 0.0 && !saving;
        let mut power = if busy {
            GPU_IDLE_POWER_WATTS + 20.0 + load * 610.0 + 30.0 * noise(0)
        } else if saving {
            150.0 + 10.0 * noise(0)
        } else {
            GPU_IDLE_POWER_WATTS + 4.0 * noise(0)
        };
        let mut bits = 0u64;
        if power >= GPU_MAX_POWER_WATTS - 10.0 {
            bits |= ThrottleReasons::SW_POWER_CAP;
            power = power.min(GPU_MAX_POWER_WATTS);
        }
        let temp = inlet
            + 18.0
            + 32.0 * (power - GPU_IDLE_POWER_WATTS) / (GPU_MAX_POWER_WATTS - GPU_IDLE_POWER_WATTS)
            + 1.5 * noise(1);
        let mut clock_factor = 1.0;
        if temp >= HW_THERMAL_CELSIUS {
            bits |= ThrottleReasons::HW_THERMAL | ThrottleReasons::SW_THERMAL;
            clock_factor = 0.6;
        } else if temp >= SW_THERMAL_CELSIUS {
            bits |= ThrottleReasons::SW_THERMAL;
            clock_factor = 0.85;
        }
        if bits & ThrottleReasons::SW_POWER_CAP != 0 {
            clock_factor *= 0.95;
        }
        let (clock, sm) = if busy {
            (
                GPU_BOOST_CLOCK_MHZ * clock_factor,
                (load * clock_factor + 0.03 * noise(2)).clamp(0.0, 1.0),
            )
        } else if saving {
            (GPU_BOOST_CLOCK_MHZ * clock_factor, 0.02)
        } else {
            bits |= ThrottleReasons::GPU_IDLE;
            (GPU_IDLE_CLOCK_MHZ, 0.0)
        };
        // Engine activity as a transformer's training step shows it: kernels nearly all the
        // time, the tensor pipe about half of the SMs' active cycles, HBM a third. Ratios
        // to 6 decimals and percents whole, as the exporter prints them.
        let six = |x: f64| (x.clamp(0.0, 1.0) * 1e6).round() / 1e6;
        let (util, gr, tensor, dram) = if busy {
            (
                (90.0 + 10.0 * load).round(),
                six(sm + 0.02),
                six(sm * 0.55),
                six(sm * 0.35),
            )
        } else if saving {
            (12.0, six(0.03), 0.0, six(0.08))
        } else {
            (0.0, 0.0, 0.0, 0.0)
        };
        // Traffic: all-reduce over NVLink while computing; a checkpoint save goes out over
        // PCIe to storage.
        let gb = 1e9;
        let (nvlink, pcie) = if busy {
            (
                load * clock_factor * (120.0 + 10.0 * noise(3)) * gb,
                (4.0 + 2.0 * noise(4)) * gb,
            )
        } else if saving {
            (2.0 * gb, (20.0 + 4.0 * noise(4)) * gb)
        } else {
            (0.0, 0.0)
        };
        // Power and SM activity to 6 decimals, the temperature in whole degrees: what
        // dcgm-exporter prints, so a scrape of the simulator reads back these very numbers.
        let micro = |x: f64| (x * 1e6).round() / 1e6;
        GpuReading {
            node: self.inv.nodes[node].name.clone(),
            index: g as u32,
            power_watts: Some(micro(power)),
            temp_celsius: Some(temp.round()),
            sm_clock_mhz: Some(clock.round()),
            sm_active_ratio: Some(micro(sm)),
            throttle: Some(ThrottleReasons(bits)),
            ecc_dbe_total: Some(n.ecc_dbe[g]),
            last_xid: n.last_xid[g],
            // Healthy counters read zero, as real exporters report them.
            ecc_sbe_total: Some(0),
            pcie_replay_total: Some(0),
            remapped_rows_uncorrectable: Some(0),
            // Whole MB/s: even, so the exporter's halves add up exactly.
            nvlink_bytes_per_second: Some((nvlink / 1e6).round() * 1e6),
            pcie_bytes_per_second: Some((pcie / 1e6).round() * 1e6),
            power_limit_watts: Some(GPU_MAX_POWER_WATTS),
            memory_temp_celsius: Some((temp - 2.0 + 2.0 * noise(5)).round()),
            gpu_util_percent: Some(util),
            gr_engine_active_ratio: Some(gr),
            tensor_active_ratio: Some(tensor),
            dram_active_ratio: Some(dram),
            // Whole millijoules, as the exporter's counter.
            energy_joules: Some((self.energy_joules(node, g, job) * 1000.0).round() / 1000.0),
        }
    }

    /// Every reading at the current time, as exporters would report them.
    pub fn readings(&self) -> Readings {
        let mut gpus = Vec::with_capacity(self.nodes.len() * GPUS_PER_NODE);
        let mut racks: Vec<RackReading> = self
            .inv
            .racks
            .iter()
            .enumerate()
            .map(|(i, r)| RackReading {
                rack: r.name.clone(),
                nodes_power_watts: None,
                // Whole degrees, as the BMCs print it.
                inlet_celsius: Some(self.inlet_celsius(i, self.t_ms).round()),
            })
            .collect();
        let inlets: Vec<f64> = (0..racks.len())
            .map(|i| self.inlet_celsius(i, self.t_ms))
            .collect();
        let mut node_power = Vec::with_capacity(self.nodes.len());
        let (mut ib_total, mut ib_rate) = (Vec::new(), Vec::new());
        let jobs_by_id: std::collections::HashMap<u64, &SimJob> =
            self.active.iter().map(|j| (j.job.id, j)).collect();
        for (i, n) in self.nodes.iter().enumerate() {
            let inlet = inlets[n.rack];
            let job = n.job.and_then(|id| jobs_by_id.get(&id).copied());
            let mut node_gpu_watts = 0.0;
            let mut load = 0.0;
            for g in 0..GPUS_PER_NODE {
                let r = self.gpu_reading(i, g, inlet, job);
                node_gpu_watts += r.power_watts.unwrap_or(0.0);
                load += r.sm_active_ratio.unwrap_or(0.0) / GPUS_PER_NODE as f64;
                gpus.push(r);
            }
            let responding = !matches!(n.state, NodeState::Down | NodeState::NotResponding);
            // Node power as its BMC measures it: whole watts; nothing from a node that is off.
            let node_watts = responding
                .then(|| (node_gpu_watts + HOST_IDLE_WATTS + HOST_LOAD_WATTS * load).round());
            if let Some(w) = node_watts {
                *racks[n.rack].nodes_power_watts.get_or_insert(0.0) += w;
            }
            node_power.push(node_watts);
            let ib = self.ib(i, job);
            ib_total.push(ib.map(|x| x.0));
            ib_rate.push(ib.map(|x| x.1));
        }
        let nodes = self
            .nodes
            .iter()
            .zip(&self.inv.nodes)
            .map(|(s, n)| (n.name.clone(), s.state))
            .collect();
        let jobs = self.active.iter().map(|j| j.job.clone()).collect();
        Readings {
            at_ms: self.t_ms,
            gpus,
            racks,
            nodes,
            node_power_watts: node_power,
            jobs,
            node_ib_bytes_per_second: ib_rate,
            node_ib_bytes_total: ib_total,
        }
    }

    /// Scheduler state only (node states and jobs), no telemetry: for when the telemetry
    /// comes from real exporters and the simulator only schedules.
    pub fn sched_readings(&self) -> Readings {
        Readings {
            at_ms: self.t_ms,
            nodes: self
                .nodes
                .iter()
                .zip(&self.inv.nodes)
                .map(|(s, n)| (n.name.clone(), s.state))
                .collect(),
            jobs: self.active.iter().map(|j| j.job.clone()).collect(),
            ..Readings::default()
        }
    }

    /// The ground truth now, from the simulator's own state.
    pub fn truth(&self) -> SimTruth {
        model::truth(self, &self.readings())
    }

    /// The ground truth now, reusing `readings` taken at the current time (saves a second
    /// pass over every GPU per tick).
    pub fn truth_with(&self, readings: &Readings) -> SimTruth {
        debug_assert_eq!(readings.at_ms, self.t_ms);
        model::truth(self, readings)
    }
}

/// Nodes per random job (8 to 256 GPUs), small jobs more common.
const RANDOM_JOB_NODES: [usize; 10] = [1, 1, 1, 2, 2, 4, 4, 8, 16, 32];

/// Nodes held by the multi-day runs: an eighth and two sixteenths of the cluster.
fn long_run_nodes(nodes: usize) -> usize {
    nodes / 8 + 2 * (nodes / 16)
}

/// The largest random job: half of what the long runs and broken nodes leave.
fn max_random_job_nodes(nodes: usize) -> usize {
    (nodes.saturating_sub(long_run_nodes(nodes) + 3) / 2).max(1)
}

/// Random jobs run log-uniformly between 20 minutes and 12 hours.
fn random_duration_bounds_ms() -> (f64, f64) {
    (20.0 * MIN_MS as f64, 12.0 * HOUR_MS as f64)
}

fn mean_random_duration_ms() -> f64 {
    let (lo, hi) = random_duration_bounds_ms();
    (hi - lo) / (hi / lo).ln()
}

/// Which rack has weak cooling.
pub fn weak_rack(racks: usize) -> usize {
    if racks > 5 {
        5
    } else {
        racks.saturating_sub(1)
    }
}

enum Next {
    Arrival,
    /// A requeued job may start again.
    Eligible,
    End(usize),
    Fail(usize),
    Checkpoint(usize),
}

#[cfg(test)]
mod tests;
