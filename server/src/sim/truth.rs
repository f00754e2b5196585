//! The simulator's ground truth: what is so, from its own state, served at `/sim/truth`.

use serde::Serialize;

use app::live::GpuCounts;
use app::model::{Cooling, DomainKind, NodeState, UnixMs};

use super::model::{
    nvl72_misplaced, nvl72_physical, NVL72_SHELVES_REDUNDANT, NVL72_SUPPLY_WATTS,
    NVL72_SWITCH_TRAYS, NVL72_TRAYS,
};
use super::Sim;

/// One rack's truth.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TruthRack {
    pub name: String,
    pub power_watts: f64,
    pub power_limit_watts: f64,
    pub inlet_celsius: f64,
    pub gpus_throttling: u32,
    /// Liquid racks: the share of nominal coolant flow it gets, and its trays whose leak
    /// detector is not OK with their state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_factor: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub leaking: Vec<(String, app::model::LeakState)>,
    /// Running jobs with a node in the rack, by id.
    pub jobs: Vec<u64>,
    /// Rack-scale racks: its power shelves with no supply delivering, those delivering
    /// with a supply down or in warning, and what the working shelves deliver with the
    /// reserve held back (`power_limit_watts` is the lower of it and the bus bar's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shelves_down: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shelves_degraded: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shelf_limit_watts: Option<f64>,
    /// Rack-scale NVLink: its switch trays down, its GPU links not active, the compute
    /// trays (nodes, in inventory order) with a link not active, and the running jobs on
    /// them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nvlink_down: Vec<String>,
    #[serde(skip_serializing_if = "is_zero")]
    pub nvlink_links_down: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nvlink_cut: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nvlink_jobs: Vec<u64>,
}

fn is_zero(x: &u32) -> bool {
    *x == 0
}

/// Free segments as the simulator's own node states give them, per block topology (one
/// set of block sizes): per segment size, how many could start now.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TruthSegments {
    pub base: u32,
    pub idle_nodes: u32,
    pub largest_free_segment: u32,
    /// (size, segments that could start now).
    pub sizes: Vec<(u32, u32)>,
    /// Each block's idle nodes, in inventory order.
    pub blocks: Vec<(String, u32)>,
}

/// One switch domain's truth: GPUs of nodes running a job.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TruthDomain {
    pub name: String,
    pub gpus_allocated: u32,
}

/// A GPU's last XID, as its driver reported it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TruthXid {
    pub node: String,
    pub gpu: u32,
    pub xid: u32,
}

/// One running job's truth: its checkpoints and the work a failure now would lose.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TruthJob {
    pub id: u64,
    pub gpus: u32,
    pub start_ms: UnixMs,
    /// Checkpoints written (every run, saves in progress included).
    pub checkpoints: u32,
    /// The end of the newest finished save of this run, if any.
    pub last_good_ms: Option<UnixMs>,
    /// GPUs x time since the last good checkpoint of this run (or its start).
    pub work_at_risk_gpu_hours: f64,
}

/// What is so, from the simulator's own state: served at `/sim/truth`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimTruth {
    pub at_ms: UnixMs,
    pub gpus: GpuCounts,
    pub gpus_throttling: u32,
    pub power_watts: f64,
    pub power_capacity_watts: f64,
    pub jobs_running: u32,
    pub jobs_pending: u32,
    /// Pending jobs: the reason the simulator's scheduler holds each for, its estimate.
    pub pending: Vec<super::queue::TruthPending>,
    pub racks: Vec<TruthRack>,
    /// Nodes by scheduler state.
    pub nodes: Vec<(String, NodeState)>,
    /// Every multi-node switch domain (a spine counts its leaves' nodes).
    pub domains: Vec<TruthDomain>,
    /// Running jobs.
    pub jobs: Vec<TruthJob>,
    /// GPUs that have thrown an XID, with the last one.
    pub xids: Vec<TruthXid>,
    /// Every interruption since the start with its cause (the newest 20,000), shared
    /// between the ticks' truths.
    #[serde(serialize_with = "shared_list")]
    pub interruptions: std::sync::Arc<Vec<super::TruthInterruption>>,
    /// Nodes with a faulty GPU that takes down every job landing on them (lemons).
    pub lemons: Vec<String>,
    /// Stragglers and hangs going on now.
    pub slowdowns: Vec<super::TruthSlowdown>,
    /// Running jobs' GPUs left idle now.
    pub idle: Vec<super::idle::TruthIdle>,
    /// Badput ledgers as the simulator knows them (when it keeps them): the running jobs'
    /// so far and the newest finished ones'.
    pub ledgers: Vec<super::TruthLedger>,
    /// Free segments of each block topology, from node states (empty without blocks).
    pub segments: Vec<TruthSegments>,
    /// Trays the layout places where they do not sit (the NVL72 profile's two planted
    /// mistakes), in inventory order: what DCGM's identity fields must show up.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub misplaced: Vec<String>,
    /// NVSwitches reporting a fatal SXid now: (node, switch, SXid).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nvswitch_fatal: Vec<(String, u32, u32)>,
}

/// Finished jobs' ledgers in each truth.
const TRUTH_LEDGERS: usize = 200;

fn shared_list<S: serde::Serializer>(
    v: &std::sync::Arc<Vec<super::TruthInterruption>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(v.as_slice(), s)
}

pub(super) fn truth(sim: &Sim, readings: &super::Readings) -> SimTruth {
    let mut gpus = GpuCounts::default();
    for n in &sim.nodes {
        let k = sim.gpn as u32;
        gpus.total += k;
        match (n.job.is_some(), n.state) {
            (true, _) => gpus.allocated += k,
            (false, NodeState::Drained | NodeState::Draining) => gpus.drained += k,
            (false, s) if s.is_unavailable() => gpus.down += k,
            _ => gpus.idle += k,
        }
    }
    // Throttling from the model's own thresholds, per rack.
    let mut racks: Vec<TruthRack> = sim
        .inv
        .racks
        .iter()
        .zip(crate::aggregate::rack_nodes(&sim.inv, readings))
        .map(|(r, rr)| TruthRack {
            name: r.name.clone(),
            power_watts: rr.power_watts.unwrap_or(0.0),
            power_limit_watts: r.power_limit_watts,
            inlet_celsius: rr.inlet_celsius.unwrap_or(0.0),
            gpus_throttling: 0,
            flow_factor: None,
            leaking: Vec::new(),
            jobs: Vec::new(),
            shelves_down: Vec::new(),
            shelves_degraded: Vec::new(),
            shelf_limit_watts: None,
            nvlink_down: Vec::new(),
            nvlink_links_down: 0,
            nvlink_cut: Vec::new(),
            nvlink_jobs: Vec::new(),
        })
        .collect();
    // Power shelves from the simulator's own supplies: a shelf's capacity is its
    // delivering supplies' (state Enabled, health not Critical).
    for (ri, r) in racks.iter_mut().enumerate() {
        let supplies = sim.supplies(ri, 0.0, sim.t_ms);
        if supplies.is_empty() {
            continue;
        }
        let mut shelves: Vec<(String, usize, usize, usize)> = Vec::new();
        for s in &supplies {
            if shelves.last().is_none_or(|l| l.0 != s.shelf) {
                shelves.push((s.shelf.clone(), 0, 0, 0));
            }
            if let Some(l) = shelves.last_mut() {
                l.1 += 1;
                if s.state == 1 && s.health != Some(3) {
                    l.2 += 1;
                    l.3 += usize::from(s.health == Some(2));
                }
            }
        }
        let mut caps: Vec<f64> = Vec::new();
        for (name, all, working, warning) in shelves {
            if working == 0 {
                r.shelves_down.push(name);
            } else if working < all || warning > 0 {
                r.shelves_degraded.push(name);
            }
            caps.push(working as f64 * NVL72_SUPPLY_WATTS);
        }
        caps.sort_by(|a, b| b.total_cmp(a));
        let reserve: f64 = caps.iter().take(NVL72_SHELVES_REDUNDANT as usize).sum();
        let limit = caps.iter().sum::<f64>() - reserve;
        r.shelf_limit_watts = Some(limit);
        r.power_limit_watts = r.power_limit_watts.min(limit);
    }
    for j in sim
        .active
        .iter()
        .filter(|j| j.job.state == app::model::JobState::Running)
    {
        for &i in &j.node_idx {
            let rack = &mut racks[sim.nodes[i].rack].jobs;
            if !rack.contains(&j.job.id) {
                rack.push(j.job.id);
            }
        }
    }
    // NVLink: the trays cut are where the links are physically, whatever the layout says.
    let rack_count = sim.inv.racks.len();
    for (ri, r) in racks.iter_mut().enumerate() {
        let Some(links) = sim.rack_links(ri, sim.t_ms) else {
            continue;
        };
        r.nvlink_links_down = links.down.len() as u32;
        let per_switch = NVL72_TRAYS as u32 * sim.gpn as u32 * super::fabric::ASICS_PER_TRAY;
        for s in 1..=NVL72_SWITCH_TRAYS {
            let n = links
                .down
                .iter()
                .filter(|d| super::fabric::port_partner(d.port).0 == s)
                .count() as u32;
            if n == per_switch {
                r.nvlink_down.push(super::fabric::switch_tray_name(s));
            }
        }
        let mut trays: Vec<usize> = links.down.iter().map(|d| d.tray as usize).collect();
        trays.dedup();
        let mut cut: Vec<usize> = trays
            .iter()
            .filter_map(|&t| {
                (0..sim.inv.nodes.len()).find(|&i| nvl72_physical(i, rack_count) == (ri, t))
            })
            .collect();
        cut.sort_unstable();
        cut.dedup();
        r.nvlink_cut = cut.iter().map(|&i| sim.inv.nodes[i].name.clone()).collect();
        let mut jobs: Vec<u64> = sim
            .active
            .iter()
            .filter(|j| j.job.state == app::model::JobState::Running)
            .filter(|j| j.node_idx.iter().any(|i| cut.contains(i)))
            .map(|j| j.job.id)
            .collect();
        jobs.sort_unstable();
        r.nvlink_jobs = jobs;
    }
    for (ri, r) in racks.iter_mut().enumerate() {
        if sim.inv.racks[ri].cooling == Cooling::Liquid {
            r.flow_factor = Some(sim.flow_factor(ri, sim.t_ms));
        }
    }
    for (i, n) in sim.nodes.iter().enumerate() {
        if let Some(l) = sim.leak_state(i, sim.t_ms) {
            racks[n.rack]
                .leaking
                .push((sim.inv.nodes[i].name.clone(), l));
        }
    }
    let mut throttling = 0;
    for (i, n) in sim.nodes.iter().enumerate() {
        for g in readings.gpus.iter().skip(i * sim.gpn).take(sim.gpn) {
            if g.throttle.is_some_and(|t| t.is_throttling()) {
                throttling += 1;
                racks[n.rack].gpus_throttling += 1;
            }
        }
    }
    // Allocated GPUs per domain, from the jobs' own node lists.
    let busy: std::collections::HashSet<&str> = sim
        .active
        .iter()
        .filter(|j| j.job.state == app::model::JobState::Running)
        .flat_map(|j| j.node_idx.iter().map(|&i| sim.inv.nodes[i].name.as_str()))
        .collect();
    let tree = sim.inv.domain_tree();
    let domains = sim
        .inv
        .domains
        .iter()
        .filter(|d| d.nodes.len() > 1 || d.kind != app::model::DomainKind::Nvlink)
        .map(|d| {
            let members = tree.nodes(d);
            TruthDomain {
                name: d.name.clone(),
                gpus_allocated: members.iter().filter(|m| busy.contains(*m)).count() as u32
                    * sim.gpn as u32,
            }
        })
        .collect();
    let xids = sim
        .nodes
        .iter()
        .zip(&sim.inv.nodes)
        .flat_map(|(n, inv)| {
            (0..sim.gpn).filter_map(move |g| {
                n.xid_at(g, sim.t_ms).map(|xid| TruthXid {
                    node: inv.name.clone(),
                    gpu: g as u32,
                    xid,
                })
            })
        })
        .collect();
    let misplaced = if sim.profile == super::Profile::Nvl72 {
        nvl72_misplaced(sim.inv.racks.len())
            .into_iter()
            .filter_map(|i| sim.inv.nodes.get(i).map(|n| n.name.clone()))
            .collect()
    } else {
        Vec::new()
    };
    SimTruth {
        nvswitch_fatal: sim
            .switch_failed()
            .filter(|(i, _, _)| {
                !matches!(
                    sim.nodes[*i].state,
                    NodeState::Down | NodeState::NotResponding
                )
            })
            .map(|(i, sw, sxid)| (sim.inv.nodes[i].name.clone(), sw, sxid))
            .collect(),
        misplaced,
        segments: truth_segments(sim),
        xids,
        interruptions: std::sync::Arc::clone(&sim.interruptions),
        lemons: sim.lemons(),
        ledgers: sim.recent_ledgers(TRUTH_LEDGERS),
        slowdowns: sim
            .slowdowns()
            .iter()
            .filter(|s| s.from_ms <= sim.t_ms && sim.t_ms < s.to_ms)
            .cloned()
            .collect(),
        idle: sim.idle_truth(),
        domains,
        at_ms: sim.t_ms,
        gpus,
        gpus_throttling: throttling,
        power_watts: racks.iter().map(|r| r.power_watts).sum(),
        power_capacity_watts: sim.inv.racks.iter().map(|r| r.power_limit_watts).sum(),
        jobs_running: sim
            .active
            .iter()
            .filter(|j| j.job.state == app::model::JobState::Running)
            .count() as u32,
        jobs_pending: sim
            .active
            .iter()
            .filter(|j| j.job.state == app::model::JobState::Pending)
            .count() as u32,
        pending: sim.truth_pending(),
        racks,
        nodes: readings
            .nodes
            .iter()
            .map(|n| (n.name.clone(), n.state))
            .collect(),
        jobs: sim
            .active
            .iter()
            .filter(|j| j.job.state == app::model::JobState::Running)
            .filter_map(|j| {
                let start = j.job.start_ms?;
                let now = sim.t_ms;
                let last_good = [j.ckpt_until_ms, j.prev_ckpt_end_ms]
                    .into_iter()
                    .filter(|&t| t >= start && t <= now && t > 0)
                    .max();
                Some(TruthJob {
                    id: j.job.id,
                    gpus: j.job.gpus,
                    start_ms: start,
                    checkpoints: j.checkpoints,
                    last_good_ms: last_good,
                    work_at_risk_gpu_hours: f64::from(j.job.gpus)
                        * (now - last_good.unwrap_or(start)).max(0) as f64
                        / 3_600_000.0,
                })
            })
            .collect(),
    }
}

/// Free segments from the simulator's own node states: per block set, each block's idle
/// nodes (idle in state, no job) divided by each size from 1 up to the base.
fn truth_segments(sim: &Sim) -> Vec<TruthSegments> {
    let ix: std::collections::HashMap<&str, usize> = sim
        .inv
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let idle_of = |name: &str| {
        ix.get(name)
            .is_some_and(|&i| sim.nodes[i].state == NodeState::Idle && sim.nodes[i].job.is_none())
    };
    // Per set of block sizes: each block's name and idle nodes.
    type Set = (Vec<u32>, Vec<(String, u32)>);
    let mut sets: Vec<Set> = Vec::new();
    for d in sim
        .inv
        .domains
        .iter()
        .filter(|d| d.kind == DomainKind::Block && !d.block_sizes.is_empty())
    {
        let idle = d.nodes.iter().filter(|n| idle_of(n)).count() as u32;
        let entry = (d.name.clone(), idle);
        match sets.iter_mut().find(|(s, _)| *s == d.block_sizes) {
            Some((_, v)) => v.push(entry),
            None => sets.push((d.block_sizes.clone(), vec![entry])),
        }
    }
    sets.into_iter()
        .map(|(sizes, blocks)| {
            let base = sizes[0];
            let idle: Vec<u32> = blocks.iter().map(|b| b.1).collect();
            TruthSegments {
                base,
                idle_nodes: idle.iter().sum(),
                largest_free_segment: idle.iter().map(|&i| i.min(base)).max().unwrap_or(0),
                sizes: (1..=base)
                    .map(|s| (s, idle.iter().map(|&i| i / s).sum()))
                    .collect(),
                blocks,
            }
        })
        .collect()
}
