//! Aggregation: from one instant's readings to the numbers views show.
//!
//! Pure: knows nothing of where readings came from (simulator, scrape, PromQL), of HTTP
//! or of the database. Missing readings stay missing; they are never counted as zero.

use std::collections::HashMap;

use app::live::{GpuCounts, Overview, RackTile, Summary};
use app::model::{GpuReading, Inventory, Job, JobState, NodeState, RackReading, UnixMs};

/// Everything a source reports at one instant: the input of aggregation, whichever
/// source (simulator, scrape, PromQL) produced it.
#[derive(Clone, Debug)]
pub struct Readings {
    pub at_ms: UnixMs,
    /// Every GPU of the inventory; one whose node is not reporting has no values.
    pub gpus: Vec<GpuReading>,
    pub racks: Vec<RackReading>,
    /// Scheduler state per node.
    pub nodes: Vec<(String, NodeState)>,
    /// Each node's total power (BMC), in the order of `nodes`; `None` when not reported.
    pub node_power_watts: Vec<Option<f64>>,
    /// Pending and running jobs.
    pub jobs: Vec<Job>,
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
        r.nodes.iter().map(|(n, s)| (n.as_str(), *s)).collect();
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
    let node_rack: HashMap<&str, usize> = inv
        .nodes
        .iter()
        .filter_map(|n| rack_idx.get(n.rack.as_str()).map(|&i| (n.name.as_str(), i)))
        .collect();

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
            if let Some(&ri) = node_rack.get(n.name.as_str()) {
                unavailable[ri] += 1;
            }
        }
    }

    // Up in the scheduler, yet no fresh power reading: the rack's sum is incomplete.
    let mut not_reporting = vec![0u32; inv.racks.len()];
    for ((name, st), power) in r.nodes.iter().zip(&r.node_power_watts) {
        let down = matches!(st, NodeState::Down | NodeState::NotResponding);
        if power.is_none() && !down {
            if let Some(&ri) = node_rack.get(name.as_str()) {
                not_reporting[ri] += 1;
            }
        }
    }
    let mut throttling = vec![0u32; inv.racks.len()];
    let mut gpu_watts = vec![0.0f64; inv.racks.len()];
    let (mut sm_sum, mut sm_n) = (0.0, 0u32);
    for g in &r.gpus {
        let rack = node_rack.get(g.node.as_str()).copied();
        if let (Some(ri), Some(p)) = (rack, g.power_watts) {
            gpu_watts[ri] += p;
        }
        if g.throttle.is_some_and(|t| t.is_throttling()) {
            if let Some(ri) = rack {
                throttling[ri] += 1;
            }
        }
        if allocated_nodes.contains_key(g.node.as_str()) {
            if let Some(sm) = g.sm_active_ratio {
                sm_sum += sm;
                sm_n += 1;
            }
        }
    }
    let pdu: HashMap<&str, (Option<f64>, Option<f64>)> = r
        .racks
        .iter()
        .map(|x| (x.rack.as_str(), (x.pdu_power_watts, x.inlet_celsius)))
        .collect();
    let racks: Vec<RackTile> = inv
        .racks
        .iter()
        .enumerate()
        .map(|(i, rack)| {
            let (pdu_watts, inlet) = pdu.get(rack.name.as_str()).copied().unwrap_or((None, None));
            // The PDU sees everything in the rack; without it, GPU power is a lower bound.
            let power = pdu_watts.or((gpu_watts[i] > 0.0).then_some(gpu_watts[i]));
            RackTile {
                name: rack.name.clone(),
                row: rack.row.clone(),
                position: rack.position,
                power_watts: power,
                power_limit_watts: rack.power_limit_watts,
                inlet_celsius: inlet,
                cooling: rack.cooling,
                gpus_throttling: throttling[i],
                nodes_unavailable: unavailable[i],
                nodes_not_reporting: not_reporting[i],
            }
        })
        .collect();
    let summary = Summary {
        gpus,
        sm_active_mean: (sm_n > 0).then(|| sm_sum / f64::from(sm_n)),
        power_watts: racks.iter().filter_map(|r| r.power_watts).sum(),
        power_capacity_watts: inv.racks.iter().map(|r| r.power_limit_watts).sum(),
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
    };
    Overview {
        cluster: inv.cluster.clone(),
        seq,
        at_ms: r.at_ms,
        published_ms,
        interval_ms,
        summary,
        racks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Sim;

    const T0: i64 = 1_795_968_000_000; // 2026-11-29 16:00:00 UTC

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
            .position(|(n, _)| n == "gpu002")
            .expect("node");
        r.node_power_watts[i] = None;
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
        r.racks[0].pdu_power_watts = None;
        let ov = overview(sim.inventory(), &r, 1, 1000, T0);
        assert_eq!(ov.summary.sm_active_mean, None);
        // Without a PDU reading the rack falls back to the sum of its GPUs' power.
        let rack0 = &sim.inventory().racks[0].name;
        let in_rack0: Vec<&str> = sim
            .inventory()
            .nodes
            .iter()
            .filter(|n| &n.rack == rack0)
            .map(|n| n.name.as_str())
            .collect();
        let gpu_sum: f64 = r
            .gpus
            .iter()
            .filter(|g| in_rack0.contains(&g.node.as_str()))
            .filter_map(|g| g.power_watts)
            .sum();
        assert!((ov.racks[0].power_watts.unwrap_or(0.0) - gpu_sum).abs() < 1e-6);
    }
}
