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
mod placement;
mod shelves;
mod steady;
#[cfg(test)]
mod tests;

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
    let mut unavailable = vec![0u32; inv.racks.len()];
    for n in &inv.nodes {
        let k = n.gpus.len() as u32;
        let st = state_of
            .get(n.name.as_str())
            .copied()
            .unwrap_or(NodeState::Unknown);
        gpus.total += k;
        if allocated_nodes.contains_key(n.name.as_str()) {
            gpus.allocated += k;
        } else if matches!(st, NodeState::Drained | NodeState::Draining) {
            gpus.drained += k;
        } else if st.is_unavailable() || st == NodeState::Unknown {
            gpus.down += k;
        } else {
            gpus.idle += k;
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
    };
    let mut ov = Overview {
        cluster: inv.cluster.clone(),
        seq,
        at_ms: r.at_ms,
        published_ms,
        interval_ms,
        summary,
        racks,
        ..Overview::default()
    };
    floor(inv, r, &ix, &state_of, &mut ov);
    ov
}
