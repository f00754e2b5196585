//! Aggregation: from one instant's readings to the numbers views show.
//!
//! Pure: knows nothing of where readings came from (simulator, scrape, PromQL), of HTTP
//! or of the database. Missing readings stay missing; they are never counted as zero.

use std::collections::HashMap;

use app::live::{
    DomainTile, FragmentedJob, GpuCounts, JobThrottle, NodeTile, Overview, RackTile, ReasonCount,
    Summary, Thermal,
};
use app::model::{
    DomainKind, GpuReading, Inventory, Job, JobState, NodeState, ThrottleReasons, UnixMs,
};

use crate::telemetry::Readings;

/// The SM clock a throttled GPU is measured against (H100 SXM boost). DCGM does not
/// export the boost clock by default, so the deficit is an estimate against this.
pub const REFERENCE_BOOST_MHZ: f64 = 1980.0;

/// The reasons the thermal view counts, in the order it shows them.
/// The throttle reasons counted separately, with their names (rollup columns `thr_{name}_s`).
pub const REASONS: [(u64, &str); 5] = [
    (ThrottleReasons::HW_THERMAL, "hw_thermal"),
    (ThrottleReasons::SW_THERMAL, "sw_thermal"),
    (ThrottleReasons::SW_POWER_CAP, "sw_power_cap"),
    (ThrottleReasons::HW_SLOWDOWN, "hw_slowdown"),
    (ThrottleReasons::HW_POWER_BRAKE, "hw_power_brake"),
];

/// Two significant digits (and at least 1 GB/s steps): display precision, so a noisy sum
/// does not send a delta every tick.
fn round_sig2(x: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return 0.0;
    }
    let step = 10f64.powi(x.log10().floor() as i32 - 1).max(1e9);
    round_to(x, step)
}

fn round_to(x: f64, step: f64) -> f64 {
    (x / step).round() * step
}

/// The hang rule's signal, shared by the radar (its alert) and the badput ledger (its
/// hung time): pure.
pub mod hang {
    use app::model::{GpuReading, UnixMs};

    /// How long the signal must hold for a hang (`[alerts] hang_minutes` by default).
    pub const DEFAULT_HANG_MS: i64 = 10 * 60_000;

    /// "Busy" for the hang rule: every GPU's utilisation at least this, in percent.
    pub const HANG_UTIL_PERCENT: f64 = 90.0;
    /// "No traffic": every node of the job under this, in bytes per second (management and
    /// storage chatter stay under it; an all-reduce moves gigabytes a second).
    pub const HANG_IB_BYTES_PER_SECOND: f64 = 10e6;
    /// "Flat": the job's mean GPU power stays within this share of its highest since the hold
    /// began.
    pub const HANG_POWER_BAND: f64 = 0.05;

    /// Where a hang's hold began, and the lowest and highest mean power seen since.
    #[derive(Clone, Copy, Debug)]
    pub struct HangHold {
        pub since: UnixMs,
        low: f64,
        high: f64,
    }

    impl HangHold {
        pub fn new(now: UnixMs, mean: f64) -> HangHold {
            HangHold {
                since: now,
                low: mean,
                high: mean,
            }
        }

        /// Adds a reading of the job's mean GPU power; a swing past the band starts over.
        pub fn observe(&mut self, now: UnixMs, mean: f64) {
            self.low = self.low.min(mean);
            self.high = self.high.max(mean);
            if self.high - self.low > HANG_POWER_BAND * self.high {
                *self = HangHold::new(now, mean);
            }
        }
    }

    /// A job's GPUs look hung at this instant: every one busy (utilisation), each of its
    /// nodes' InfiniBand quiet (`quiet`), every GPU's power read. Their mean power, then.
    pub fn hang_signal(gpus: &[&GpuReading], quiet: bool) -> Option<f64> {
        let busy = gpus
            .iter()
            .all(|g| g.gpu_util_percent.is_some_and(|u| u >= HANG_UTIL_PERCENT));
        let powers: Vec<f64> = gpus.iter().filter_map(|g| g.power_watts).collect();
        if !(busy && quiet) || gpus.len() < 2 || powers.len() != gpus.len() {
            return None;
        }
        Some(powers.iter().sum::<f64>() / powers.len() as f64)
    }

    /// A node's InfiniBand traffic counts as none.
    pub fn ib_quiet(bytes_per_second: Option<f64>) -> bool {
        bytes_per_second.is_some_and(|b| b < HANG_IB_BYTES_PER_SECOND)
    }
}

/// A throttled GPU's clock deficit against the reference boost clock, 0.0 to 1.0.
pub fn clock_deficit(g: &GpuReading) -> Option<f64> {
    if !g.throttle.is_some_and(|t| t.is_throttling()) {
        return None;
    }
    g.sm_clock_mhz
        .map(|c| (1.0 - c / REFERENCE_BOOST_MHZ).clamp(0.0, 1.0))
}

mod coolant;
mod fabric;
mod floor;
pub(crate) mod halls;
pub mod idle;
mod placement;
mod shelves;
mod steady;

use coolant::coolant_tiles;
pub use fabric::fabric_tiles;
use floor::floor;
use placement::placement_tiles;
pub use shelves::shelves_tile;
pub use steady::steady;

/// What a rack's nodes' BMCs say of it together.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RackNodes {
    /// Its nodes' power summed (GPUs and hosts; not a PDU's measurement); `None` when none
    /// of them reports.
    pub power_watts: Option<f64>,
    /// The warmest of its nodes' inlets.
    pub inlet_celsius: Option<f64>,
    /// Its nodes up in the scheduler yet with no fresh power reading: the sum is
    /// incomplete.
    pub not_reporting: u32,
}

/// Each rack of `inv` (by index) as its nodes' BMCs report it in `r`: the one place a
/// rack's power is summed from its nodes.
pub fn rack_nodes(inv: &Inventory, r: &Readings) -> Vec<RackNodes> {
    let rack_idx: HashMap<&str, usize> = inv
        .racks
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.as_str(), i))
        .collect();
    let node_rack: HashMap<&str, usize> = inv
        .nodes
        .iter()
        .filter_map(|n| Some((n.name.as_str(), *rack_idx.get(n.rack.as_str())?)))
        .collect();
    rack_nodes_by(inv.racks.len(), r, |n| node_rack.get(n).copied())
}

fn rack_nodes_by(
    racks: usize,
    r: &Readings,
    node_rack: impl Fn(&str) -> Option<usize>,
) -> Vec<RackNodes> {
    let mut out = vec![RackNodes::default(); racks];
    for n in &r.nodes {
        let Some(ri) = node_rack(&n.name) else {
            continue;
        };
        let rack = &mut out[ri];
        match n.power_watts {
            Some(p) => *rack.power_watts.get_or_insert(0.0) += p,
            None if !matches!(n.state, NodeState::Down | NodeState::NotResponding) => {
                rack.not_reporting += 1;
            }
            None => {}
        }
        if let Some(t) = n.inlet_celsius {
            rack.inlet_celsius = Some(rack.inlet_celsius.map_or(t, |x: f64| x.max(t)));
        }
    }
    out
}

/// The overview of `inv` from `r`, numbered `seq`.
pub fn overview(
    inv: &Inventory,
    r: &Readings,
    seq: u64,
    interval_ms: i64,
    published_ms: UnixMs,
) -> Overview {
    let state_of: HashMap<&str, NodeState> =
        r.nodes.iter().map(|n| (n.name.as_str(), n.state)).collect();
    let mut allocated_nodes: HashMap<&str, ()> = HashMap::new();
    for j in r.jobs.iter().filter(|j| j.state == JobState::Running) {
        for n in &j.nodes {
            allocated_nodes.insert(n.as_str(), ());
        }
    }
    let rack_idx: HashMap<&str, usize> = inv
        .racks
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.as_str(), i))
        .collect();
    // Everything per node is kept by the node's index in the inventory: names are looked
    // up once per node (or per run of a node's GPUs), never once per GPU or per domain.
    let ix: HashMap<&str, usize> = inv
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let rack_of: Vec<Option<usize>> = inv
        .nodes
        .iter()
        .map(|n| rack_idx.get(n.rack.as_str()).copied())
        .collect();
    let node_rack = |name: &str| ix.get(name).and_then(|&i| rack_of[i]);

    let mut gpus = GpuCounts::default();
    let mut per_rack = vec![halls::RackSums::default(); inv.racks.len()];
    let mut unavailable = vec![0u32; inv.racks.len()];
    for n in &inv.nodes {
        let k = n.gpus.len() as u32;
        let st = state_of
            .get(n.name.as_str())
            .copied()
            .unwrap_or(NodeState::Unknown);
        let mut one = GpuCounts::default();
        for c in [&mut gpus, &mut one] {
            c.total += k;
            if allocated_nodes.contains_key(n.name.as_str()) {
                c.allocated += k;
            } else if matches!(st, NodeState::Drained | NodeState::Draining) {
                c.drained += k;
            } else if st.is_unavailable() || st == NodeState::Unknown {
                c.down += k;
            } else {
                c.idle += k;
            }
        }
        if let Some(ri) = node_rack(&n.name) {
            per_rack[ri].gpus.add(one);
            per_rack[ri].nodes += 1;
        }
        if st.is_unavailable() {
            if let Some(ri) = node_rack(&n.name) {
                unavailable[ri] += 1;
            }
        }
    }

    let measured = rack_nodes_by(inv.racks.len(), r, node_rack);
    let mut throttling = vec![0u32; inv.racks.len()];
    let mut gpu_watts = vec![0.0f64; inv.racks.len()];
    let (mut sm_sum, mut sm_n) = (0.0, 0u32);
    // Readings come grouped by node: look each node up once, not once per GPU.
    for gs in r.gpus.chunk_by(|a, b| a.node == b.node) {
        let node = gs[0].node.as_str();
        let rack = node_rack(node);
        let allocated = allocated_nodes.contains_key(node);
        for g in gs {
            if let (Some(ri), Some(p)) = (rack, g.power_watts) {
                gpu_watts[ri] += p;
            }
            if g.throttle.is_some_and(|t| t.is_throttling()) {
                if let Some(ri) = rack {
                    throttling[ri] += 1;
                }
            }
            if allocated {
                if let Some(sm) = g.sm_active_ratio {
                    sm_sum += sm;
                    sm_n += 1;
                    if let Some(ri) = rack {
                        per_rack[ri].sm_sum += sm;
                        per_rack[ri].sm_n += 1;
                    }
                }
            }
        }
    }
    let shelf_readings: HashMap<&str, &[app::model::ShelfReading]> = r
        .racks
        .iter()
        .filter(|x| !x.shelves.is_empty())
        .map(|x| (x.rack.as_str(), x.shelves.as_slice()))
        .collect();
    let mut coolant = coolant_tiles(inv, r, &ix, &rack_of);
    let mut placement = placement_tiles(inv, r, &rack_idx, &rack_of);
    let mut fabric = fabric_tiles(inv, r);
    let racks: Vec<RackTile> = inv
        .racks
        .iter()
        .enumerate()
        .map(|(i, rack)| {
            let RackNodes {
                power_watts: nodes_watts,
                inlet_celsius: inlet,
                not_reporting,
            } = measured[i];
            // The nodes' BMCs see GPUs and hosts; without them, GPU power is a lower bound.
            let power = nodes_watts.or((gpu_watts[i] > 0.0).then_some(gpu_watts[i]));
            let shelves = shelves_tile(
                rack,
                shelf_readings
                    .get(rack.name.as_str())
                    .copied()
                    .unwrap_or(&[]),
            );
            let limit = match shelves.as_ref().and_then(|s| s.limit_watts) {
                Some(l) => l.min(rack.power_limit_watts),
                None => rack.power_limit_watts,
            };
            RackTile {
                name: rack.name.clone(),
                row: rack.row.clone(),
                hall: rack.hall.clone(),
                position: rack.position,
                power_watts: power,
                power_limit_watts: limit,
                inlet_celsius: inlet,
                cooling: rack.cooling,
                gpus_throttling: throttling[i],
                nodes_unavailable: unavailable[i],
                nodes_not_reporting: not_reporting,
                gpu_temp_max_celsius: None,
                inlet_limit_celsius: rack.inlet_limit_celsius,
                jobs: Vec::new(),
                coolant: coolant[i].take(),
                placement: placement[i].take(),
                shelves,
                fabric: fabric[i].take(),
                incident: None,
            }
        })
        .collect();
    let summary = Summary {
        gpus,
        sm_active_mean: (sm_n > 0).then(|| sm_sum / f64::from(sm_n)),
        power_watts: racks.iter().filter_map(|r| r.power_watts).sum(),
        power_capacity_watts: racks.iter().map(|r| r.power_limit_watts).sum(),
        gpus_throttling: throttling.iter().sum(),
        jobs_running: r
            .jobs
            .iter()
            .filter(|j| j.state == JobState::Running)
            .count() as u32,
        jobs_pending: r
            .jobs
            .iter()
            .filter(|j| j.state == JobState::Pending)
            .count() as u32,
        alerts_firing: 0,
        alerts_critical: 0,
    };
    let mut ov = Overview {
        cluster: inv.cluster.clone(),
        seq,
        at_ms: r.at_ms,
        published_ms,
        interval_ms,
        summary,
        halls: halls::halls(inv, &racks, &per_rack),
        racks,
        ..Overview::default()
    };
    floor(inv, r, &ix, &state_of, &mut ov);
    ov
}

// Inline, not in a file of their own: they check aggregation against the simulator's
// truth, and `sim` imports `aggregate` (a tests.rs would read as an import cycle).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Sim;

    const T0: i64 = 1_795_968_000_000; // 2026-11-29 16:00:00 UTC

    #[test]
    fn jobs_over_more_leaves_or_blocks_than_they_need_are_fragmented() {
        let sim = Sim::new(64, 42, "t", T0);
        let mut r = sim.readings();
        let job = |id: u64, nodes: &[u32]| app::model::Job {
            id,
            name: format!("job{id}"),
            user: "u".into(),
            account: "a".into(),
            partition: "p".into(),
            state: JobState::Running,
            nodes: nodes.iter().map(|n| format!("gpu{n:03}")).collect(),
            gpus: 8 * nodes.len() as u32,
            submit_ms: T0,
            start_ms: Some(T0),
            end_ms: None,
        };
        // Eight nodes over leaves 1, 2 and 3 and blocks 1 and 2 (one leaf and one block
        // would do); eight nodes filling leaf 2 exactly.
        r.jobs = vec![
            job(1, &[1, 2, 3, 4, 5, 6, 9, 17]),
            job(2, &[9, 10, 11, 12, 13, 14, 15, 16]),
        ];
        let ov = overview(sim.inventory(), &r, 1, 1000, T0);
        let got: Vec<(u64, DomainKind, u32, u32)> = ov
            .fragmented
            .iter()
            .map(|f| (f.id, f.kind, f.used, f.min))
            .collect();
        assert_eq!(
            got,
            vec![(1, DomainKind::Leaf, 3, 1), (1, DomainKind::Block, 2, 1)]
        );
    }

    #[test]
    fn trays_cut_without_a_node_follow_the_nodes_in_tray_order() {
        use app::model::{NvlinkFabric, NvlinkPortDown, SwitchTrayLinks};
        let sim = Sim::new(64, 42, "t", T0);
        let mut inv = sim.inventory().clone();
        inv.racks[0].switch_trays = Some(9);
        let rack = inv.racks[0].name.clone();
        let mut in_rack: Vec<&app::model::Node> =
            inv.nodes.iter().filter(|n| n.rack == rack).collect();
        in_rack.sort_by_key(|n| n.u_position);
        let nodes: Vec<String> = in_rack.iter().map(|n| n.name.clone()).collect();
        let n = nodes.len() as u32;
        // Trays past the layout's nodes, given out of order, and the first node's.
        let down = |t: u32| NvlinkPortDown {
            tray_index: Some(t),
            device: Some(0),
            port_label: "GPUP0".into(),
            state: "DOWN".into(),
            ..NvlinkPortDown::default()
        };
        let mut r = sim.readings();
        r.racks.push(crate::telemetry::RackReadings {
            rack: rack.clone(),
            ..Default::default()
        });
        r.racks[0].fabric = Some(NvlinkFabric {
            switch_trays: vec![SwitchTrayLinks {
                tray: "sw01".into(),
                links: 144,
                active: 140,
                not_active: vec![down(n + 10), down(n), down(0), down(n + 2)],
                ..SwitchTrayLinks::default()
            }],
            ..NvlinkFabric::default()
        });
        let tiles = fabric_tiles(&inv, &r);
        let cut = &tiles[0].as_ref().expect("a tile").cut;
        assert_eq!(
            cut,
            &[
                nodes[0].clone(),
                format!("tray {n}"),
                format!("tray {}", n + 2),
                format!("tray {}", n + 10),
            ]
        );
    }

    #[test]
    fn a_domains_infiniband_traffic_is_its_nodes_summed() {
        let sim = Sim::new(64, 42, "t", T0);
        let r = sim.readings();
        let ov = overview(sim.inventory(), &r, 1, 1000, T0);
        let rate: HashMap<&str, Option<f64>> = r
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.ib_bytes_per_second))
            .collect();
        let mut busy = 0;
        for d in sim
            .inventory()
            .domains
            .iter()
            .filter(|d| d.kind == DomainKind::Leaf)
        {
            let sum: f64 = d.nodes.iter().filter_map(|n| rate[n.as_str()]).sum();
            let tile = ov.domains.iter().find(|t| t.name == d.name).expect("tile");
            assert_eq!(
                tile.ib_bytes_per_second,
                Some(round_sig2(sum)),
                "{}",
                d.name
            );
            if sum > 1e9 {
                busy += 1;
            }
        }
        assert!(busy > 0);
        // Without node_exporter: nothing, not zero.
        let mut none = r.clone();
        for n in &mut none.nodes {
            n.ib_bytes_per_second = None;
        }
        let ov = overview(sim.inventory(), &none, 1, 1000, T0);
        assert!(ov.domains.iter().all(|d| d.ib_bytes_per_second.is_none()));
    }

    #[test]
    fn overview_equals_the_simulators_truth() {
        let sim = Sim::new(64, 42, "t", T0);
        let ov = overview(sim.inventory(), &sim.readings(), 1, 1000, T0);
        let truth = sim.truth();
        assert_eq!(ov.summary.gpus, truth.gpus);
        assert_eq!(ov.summary.gpus_throttling, truth.gpus_throttling);
        assert_eq!(ov.summary.jobs_running, truth.jobs_running);
        assert_eq!(ov.summary.jobs_pending, truth.jobs_pending);
        assert!((ov.summary.power_watts - truth.power_watts).abs() < 1e-6);
        for (tile, tr) in ov.racks.iter().zip(&truth.racks) {
            assert_eq!(tile.name, tr.name);
            assert!((tile.power_watts.unwrap_or(-1.0) - tr.power_watts).abs() < 1e-6);
            assert_eq!(tile.gpus_throttling, tr.gpus_throttling);
        }
        let g = ov.summary.gpus;
        assert_eq!(g.allocated + g.idle + g.drained + g.down, g.total);
    }

    #[test]
    fn domains_nodes_and_throttling_equal_the_truth() {
        // Warm hours: the weak rack throttles.
        let sim = Sim::new(64, 42, "t", T0 - 2 * 3_600_000 + 3_600_000 * 24);
        let r = sim.readings();
        let ov = overview(sim.inventory(), &r, 1, 1000, T0);
        let truth = sim.truth();
        assert_eq!(ov.domains.len(), truth.domains.len());
        for (d, t) in ov.domains.iter().zip(&truth.domains) {
            assert_eq!(
                (d.name.as_str(), d.gpus.allocated),
                (t.name.as_str(), t.gpus_allocated)
            );
        }
        let spine = ov
            .domains
            .iter()
            .find(|d| d.name == "spine01")
            .expect("spine");
        assert_eq!(spine.nodes, 32);
        // NVLink traffic of a leaf: its GPUs' readings summed, to 1 GB/s.
        let leaf = &sim
            .inventory()
            .domains
            .iter()
            .find(|d| d.name == "leaf01")
            .expect("leaf");
        let want: f64 = r
            .gpus
            .iter()
            .filter(|g| leaf.nodes.contains(&g.node))
            .filter_map(|g| g.nvlink_bytes_per_second)
            .sum();
        let tile = ov
            .domains
            .iter()
            .find(|d| d.name == "leaf01")
            .expect("leaf tile");
        assert_eq!(tile.nvlink_bytes_per_second, Some(round_sig2(want)));
        assert_eq!(round_sig2(6_437e9), 6_400e9);
        assert_eq!(round_sig2(0.4e9), 0.0);
        assert_eq!(round_sig2(0.0), 0.0);
        assert!(want > 0.0, "the simulator's busy GPUs use NVLink");
        assert_eq!(ov.nodes.len(), 64);
        let per_node: u32 = ov.nodes.iter().map(|n| n.gpus_throttling).sum();
        assert_eq!(per_node, truth.gpus_throttling);
        let by_job: u32 = ov.thermal.by_job.iter().map(|j| j.gpus_throttling).sum();
        assert!(by_job <= truth.gpus_throttling);
        // Every reason count is at most the throttled total, and some reason explains each.
        assert!(ov
            .thermal
            .by_reason
            .iter()
            .all(|c| c.gpus <= truth.gpus_throttling));
        if truth.gpus_throttling > 0 {
            assert!(ov.thermal.by_reason.iter().any(|c| c.gpus > 0));
        }
        // Node power is the BMC's, to the floor's display precision (0.1 kW).
        let p = ov.nodes[0].power_watts.expect("power");
        assert_eq!(p % 100.0, 0.0);
    }

    #[test]
    fn hysteresis_holds_noise_and_passes_changes() {
        let sim = Sim::new(16, 42, "t", T0);
        let r = sim.readings();
        let prev = overview(sim.inventory(), &r, 1, 1000, T0);
        let mut next = prev.clone();
        next.nodes[0].power_watts = next.nodes[0].power_watts.map(|p| p + 100.0);
        next.nodes[1].power_watts = next.nodes[1].power_watts.map(|p| p + 300.0);
        next.racks[0].power_watts = next.racks[0].power_watts.map(|p| p + 150.0);
        // A whole-degree inlet sensor flipping to its neighbour, and one that really moved.
        next.racks[0].inlet_celsius = next.racks[0].inlet_celsius.map(|t| t + 1.0);
        next.racks[1].inlet_celsius = next.racks[1].inlet_celsius.map(|t| t + 2.0);
        steady(&prev, &mut next);
        assert_eq!(next.racks[0].inlet_celsius, prev.racks[0].inlet_celsius);
        assert_eq!(
            next.racks[1].inlet_celsius,
            prev.racks[1].inlet_celsius.map(|t| t + 2.0)
        );
        assert_eq!(
            next.nodes[0].power_watts, prev.nodes[0].power_watts,
            "one step of noise held"
        );
        assert_eq!(
            next.nodes[1].power_watts,
            prev.nodes[1].power_watts.map(|p| p + 300.0)
        );
        assert_eq!(next.racks[0].power_watts, prev.racks[0].power_watts);
        assert_eq!(prev.diff(&next).nodes.len(), 1);
        assert_eq!(prev.diff(&next).racks.len(), 1, "only the rack that moved");
    }

    #[test]
    fn a_rack_with_a_silent_node_says_its_power_is_incomplete() {
        let sim = Sim::new(64, 42, "t", T0);
        let mut r = sim.readings();
        let ov = overview(sim.inventory(), &r, 1, 1000, T0);
        assert!(
            ov.racks.iter().all(|t| t.nodes_not_reporting == 0),
            "the down node is not 'not reporting'"
        );
        let i = r
            .nodes
            .iter()
            .position(|n| n.name == "gpu002")
            .expect("node");
        r.nodes[i].power_watts = None;
        let ov = overview(sim.inventory(), &r, 1, 1000, T0);
        assert_eq!(ov.racks[0].nodes_not_reporting, 1);
        assert_eq!(ov.racks[1].nodes_not_reporting, 0);
    }

    #[test]
    fn missing_readings_stay_missing() {
        let sim = Sim::new(16, 1, "t", T0);
        let mut r = sim.readings();
        for g in &mut r.gpus {
            g.sm_active_ratio = None;
        }
        let rack0 = &sim.inventory().racks[0].name;
        let in_rack0: Vec<&str> = sim
            .inventory()
            .nodes
            .iter()
            .filter(|n| &n.rack == rack0)
            .map(|n| n.name.as_str())
            .collect();
        for n in r
            .nodes
            .iter_mut()
            .filter(|n| in_rack0.contains(&n.name.as_str()))
        {
            n.power_watts = None;
        }
        let ov = overview(sim.inventory(), &r, 1, 1000, T0);
        assert_eq!(ov.summary.sm_active_mean, None);
        // Without its nodes' BMC readings the rack falls back to the sum of its GPUs' power.
        let gpu_sum: f64 = r
            .gpus
            .iter()
            .filter(|g| in_rack0.contains(&g.node.as_str()))
            .filter_map(|g| g.power_watts)
            .sum();
        assert!((ov.racks[0].power_watts.unwrap_or(0.0) - gpu_sum).abs() < 1e-6);
    }

    fn shelf(name: &str, working: u32, warning: u32, cap: Option<f64>) -> app::model::ShelfReading {
        app::model::ShelfReading {
            shelf: name.into(),
            supplies: 6,
            working,
            warning,
            capacity_watts: cap,
            output_watts: None,
        }
    }

    #[test]
    fn a_shelf_down_lowers_the_limit_by_the_reserve_rule() {
        let mut rack = crate::sim::layout_nvl72(18, "t").racks.remove(0);
        assert_eq!(
            (rack.power_shelves, rack.power_shelves_redundant),
            (Some(8), 4)
        );
        let full = |n: usize| (0..n).map(|i| shelf(&format!("S{i}"), 6, 0, Some(33_000.0)));
        // All eight: 8 x 33 kW less the four largest held back = the bus bar's 132 kW.
        let all: Vec<_> = full(8).collect();
        let t = shelves_tile(&rack, &all).expect("tile");
        assert_eq!((t.expected, t.reporting, t.missing), (8, 8, 0));
        assert_eq!(t.limit_watts, Some(132_000.0));
        assert!(!t.in_trouble() && !t.lowers_limit());
        // One down and one degraded (5 of 6 supplies): the reserve holds back the four
        // largest, so 6 x 33 + 27.5 - 4 x 33 kW.
        let mut some: Vec<_> = full(6).collect();
        some.push(shelf("S6", 0, 0, Some(0.0)));
        some.push(shelf("S7", 5, 1, Some(27_500.0)));
        let t = shelves_tile(&rack, &some).expect("tile");
        assert_eq!(t.down, ["S6"]);
        assert_eq!(t.degraded, ["S7"]);
        assert_eq!(
            t.limit_watts,
            Some(6.0 * 33_000.0 + 27_500.0 - 4.0 * 33_000.0)
        );
        assert!(t.lowers_limit() && t.in_trouble());
        // A shelf missing from a fresh reading delivers nothing.
        let seven: Vec<_> = full(7).collect();
        let t = shelves_tile(&rack, &seven).expect("tile");
        assert_eq!((t.missing, t.lost()), (1, 1));
        assert_eq!(t.limit_watts, Some(99_000.0));
        // A supply that does not give its capacity: the limit is unknown, the bus bar's stands.
        let mut unknown: Vec<_> = full(7).collect();
        unknown.push(shelf("S7", 6, 0, None));
        assert_eq!(
            shelves_tile(&rack, &unknown).expect("tile").limit_watts,
            None
        );
        // Not reporting: a tile saying so, and no limit of its own.
        let t = shelves_tile(&rack, &[]).expect("tile");
        assert!(!t.reporting() && t.in_trouble());
        assert_eq!(t.limit_watts, None);
        // A rack without shelves has no tile; without a reserve the limit is the sum.
        rack.power_shelves = None;
        assert_eq!(shelves_tile(&rack, &[]), None);
        rack.power_shelves = Some(2);
        rack.power_shelves_redundant = 0;
        let two: Vec<_> = full(2).collect();
        assert_eq!(
            shelves_tile(&rack, &two).expect("tile").limit_watts,
            Some(66_000.0)
        );
    }

    #[test]
    fn the_racks_limit_is_the_lower_of_bus_bar_and_shelves_and_the_sim_truth_agrees() {
        let mut sim = crate::sim::Sim::with_profile(crate::sim::Profile::Nvl72, 144, 42, "t", T0);
        sim.advance_to(T0 + 9 * 60_000);
        let r = sim.readings();
        let truth = sim.truth_with(&r);
        let ov = overview(sim.inventory(), &r, 1, 1000, T0);
        let mut down = 0;
        for (tile, t) in ov.racks.iter().zip(&truth.racks) {
            let sh = tile.shelves.as_ref().expect("every NVL72 rack has shelves");
            assert_eq!(tile.power_limit_watts, t.power_limit_watts, "{}", tile.name);
            assert_eq!(sh.limit_watts, t.shelf_limit_watts, "{}", tile.name);
            assert_eq!(sh.down, t.shelves_down, "{}", tile.name);
            assert_eq!(sh.degraded, t.shelves_degraded, "{}", tile.name);
            down += sh.down.len();
        }
        assert_eq!(down, 1, "the scenario's one shelf down");
        assert_eq!(
            ov.racks[3].shelves.as_ref().map(|s| s.down.clone()),
            Some(vec!["PowerShelf_2".to_string()])
        );
        assert_eq!(ov.racks[3].power_limit_watts, 99_000.0);
        // A02's degraded shelf delivers 5 of 6 supplies: 7 x 33 + 27.5 - 4 x 33 kW.
        assert_eq!(ov.racks[1].power_limit_watts, 126_500.0);
        assert_eq!(
            ov.summary.power_capacity_watts,
            ov.racks.iter().map(|r| r.power_limit_watts).sum::<f64>()
        );
    }
}
