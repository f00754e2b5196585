//! `Readings`: everything a source reports at one instant, the one thing telemetry hands
//! on. The simulator, the scrape source and PromQL each fill it; aggregation, the
//! pipeline, the hot window, rollups and alerts read it, and none of them knows which
//! source filled it.

use app::model::{GpuReading, Job, NodeState, RackReading, UnixMs};

/// Everything a source reports at one instant: the input of aggregation, whichever
/// source (simulator, scrape, PromQL) produced it.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
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
    /// Each node's InfiniBand traffic, received plus sent, in bytes per second, in the order
    /// of `nodes`; empty or `None` where no exporter reports it.
    pub node_ib_bytes_per_second: Vec<Option<f64>>,
    /// Each node's InfiniBand byte counters summed over its ports (what node_exporter
    /// reports), in the order of `nodes`: the simulator's exporters serve these.
    pub node_ib_bytes_total: Vec<Option<f64>>,
    /// Each node's count of InfiniBand link-down events summed over its ports
    /// (node_exporter's `node_infiniband_link_downed_total`), in the order of `nodes`; empty
    /// or `None` where no exporter reports it.
    #[serde(default)]
    pub node_ib_link_downed_total: Vec<Option<u64>>,
    /// Each node's coolant readings from its BMC (liquid-cooled trays), in the order of
    /// `nodes`; empty or `None` where none is reported.
    #[serde(default)]
    pub node_coolant: Vec<Option<app::model::CoolantReading>>,
    /// Each node's GPUs' places as DCGM's platform identity fields give them, in the order
    /// of `nodes`; empty where no exporter prints them (see [`crate::cluster::placement`]).
    #[serde(default)]
    pub node_places: Vec<Vec<crate::cluster::placement::GpuPlace>>,
    /// Each node's NVSwitches as DCGM reports them (HGX baseboards), in the order of
    /// `nodes`; empty where no exporter reports them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_switches: Vec<Vec<app::model::SwitchReading>>,
    /// Each rack's power supplies, supply by supply, where the source knows them (the
    /// simulator, whose exporter prints them); what aggregation reads is `racks[].shelves`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rack_supplies: Vec<(String, Vec<super::shelves::SupplyLine>)>,
    /// Each rack's NVLink ports, where the source knows them port by port (the
    /// simulator, whose NMX-T exporter prints them); what aggregation reads is
    /// `racks[].fabric`.
    #[serde(skip)]
    pub rack_links: Vec<(String, super::nvlink_fabric::RackLinks)>,
}

impl Readings {
    /// The nodes whose GPUs DCGM places, with their places.
    pub fn places(&self) -> Vec<(&str, &[crate::cluster::placement::GpuPlace])> {
        self.nodes
            .iter()
            .zip(&self.node_places)
            .filter(|(_, p)| !p.is_empty())
            .map(|((n, _), p)| (n.as_str(), p.as_slice()))
            .collect()
    }
}
