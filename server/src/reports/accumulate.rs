//! The accumulator each source's tick feeds: GPU-seconds by state, idle from SM activity,
//! throttling and failure losses, energy and rack shares, added to the current hour of the
//! cluster and of every account, partition, user, rack and domain, and emitted as additive
//! deltas once a minute.

use std::collections::HashMap;
use std::sync::Arc;

use app::model::{Inventory, Job, JobState, NodeState, UnixMs};
use app::reports::UNALLOCATED;

use super::ledger::{JobLedger, JobTick};
use super::HOUR_MS;
use crate::aggregate::clock_deficit;
use crate::aggregate::hang;
use crate::store::{ReportDelta, ReportSums};
use crate::telemetry::Readings;

const MINUTE_MS: i64 = 60_000;
const JOB_KINDS: [&str; 3] = ["account", "partition", "user"];
/// A job interrupted longer ago than this that has not run again is forgotten.
const WAIT_FORGOTTEN_MS: i64 = 7 * 86_400_000;

/// Where each node of the inventory adds its seconds.
struct Index {
    inv: Arc<Inventory>,
    node_of: HashMap<String, usize>,
    /// Per node: GPUs, GPUs in its rack, and the slots of its rack and domains.
    nodes: Vec<(u32, u32, Vec<usize>)>,
}

/// A job's run as last seen running: its start, nodes and GPUs.
struct Run {
    start_ms: UnixMs,
    nodes: Vec<String>,
    gpus: u32,
}

/// Adds live ticks into hourly report rollups (see the module's definitions).
pub struct Accumulator {
    idle_below_sm: f64,
    index: Option<Index>,
    hour_ms: Option<UnixMs>,
    minute_ms: Option<UnixMs>,
    /// Groups seen so far and what they gathered since the last flush.
    slots: Vec<(&'static str, String, ReportSums)>,
    slot_of: HashMap<(&'static str, String), usize>,
    cluster: usize,
    unallocated: [usize; 3],
    job_slots: HashMap<u64, [usize; 3]>,
    runs: HashMap<u64, Run>,
    /// Failure losses waiting for the next flush (they carry their own hour).
    pending: Vec<ReportDelta>,
    /// The hang rule's hold, for the ledger's hung time.
    hang_ms: i64,
    /// Each running or interrupted job's ledger, and what each running job gathered since
    /// the last flush (its `job` rows).
    ledgers: HashMap<u64, JobLedger>,
    job_sums: std::collections::BTreeMap<u64, ReportSums>,
    job_ticks: HashMap<u64, JobTick>,
    // Per-tick scratch, kept to avoid allocating every tick.
    busy: Vec<f64>,
    deficit: Vec<f64>,
    state: Vec<NodeState>,
    bmc: Vec<Option<f64>>,
    node_jobs: Vec<Vec<(u64, f64)>>,
    /// Per node: GPUs with an SM activity reading, InfiniBand quiet, its GPUs in `r.gpus`.
    seen: Vec<f64>,
    quiet: Vec<bool>,
    gpu_range: Vec<(usize, usize)>,
    /// Each GPU's energy counter at the previous tick (joules; `r.gpus`' order, which is
    /// the inventory's), and per node this tick's GPU energy and the estimated part of it.
    prev_energy: Vec<Option<f64>>,
    gpu_j: Vec<f64>,
    gpu_est_j: Vec<f64>,
    /// Running jobs' GPUs held idle past the hold at this tick (job, GPUs).
    held_idle: Vec<(u64, u32)>,
}

/// The most a GPU's energy counter may rise per second of a tick (watts): more is a bad
/// reading or a counter that jumped, and the tick's power stands instead.
const MAX_GPU_WATTS: f64 = 2_000.0;

fn floor(ms: UnixMs, step: i64) -> UnixMs {
    ms - ms.rem_euclid(step)
}

impl Accumulator {
    pub fn new(idle_below_sm: f64) -> Accumulator {
        let mut a = Accumulator {
            idle_below_sm,
            index: None,
            hour_ms: None,
            minute_ms: None,
            slots: Vec::new(),
            slot_of: HashMap::new(),
            cluster: 0,
            unallocated: [0; 3],
            job_slots: HashMap::new(),
            runs: HashMap::new(),
            pending: Vec::new(),
            hang_ms: hang::DEFAULT_HANG_MS,
            ledgers: HashMap::new(),
            job_sums: std::collections::BTreeMap::new(),
            job_ticks: HashMap::new(),
            busy: Vec::new(),
            deficit: Vec::new(),
            state: Vec::new(),
            bmc: Vec::new(),
            node_jobs: Vec::new(),
            seen: Vec::new(),
            quiet: Vec::new(),
            gpu_range: Vec::new(),
            prev_energy: Vec::new(),
            gpu_j: Vec::new(),
            gpu_est_j: Vec::new(),
            held_idle: Vec::new(),
        };
        a.cluster = a.slot("cluster", "all");
        a.unallocated = JOB_KINDS.map(|k| a.slot(k, UNALLOCATED));
        a
    }

    /// The hang rule's hold (`[alerts] hang_minutes`), for the ledger.
    pub fn set_hang_ms(&mut self, hang_ms: i64) {
        self.hang_ms = hang_ms;
    }

    /// Adds a ledger delta of running job `id` to its groups and its own row.
    fn book(&mut self, id: u64, d: &ReportSums) {
        if d.is_zero() {
            return;
        }
        if let Some(slots) = self.job_slots.get(&id).copied() {
            for slot in slots {
                self.slots[slot].2.add(d);
            }
        }
        self.slots[self.cluster].2.add(d);
        self.job_sums.entry(id).or_default().add(d);
    }

    fn slot(&mut self, kind: &'static str, key: &str) -> usize {
        if let Some(&i) = self.slot_of.get(&(kind, key.to_string())) {
            return i;
        }
        self.slots
            .push((kind, key.to_string(), ReportSums::default()));
        self.slot_of
            .insert((kind, key.to_string()), self.slots.len() - 1);
        self.slots.len() - 1
    }

    fn reindex(&mut self, inv: &Arc<Inventory>) {
        if self
            .index
            .as_ref()
            .is_some_and(|i| Arc::ptr_eq(&i.inv, inv))
        {
            return;
        }
        self.prev_energy.clear();
        let mut rack_gpus: HashMap<&str, u32> = HashMap::new();
        for n in &inv.nodes {
            *rack_gpus.entry(n.rack.as_str()).or_default() += n.gpus.len() as u32;
        }
        let hall_of = inv.hall_of_rack();
        let mut nodes = Vec::with_capacity(inv.nodes.len());
        let mut node_of = HashMap::with_capacity(inv.nodes.len());
        for (i, n) in inv.nodes.iter().enumerate() {
            let mut infra = vec![self.slot("rack", &n.rack)];
            // A hall is booked what its racks are (rack-seconds included, so its cost
            // carries its racks' overhead).
            if let Some(h) = hall_of.get(n.rack.as_str()) {
                infra.push(self.slot("hall", h));
            }
            for d in &n.domains {
                let s = self.slot("domain", d);
                if !infra.contains(&s) {
                    infra.push(s);
                }
            }
            let rg = rack_gpus.get(n.rack.as_str()).copied().unwrap_or(0);
            nodes.push((n.gpus.len() as u32, rg, infra));
            node_of.insert(n.name.clone(), i);
        }
        self.index = Some(Index {
            inv: Arc::clone(inv),
            node_of,
            nodes,
        });
    }

    fn job_slots(&mut self, j: &Job) -> [usize; 3] {
        if let Some(s) = self.job_slots.get(&j.id) {
            return *s;
        }
        let s = [
            self.slot("account", &j.account),
            self.slot("partition", &j.partition),
            self.slot("user", &j.user),
        ];
        self.job_slots.insert(j.id, s);
        s
    }

    /// The running jobs holding GPUs idle past the hold at the next tick
    /// ([`crate::aggregate::idle`]): their GPU-seconds are booked as held idle.
    pub fn set_held_idle(&mut self, idle: &[app::queue::IdleHeld]) {
        self.held_idle.clear();
        self.held_idle.extend(idle.iter().map(|h| (h.job, h.gpus)));
    }

    /// Adds one tick that stands for `dt_ms` of source time before `r.at_ms`; returns
    /// what to add to the store (once a minute, and at every hour's end).
    pub fn observe(&mut self, inv: &Arc<Inventory>, r: &Readings, dt_ms: i64) -> Vec<ReportDelta> {
        let hour = floor(r.at_ms, HOUR_MS);
        let minute = floor(r.at_ms, MINUTE_MS);
        let mut out = Vec::new();
        if self.minute_ms.is_some_and(|m| m != minute) {
            out = self.flush();
        }
        self.hour_ms = Some(hour);
        self.minute_ms = Some(minute);
        self.reindex(inv);

        // Runs as they are now; a run that ended without a failure is forgotten.
        let running: Vec<&Job> = r
            .jobs
            .iter()
            .filter(|j| j.state == JobState::Running)
            .collect();
        let live_jobs: std::collections::HashSet<u64> = running.iter().map(|j| j.id).collect();
        self.runs.retain(|id, _| live_jobs.contains(id));
        self.job_slots.retain(|id, _| live_jobs.contains(id));
        let at = r.at_ms;
        self.ledgers.retain(|id, l| {
            live_jobs.contains(id) || l.waiting_since.is_some_and(|w| at - w < WAIT_FORGOTTEN_MS)
        });
        for j in &running {
            if self.runs.contains_key(&j.id) {
                continue;
            }
            let start_ms = j.start_ms.unwrap_or(r.at_ms);
            self.runs.insert(
                j.id,
                Run {
                    start_ms,
                    nodes: j.nodes.clone(),
                    gpus: j.gpus,
                },
            );
            self.job_slots(j);
            let wait = self
                .ledgers
                .entry(j.id)
                .or_default()
                .run_started(start_ms, j.gpus);
            self.book(j.id, &wait);
        }
        if dt_ms <= 0 {
            self.note_counters(r);
            return out;
        }
        let dt = dt_ms as f64 / 1000.0;

        let Some(ix) = self.index.take() else {
            self.note_counters(r);
            return out;
        };
        let n = ix.nodes.len();
        for v in [
            &mut self.busy,
            &mut self.deficit,
            &mut self.gpu_j,
            &mut self.gpu_est_j,
        ] {
            v.clear();
            v.resize(n, 0.0);
        }
        self.state.clear();
        self.state.resize(n, NodeState::Unknown);
        self.bmc.clear();
        self.bmc.resize(n, None);
        self.node_jobs.resize_with(n, Vec::new);
        for v in &mut self.node_jobs {
            v.clear();
        }
        self.seen.clear();
        self.seen.resize(n, 0.0);
        self.quiet.clear();
        self.quiet.resize(n, false);
        self.gpu_range.clear();
        self.gpu_range.resize(n, (0, 0));
        self.job_ticks.clear();

        let mut last: Option<(&str, usize)> = None;
        for (k, g) in r.gpus.iter().enumerate() {
            // GPUs come node by node: look the node up once per node.
            let i = match last {
                Some((name, i)) if name == g.node => i,
                _ => match ix.node_of.get(&g.node) {
                    Some(&i) => {
                        last = Some((g.node.as_str(), i));
                        self.gpu_range[i] = (k, k);
                        i
                    }
                    None => continue,
                },
            };
            self.gpu_range[i].1 = k + 1;
            if g.sm_active_ratio.is_some() {
                self.seen[i] += 1.0;
            }
            let idle = g.sm_active_ratio.is_some_and(|s| s < self.idle_below_sm);
            if !idle {
                self.busy[i] += 1.0;
                self.deficit[i] += clock_deficit(g).unwrap_or(0.0);
            }
            // Its energy: the counter's rise when it rose plausibly since the last tick
            // (exact, on shared and MIG nodes too), else its power over the tick.
            let prev = self.prev_energy.get(k).copied().flatten();
            match (prev, g.energy_joules) {
                (Some(a), Some(b)) if b >= a && b - a <= MAX_GPU_WATTS * dt => {
                    self.gpu_j[i] += b - a;
                }
                _ => {
                    if let Some(p) = g.power_watts {
                        self.gpu_j[i] += p * dt;
                        self.gpu_est_j[i] += p * dt;
                    }
                }
            }
        }
        self.note_counters(r);
        for n in &r.nodes {
            if let Some(&i) = ix.node_of.get(&n.name) {
                self.state[i] = n.state;
                self.bmc[i] = n.power_watts;
                self.quiet[i] = hang::ib_quiet(n.ib_bytes_per_second);
            }
        }
        for j in &running {
            self.job_slots(j);
            let per_node = if j.nodes.is_empty() {
                0.0
            } else {
                f64::from(j.gpus) / j.nodes.len() as f64
            };
            for name in &j.nodes {
                if let Some(&i) = ix.node_of.get(name) {
                    self.node_jobs[i].push((j.id, per_node));
                }
            }
        }

        for (i, (gpus, rack_gpus, infra)) in ix.nodes.iter().enumerate() {
            let k = f64::from(*gpus) * dt;
            // The node's energy: its BMC's power over the tick, else its GPUs'.
            let gpu_energy_wh = self.gpu_j[i] / 3600.0;
            let mut s = ReportSums {
                capacity_gs: k,
                energy_wh: self.bmc[i].map_or(gpu_energy_wh, |p| p * dt / 3600.0),
                gpu_energy_wh,
                gpu_energy_est_wh: self.gpu_est_j[i] / 3600.0,
                rack_share_s: if *rack_gpus > 0 {
                    k / f64::from(*rack_gpus)
                } else {
                    0.0
                },
                ..ReportSums::default()
            };
            let allocated = !self.node_jobs[i].is_empty();
            let st = self.state[i];
            if allocated {
                s.allocated_gs = k;
                s.busy_gs = self.busy[i].min(f64::from(*gpus)) * dt;
                s.throttle_lost_gs = self.deficit[i] * dt;
            } else if matches!(st, NodeState::Drained | NodeState::Draining) {
                s.drained_gs = k;
            } else if st.is_unavailable() || st == NodeState::Unknown {
                s.down_gs = k;
            }
            self.slots[self.cluster].2.add(&s);
            for &slot in infra {
                self.slots[slot].2.add(&s);
            }
            if allocated {
                let total: f64 = self.node_jobs[i].iter().map(|(_, w)| w).sum();
                let count = self.node_jobs[i].len() as f64;
                for idx in 0..self.node_jobs[i].len() {
                    let (id, w) = self.node_jobs[i][idx];
                    let f = if total > 0.0 { w / total } else { 1.0 / count };
                    let part = s.scaled(f);
                    if let Some(slots) = self.job_slots.get(&id).copied() {
                        for slot in slots {
                            self.slots[slot].2.add(&part);
                        }
                    }
                    self.job_sums.entry(id).or_default().add(&part);
                    let t = self.job_ticks.entry(id).or_default();
                    t.allocated_gs += part.allocated_gs;
                    t.busy_gs += part.busy_gs;
                    t.deficit_gs += part.throttle_lost_gs;
                    t.unseen_gs += (f64::from(*gpus) - self.seen[i]).max(0.0) * dt * f;
                }
            } else {
                for slot in self.unallocated {
                    self.slots[slot].2.add(&s);
                }
            }
        }
        // GPUs held idle, to their jobs' groups.
        for (id, gpus) in std::mem::take(&mut self.held_idle) {
            if live_jobs.contains(&id) {
                let d = ReportSums {
                    held_idle_gs: f64::from(gpus) * dt,
                    ..ReportSums::default()
                };
                self.book(id, &d);
            }
        }
        // Each running job's tick into its ledger; the hang signal over its GPUs.
        for j in &running {
            let Some(mut t) = self.job_ticks.get(&j.id).copied() else {
                continue;
            };
            if j.nodes.len() >= 2 {
                let mut gpus = Vec::new();
                let mut quiet = true;
                for name in &j.nodes {
                    if let Some(&i) = ix.node_of.get(name) {
                        let (a, b) = self.gpu_range[i];
                        gpus.extend(r.gpus[a..b].iter());
                        quiet &= self.quiet[i];
                    }
                }
                t.hang_power = hang::hang_signal(&gpus, quiet);
            }
            let hang_ms = self.hang_ms;
            if let Some(l) = self.ledgers.get_mut(&j.id) {
                let d = l.tick(r.at_ms, &t, hang_ms);
                self.book(j.id, &d);
            }
        }
        self.index = Some(ix);
        out
    }

    /// Keeps each GPU's energy counter for the next tick's rise.
    fn note_counters(&mut self, r: &Readings) {
        self.prev_energy.clear();
        self.prev_energy
            .extend(r.gpus.iter().map(|g| g.energy_joules));
    }

    /// A save of job `id` was recorded (before, during or after it ran).
    pub fn checkpoint(&mut self, id: u64, started_ms: UnixMs, duration_ms: i64, complete: bool) {
        if let Some(l) = self.ledgers.get_mut(&id) {
            let d = l.checkpoint(
                started_ms,
                started_ms.saturating_add(duration_ms.max(0)),
                complete,
            );
            self.book(id, &d);
        }
    }

    /// A job failed, timed out, lost its node or was requeued at `at_ms`: the GPU-seconds
    /// since its last complete checkpoint (`last_checkpoint_ms`, its end) or its run's
    /// start, whichever is later, are lost. Returns them (0 when the run is unknown).
    pub fn job_lost(
        &mut self,
        job: &Job,
        at_ms: UnixMs,
        last_checkpoint_ms: Option<UnixMs>,
    ) -> f64 {
        let Some(run) = self.runs.remove(&job.id) else {
            return 0.0;
        };
        // The ledger's re-execution goes with the loss to the job and its groups.
        let reexec = self
            .ledgers
            .get_mut(&job.id)
            .map_or(0.0, |l| l.interrupted(at_ms).reexec_gs);
        let from = last_checkpoint_ms.map_or(run.start_ms, |c| c.max(run.start_ms));
        let lost = f64::from(run.gpus) * ((at_ms - from).max(0) as f64 / 1000.0);
        if lost <= 0.0 && reexec <= 0.0 {
            return 0.0;
        }
        let hour = floor(at_ms, HOUR_MS);
        let sums = |gs: f64| ReportSums {
            failure_lost_gs: gs,
            ..ReportSums::default()
        };
        let job_sums = ReportSums {
            reexec_gs: reexec,
            ..sums(lost)
        };
        let id = job.id.to_string();
        for (kind, key) in [
            ("cluster", "all"),
            ("account", job.account.as_str()),
            ("partition", job.partition.as_str()),
            ("user", job.user.as_str()),
            ("job", id.as_str()),
        ] {
            self.pending.push(ReportDelta {
                kind,
                key: key.to_string(),
                at_ms: hour,
                sums: job_sums,
            });
        }
        if let Some(ix) = &self.index {
            let per_node = lost / run.nodes.len().max(1) as f64;
            for name in &run.nodes {
                if let Some(&i) = ix.node_of.get(name) {
                    for &slot in &ix.nodes[i].2 {
                        let (kind, key, _) = &self.slots[slot];
                        self.pending.push(ReportDelta {
                            kind,
                            key: key.clone(),
                            at_ms: hour,
                            sums: sums(per_node),
                        });
                    }
                }
            }
        }
        lost
    }

    /// Everything gathered since the last flush, then zeroed.
    pub fn flush(&mut self) -> Vec<ReportDelta> {
        let mut out = std::mem::take(&mut self.pending);
        if let Some(hour) = self.hour_ms {
            for (kind, key, sums) in &mut self.slots {
                if !sums.is_zero() {
                    out.push(ReportDelta {
                        kind,
                        key: key.clone(),
                        at_ms: hour,
                        sums: std::mem::take(sums),
                    });
                }
            }
            for (id, sums) in std::mem::take(&mut self.job_sums) {
                if !sums.is_zero() {
                    out.push(ReportDelta {
                        kind: "job",
                        key: id.to_string(),
                        at_ms: hour,
                        sums,
                    });
                }
            }
        }
        out
    }
}

/// Whether a job event throws work away.
pub fn loses_work(state: JobState) -> bool {
    matches!(
        state,
        JobState::Failed | JobState::NodeFail | JobState::Timeout | JobState::Requeued
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::NodeReading;
    use app::model::{Gpu, GpuReading, Node, Rack};

    fn inv() -> Arc<Inventory> {
        Arc::new(Inventory {
            cluster: "t".into(),
            halls: Vec::new(),
            rows: vec!["A".into()],
            racks: vec![Rack {
                name: "r1".into(),
                row: "A".into(),
                hall: String::new(),
                pod: None,
                position: 0,
                power_limit_watts: 1.0,
                cooling: app::model::Cooling::Air,
                inlet_limit_celsius: 35.0,
                coolant_flow_min_lpm: None,
                coolant_delta_t_max_celsius: None,
                chassis_serial: None,
                power_shelves: None,
                power_shelves_redundant: 0,
                switch_trays: None,
            }],
            nodes: vec![Node {
                name: "n1".into(),
                rack: "r1".into(),
                u_position: 1,
                u_height: 4,
                gpus: (0..8)
                    .map(|i| Gpu {
                        index: i,
                        uuid: String::new(),
                        model: "H100".into(),
                        max_power_watts: 700.0,
                    })
                    .collect(),
                domains: vec!["leaf1".into()],
            }],
            domains: Vec::new(),
        })
    }

    fn job(id: u64, account: &str, gpus: u32) -> Job {
        Job {
            id,
            name: "j".into(),
            user: "u".into(),
            account: account.into(),
            partition: "p".into(),
            state: JobState::Running,
            nodes: vec!["n1".into()],
            gpus,
            submit_ms: 0,
            start_ms: Some(0),
            end_ms: None,
        }
    }

    fn readings(at_ms: UnixMs, jobs: Vec<Job>) -> Readings {
        Readings {
            at_ms,
            gpus: (0..8)
                .map(|i| GpuReading {
                    node: "n1".into(),
                    index: i,
                    power_watts: Some(100.0),
                    sm_active_ratio: Some(0.5),
                    ..GpuReading::default()
                })
                .collect(),
            nodes: vec![NodeReading {
                power_watts: Some(1000.0),
                ..NodeReading::silent("n1".into(), NodeState::Mixed)
            }],
            jobs,
            ..Readings::default()
        }
    }

    fn get<'a>(d: &'a [ReportDelta], kind: &str, key: &str) -> &'a ReportSums {
        &d.iter()
            .find(|x| x.kind == kind && x.key == key)
            .unwrap_or_else(|| panic!("no {kind} {key} in {d:?}"))
            .sums
    }

    #[test]
    fn a_shared_node_is_split_by_each_jobs_gpus_and_emitted_once_a_minute() {
        let inv = inv();
        let mut acc = Accumulator::new(0.05);
        let jobs = || vec![job(1, "a", 6), job(2, "b", 2)];
        assert!(acc.observe(&inv, &readings(0, jobs()), 0).is_empty());
        // Two 30 s ticks inside the first minute: nothing is emitted yet.
        assert!(acc
            .observe(&inv, &readings(30_000, jobs()), 30_000)
            .is_empty());
        assert!(acc
            .observe(&inv, &readings(59_000, jobs()), 29_000)
            .is_empty());
        // The next minute's first tick emits the first minute.
        let d = acc.observe(&inv, &readings(60_000, jobs()), 1_000);
        assert_eq!(get(&d, "cluster", "all").capacity_gs, 8.0 * 59.0);
        assert_eq!(get(&d, "account", "a").allocated_gs, 6.0 * 59.0);
        assert_eq!(get(&d, "account", "b").allocated_gs, 2.0 * 59.0);
        // BMC power (1 kW) wins over the GPUs' sum (800 W), split the same way.
        assert!((get(&d, "account", "a").energy_wh - 1000.0 * 59.0 / 3600.0 * 0.75).abs() < 1e-9);
        assert_eq!(get(&d, "rack", "r1").rack_share_s, 59.0);
        assert_eq!(get(&d, "domain", "leaf1").busy_gs, 8.0 * 59.0);
        assert!(d
            .iter()
            .all(|x| x.key != UNALLOCATED || x.sums.capacity_gs == 0.0));
        // What was emitted is gone; the second minute's tick waits for its flush.
        let rest = acc.flush();
        assert_eq!(get(&rest, "cluster", "all").capacity_gs, 8.0);
        assert!(acc.flush().is_empty());
    }

    #[test]
    fn a_hall_is_booked_what_its_racks_are() {
        let mut with_hall = (*inv()).clone();
        with_hall.racks[0].hall = "H1".into();
        let inv = Arc::new(with_hall);
        let mut acc = Accumulator::new(0.05);
        let jobs = || vec![job(1, "a", 6)];
        acc.observe(&inv, &readings(0, jobs()), 0);
        acc.observe(&inv, &readings(30_000, jobs()), 30_000);
        let d = acc.observe(&inv, &readings(60_000, jobs()), 30_000);
        assert_eq!(get(&d, "hall", "H1"), get(&d, "rack", "r1"));
        assert_eq!(get(&d, "hall", "H1").allocated_gs, 8.0 * 30.0);
    }

    #[test]
    fn work_lost_counts_from_the_later_of_checkpoint_and_run_start() {
        let inv = inv();
        let mut acc = Accumulator::new(0.05);
        let mut j = job(7, "a", 8);
        j.start_ms = Some(1_000_000);
        acc.observe(&inv, &readings(2_000_000, vec![j.clone()]), 0);
        // A checkpoint from before this run does not count: the run's start does.
        let lost = acc.job_lost(&j, 3_000_000, Some(500_000));
        assert_eq!(lost, 8.0 * 2000.0);
        let d = acc.flush();
        assert_eq!(get(&d, "account", "a").failure_lost_gs, 8.0 * 2000.0);
        assert_eq!(get(&d, "rack", "r1").failure_lost_gs, 8.0 * 2000.0);
        // The run is over: a second failure report of it loses nothing more.
        assert_eq!(acc.job_lost(&j, 3_100_000, None), 0.0);
        // A job never seen running loses nothing that could be counted.
        assert_eq!(acc.job_lost(&job(8, "a", 8), 3_000_000, None), 0.0);
        assert!(acc.flush().is_empty());
    }

    #[test]
    fn gpu_energy_is_the_counters_rise_and_estimated_where_a_counter_is_missing_or_reset() {
        let inv = inv();
        let mut acc = Accumulator::new(0.05);
        // Counters (joules since the driver loaded) that rise by 300 W x 20 s per tick,
        // while the power gauge reads 100 W: the counter is what counts.
        let at = |t: UnixMs, counter: &dyn Fn(u32) -> Option<f64>| {
            let mut r = readings(t, vec![job(1, "a", 8)]);
            for g in &mut r.gpus {
                g.energy_joules = counter(g.index);
            }
            r
        };
        let base = |i: u32| 1e9 + f64::from(i) * 1e6;
        acc.observe(&inv, &at(0, &|i| Some(base(i))), 0);
        acc.observe(&inv, &at(20_000, &|i| Some(base(i) + 6_000.0)), 20_000);
        // GPU 0's counter missing, GPU 1's reset (the driver reloaded), GPU 2's jumped
        // past what any GPU draws: each the tick's power, estimated.
        let third = |i: u32| match i {
            0 => None,
            1 => Some(5.0),
            2 => Some(base(2) + 6_000.0 + 1e9),
            _ => Some(base(i) + 12_000.0),
        };
        acc.observe(&inv, &at(40_000, &third), 20_000);
        let d = acc.flush();
        let c = get(&d, "cluster", "all");
        let exact = 8.0 * 6_000.0 + 5.0 * 6_000.0;
        let est = 3.0 * 100.0 * 20.0;
        assert!(
            (c.gpu_energy_wh - (exact + est) / 3600.0).abs() < 1e-9,
            "{c:?}"
        );
        assert!((c.gpu_energy_est_wh - est / 3600.0).abs() < 1e-9, "{c:?}");
        // The job holds the node: all of it is the job's.
        assert!((get(&d, "account", "a").gpu_energy_wh - c.gpu_energy_wh).abs() < 1e-9);
        // The node's energy is its BMC's; the rest over the GPUs' is the node's overhead.
        assert!((c.energy_wh - 1000.0 * 40.0 / 3600.0).abs() < 1e-9);
    }
}
