//! `Readings`: everything a source reports at one instant, the one thing telemetry hands
//! on. The simulator, the scrape source and PromQL each fill it; aggregation, the
//! pipeline, the hot window, rollups and alerts read it, and none of them knows which
//! source filled it.
//!
//! A source reports what its producers measure, one record per producer's subject: every
//! GPU (DCGM), every node (the scheduler's state, its BMC, node_exporter, DCGM's platform
//! identity and NVSwitches) and every rack that has a rack-level producer (power shelves,
//! NMX-T). Nothing in it is summed over nodes or racks: a rack's power from its nodes'
//! BMCs, its inlet, its GPUs' power are figured once, by aggregation (`aggregate`, a
//! layer above this one).

use app::model::{
    CoolantReading, GpuReading, Job, NodeState, NvlinkFabric, ShelfReading, SwitchReading, UnixMs,
};

use crate::cluster::placement::GpuPlace;

/// Everything a source reports at one instant: the input of aggregation, whichever
/// source (simulator, scrape, PromQL) produced it.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Readings {
    pub at_ms: UnixMs,
    /// Every GPU of the inventory, in its order (a node's GPUs together); one whose node is
    /// not reporting has no values.
    pub gpus: Vec<GpuReading>,
    /// The racks that have a rack-level producer reporting (power shelves, NMX-T), in the
    /// inventory's order; a rack without one is not here.
    pub racks: Vec<RackReadings>,
    /// Every node the scheduler knows, with what its exporters report.
    pub nodes: Vec<NodeReading>,
    /// Pending and running jobs.
    pub jobs: Vec<Job>,
}

/// One node at one instant: the scheduler's state and what the node's own exporters
/// report; `None` or empty where nothing fresh is reported.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NodeReading {
    pub name: String,
    /// Scheduler state.
    pub state: NodeState,
    /// Total power (BMC: GPUs and host).
    #[serde(default)]
    pub power_watts: Option<f64>,
    /// Inlet temperature (BMC).
    #[serde(default)]
    pub inlet_celsius: Option<f64>,
    /// Coolant readings from its BMC (liquid-cooled trays).
    #[serde(default)]
    pub coolant: Option<CoolantReading>,
    /// InfiniBand traffic, received plus sent, in bytes per second (node_exporter).
    #[serde(default)]
    pub ib_bytes_per_second: Option<f64>,
    /// InfiniBand byte counters summed over its ports, as node_exporter reports them: the
    /// simulator's exporters serve these.
    #[serde(default)]
    pub ib_bytes_total: Option<f64>,
    /// Count of InfiniBand link-down events summed over its ports (node_exporter's
    /// `node_infiniband_link_downed_total`).
    #[serde(default)]
    pub ib_link_downed_total: Option<u64>,
    /// Its GPUs' places as DCGM's platform identity fields give them; empty where the
    /// exporter prints none (see [`crate::cluster::placement`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub places: Vec<GpuPlace>,
    /// Its NVSwitches as DCGM reports them (HGX baseboards).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub switches: Vec<SwitchReading>,
}

impl NodeReading {
    /// A node in `state` with nothing reported.
    pub fn silent(name: String, state: NodeState) -> Self {
        NodeReading {
            name,
            state,
            power_watts: None,
            inlet_celsius: None,
            coolant: None,
            ib_bytes_per_second: None,
            ib_bytes_total: None,
            ib_link_downed_total: None,
            places: Vec::new(),
            switches: Vec::new(),
        }
    }
}

/// One rack's rack-level producers at one instant.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct RackReadings {
    pub rack: String,
    /// Its power shelves, from a fresh reading of its power management controller (empty:
    /// none, or not reporting).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shelves: Vec<ShelfReading>,
    /// Its NVLink domain's fabric, from a fresh NMX-T reading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<NvlinkFabric>,
    /// Its power supplies, supply by supply, where the source knows them (the simulator,
    /// whose exporter prints them); what aggregation reads is `shelves`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supplies: Vec<super::shelves::SupplyLine>,
    /// Its NVLink ports, where the source knows them port by port (the simulator, whose
    /// NMX-T exporter prints them); what aggregation reads is `fabric`.
    #[serde(skip)]
    pub links: Option<super::nvlink_fabric::RackLinks>,
}

impl Readings {
    /// The nodes whose GPUs DCGM places, with their places.
    pub fn places(&self) -> Vec<(&str, &[GpuPlace])> {
        self.nodes
            .iter()
            .filter(|n| !n.places.is_empty())
            .map(|n| (n.name.as_str(), n.places.as_slice()))
            .collect()
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&NodeReading> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// The rack named `name`, if a rack-level producer reports it.
    pub fn rack(&self, name: &str) -> Option<&RackReadings> {
        self.racks.iter().find(|r| r.rack == name)
    }
}

/// `Readings` as rows say it: this version's form, or an older one's, whose nodes were
/// `(name, state)` pairs with parallel vectors of what they report (a standby of this
/// version reads the ticks an older leader publishes to `replica_ticks`).
#[derive(serde::Deserialize)]
struct Row {
    at_ms: UnixMs,
    #[serde(default)]
    gpus: Vec<GpuReading>,
    #[serde(default)]
    racks: Vec<RackReadings>,
    #[serde(default)]
    nodes: Vec<NodeRow>,
    #[serde(default)]
    jobs: Vec<Job>,
    #[serde(default)]
    node_power_watts: Vec<Option<f64>>,
    #[serde(default)]
    node_ib_bytes_per_second: Vec<Option<f64>>,
    #[serde(default)]
    node_ib_bytes_total: Vec<Option<f64>>,
    #[serde(default)]
    node_ib_link_downed_total: Vec<Option<u64>>,
    #[serde(default)]
    node_coolant: Vec<Option<CoolantReading>>,
    #[serde(default)]
    node_places: Vec<Vec<GpuPlace>>,
    #[serde(default)]
    node_switches: Vec<Vec<SwitchReading>>,
    #[serde(default)]
    rack_supplies: Vec<(String, Vec<super::shelves::SupplyLine>)>,
}

#[derive(serde::Deserialize)]
#[serde(untagged)]
enum NodeRow {
    // First: a derived struct also reads from a sequence, and would take the pair.
    Before(String, NodeState),
    Now(NodeReading),
}

impl<'de> serde::Deserialize<'de> for Readings {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut row = Row::deserialize(d)?;
        fn nth<T: Default>(v: &mut [T], i: usize) -> Option<T> {
            v.get_mut(i).map(std::mem::take)
        }
        let nodes = std::mem::take(&mut row.nodes)
            .into_iter()
            .enumerate()
            .map(|(i, n)| match n {
                NodeRow::Now(n) => n,
                // An older row: what the node reports is in the parallel vectors. (Its
                // inlet was only in the rack's sum, and is not recovered.)
                NodeRow::Before(name, state) => NodeReading {
                    name,
                    state,
                    power_watts: nth(&mut row.node_power_watts, i).flatten(),
                    inlet_celsius: None,
                    coolant: nth(&mut row.node_coolant, i).flatten(),
                    ib_bytes_per_second: nth(&mut row.node_ib_bytes_per_second, i).flatten(),
                    ib_bytes_total: nth(&mut row.node_ib_bytes_total, i).flatten(),
                    ib_link_downed_total: nth(&mut row.node_ib_link_downed_total, i).flatten(),
                    places: nth(&mut row.node_places, i).unwrap_or_default(),
                    switches: nth(&mut row.node_switches, i).unwrap_or_default(),
                },
            })
            .collect();
        for (rack, supplies) in row.rack_supplies {
            if let Some(r) = row.racks.iter_mut().find(|r| r.rack == rack) {
                r.supplies = supplies;
            }
        }
        Ok(Readings {
            at_ms: row.at_ms,
            gpus: row.gpus,
            racks: row.racks,
            nodes,
            jobs: row.jobs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_of_this_version_and_the_one_before_read_alike() {
        let before = r#"{"at_ms":5,"gpus":[],"racks":[{"rack":"A01","nodes_power_watts":900.0,"inlet_celsius":24.0}],
            "nodes":[["gpu001","idle"],["gpu002","down"]],"node_power_watts":[900.0,null],"jobs":[],
            "node_ib_bytes_per_second":[12.0,null],"node_ib_bytes_total":[],"node_ib_link_downed_total":[3,null]}"#;
        let r: Readings = serde_json::from_str(before).expect("older row");
        assert_eq!(r.nodes.len(), 2);
        assert_eq!(r.nodes[0].name, "gpu001");
        assert_eq!(r.nodes[0].power_watts, Some(900.0));
        assert_eq!(r.nodes[0].ib_bytes_per_second, Some(12.0));
        assert_eq!(r.nodes[0].ib_link_downed_total, Some(3));
        assert_eq!(r.nodes[1].state, NodeState::Down);
        assert_eq!(r.nodes[1].power_watts, None);
        assert_eq!(r.racks[0].rack, "A01");
        let again: Readings =
            serde_json::from_str(&serde_json::to_string(&r).expect("json")).expect("this row");
        assert_eq!(again.nodes, r.nodes);
        assert_eq!(again.racks.len(), 1);
    }
}
