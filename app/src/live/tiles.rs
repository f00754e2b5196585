//! What the live pages show of each thing: the cluster's summary, racks (with their power
//! shelves, NVLink switch trays, coolant and placement), nodes, switch domains, thermal
//! throttling, fragmented jobs and free segments. Wire types, pure.

use serde::{Deserialize, Serialize};

use crate::model::{Cooling, DomainKind, LeakState, NodeState};

/// GPUs by what they can do now. `allocated + idle + drained + down == total`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct GpuCounts {
    pub total: u32,
    pub allocated: u32,
    pub idle: u32,
    /// On drained or draining nodes and not allocated.
    pub drained: u32,
    /// On down, not responding or maintenance nodes.
    pub down: u32,
}

impl GpuCounts {
    /// Adds `o`'s counts to these.
    pub fn add(&mut self, o: GpuCounts) {
        self.total += o.total;
        self.allocated += o.allocated;
        self.idle += o.idle;
        self.drained += o.drained;
        self.down += o.down;
    }
}

/// The cluster-wide numbers of the overview.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Summary {
    pub gpus: GpuCounts,
    /// Mean SM activity over allocated GPUs with a reading, 0.0 to 1.0.
    pub sm_active_mean: Option<f64>,
    /// Sum of rack PDU power (or of GPU power where a rack has no PDU reading).
    pub power_watts: f64,
    /// Sum of rack power limits.
    pub power_capacity_watts: f64,
    pub gpus_throttling: u32,
    pub jobs_running: u32,
    pub jobs_pending: u32,
    /// Alerts firing now (the header's badge).
    #[serde(default)]
    pub alerts_firing: u32,
    /// Open critical incidents whose cause is not silenced (the badge's critical count).
    #[serde(default)]
    pub alerts_critical: u32,
}

/// One data hall of the fleet: its racks' power against its feed, its GPUs by state, and
/// its worst open problem (the fleet level of the floor's drill-down).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct HallTile {
    pub name: String,
    pub rows: u32,
    pub racks: u32,
    pub nodes: u32,
    /// The sum of its racks' power (each as its tile says: BMC, else GPUs).
    pub power_watts: f64,
    /// The hall's feed from the layout; `None`: not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_feed_watts: Option<f64>,
    /// The sum of its racks' limits.
    pub power_limit_watts: f64,
    pub gpus: GpuCounts,
    pub gpus_throttling: u32,
    /// Mean SM activity over its allocated GPUs with a reading, 0.0 to 1.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_active_mean: Option<f64>,
    pub nodes_unavailable: u32,
    /// Nodes up whose power reading is missing or stale: the power is a lower bound.
    #[serde(default)]
    pub nodes_not_reporting: u32,
    /// Racks over their limit now.
    #[serde(default)]
    pub racks_over_limit: u32,
    /// The worst open incident in the hall (its words those of the worst rack's), with
    /// how many are open in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident: Option<RackIncident>,
}

impl HallTile {
    /// The share of its feed the hall draws, where it has one.
    pub fn feed_share(&self) -> Option<f64> {
        self.power_feed_watts
            .filter(|f| *f > 0.0)
            .map(|f| self.power_watts / f)
    }
}

/// One rack of the mini-map.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct RackTile {
    pub name: String,
    pub row: String,
    /// Its data hall; empty where the layout names none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hall: String,
    pub position: u32,
    pub power_watts: Option<f64>,
    pub power_limit_watts: f64,
    pub inlet_celsius: Option<f64>,
    pub cooling: Cooling,
    pub gpus_throttling: u32,
    pub nodes_unavailable: u32,
    /// Nodes up in the scheduler whose power reading is missing or stale: the rack's
    /// power is then a lower bound, and says so.
    #[serde(default)]
    pub nodes_not_reporting: u32,
    /// The hottest GPU in the rack now.
    #[serde(default)]
    pub gpu_temp_max_celsius: Option<f64>,
    /// The inlet temperature above which this rack's GPUs are expected to throttle.
    #[serde(default)]
    pub inlet_limit_celsius: f64,
    /// Running jobs with GPUs in this rack, most GPUs first (who draws its power).
    #[serde(default)]
    pub jobs: Vec<u64>,
    /// A liquid rack's coolant loop; `None` for air-cooled racks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coolant: Option<CoolantTile>,
    /// What DCGM's platform identity fields say of the rack's trays; `None` where no
    /// tray's exporter prints them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementTile>,
    /// A rack-scale rack's power shelves; `None` where the layout gives it none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shelves: Option<ShelvesTile>,
    /// A rack-scale rack's NVLink switch trays; `None` where the layout gives it none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<FabricTile>,
    /// The worst open incident in the rack (its own, or one of its nodes'): its colour is
    /// the tile's at least, its cause in words on the tile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident: Option<RackIncident>,
}

/// The worst open incident of a rack, as its tile shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct RackIncident {
    /// `critical`, `warning` or `info`.
    pub severity: String,
    /// Where and what, in words (`node gpu038: double-bit ECC errors on GPU 3`).
    pub words: String,
    /// The page of its place.
    pub link: String,
    /// Open incidents in the rack.
    pub count: u32,
}

/// A rack-scale rack's NVLink switch trays now, as NVIDIA NMX-T reports the GPU links
/// cabled to them: a switch tray down cuts a share of every GPU's NVLink bandwidth, a link
/// down one GPU's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct FabricTile {
    /// Switch trays the layout gives the rack.
    pub expected: u32,
    /// Switch trays in the last fresh reading; 0: not reporting.
    pub reporting: u32,
    /// GPU links to the switch trays read, and those active.
    pub links: u32,
    pub active: u32,
    /// Switch trays with not one link active, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub down: Vec<String>,
    /// Expected switch trays absent from a fresh reading.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub missing: u32,
    /// Switch trays with some links not active, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degraded: Vec<String>,
    /// Compute trays with a GPU link not active: node names where the tray is placed (by
    /// DCGM's identity fields, else the layout's order), else `tray N`; nodes in inventory
    /// order first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cut: Vec<String>,
    /// The links not active of degraded switch trays, in words (at most eight).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links_down: Vec<String>,
}

impl FabricTile {
    /// A fresh reading exists.
    pub fn reporting(&self) -> bool {
        self.reporting > 0
    }

    /// Switch trays with no link active, or missing from the reading.
    pub fn lost(&self) -> u32 {
        self.down.len() as u32 + self.missing
    }

    /// Anything short of every switch tray reporting with every link active.
    pub fn in_trouble(&self) -> bool {
        !self.reporting() || self.lost() > 0 || !self.degraded.is_empty() || !self.cut.is_empty()
    }
}

/// A rack's power shelves now, against its bus bar: `RackTile::power_limit_watts` is the
/// lower of the bus bar's limit and what the working shelves can deliver with the site's
/// reserve held back, so a shelf down lowers the rack's limit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct ShelvesTile {
    /// Shelves the layout gives the rack.
    pub expected: u32,
    /// Shelves in the last fresh reading of the rack's power controller; 0: not
    /// reporting, and the limit is the bus bar's alone.
    pub reporting: u32,
    /// Reporting shelves with no supply delivering, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub down: Vec<String>,
    /// Expected shelves absent from a fresh reading (counted as delivering nothing).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub missing: u32,
    /// Shelves delivering with a supply down or in warning, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degraded: Vec<String>,
    /// The bus bar's limit (the layout's `power_limit_kw`).
    pub busbar_watts: f64,
    /// What the working shelves deliver with the reserve held back; `None` when not
    /// reporting or a supply does not give its capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_watts: Option<f64>,
}

fn is_zero(x: &u32) -> bool {
    *x == 0
}

impl ShelvesTile {
    /// A fresh reading exists.
    pub fn reporting(&self) -> bool {
        self.reporting > 0
    }

    /// Shelves delivering nothing: down, or missing from the reading.
    pub fn lost(&self) -> u32 {
        self.down.len() as u32 + self.missing
    }

    /// Anything short of every shelf reporting and well.
    pub fn in_trouble(&self) -> bool {
        !self.reporting() || self.lost() > 0 || !self.degraded.is_empty()
    }

    /// The shelves hold the rack below its bus bar.
    pub fn lowers_limit(&self) -> bool {
        self.limit_watts.is_some_and(|l| l < self.busbar_watts)
    }
}

/// A rack as DCGM places its trays (chassis serial, tray index) against the layout file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct PlacementTile {
    /// The chassis whose trays are mostly in this rack by the layout.
    pub chassis: Vec<String>,
    /// The rack's trays (by the layout) whose GPUs report a place.
    pub trays_reporting: u32,
    /// Where the layout and DCGM disagree about a tray the layout puts here, in words,
    /// in inventory order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub issues: Vec<String>,
}

/// A liquid rack's coolant loop now, from its trays' BMCs: temperatures to 0.1 °C and
/// flow to 0.1 L/min (the display's precision), and the trays in trouble by name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct CoolantTile {
    /// Mean over the trays that report it.
    pub supply_celsius: Option<f64>,
    pub return_celsius: Option<f64>,
    /// Return minus supply.
    pub delta_t_celsius: Option<f64>,
    /// Summed over the trays that report it, litres per minute.
    pub flow_lpm: Option<f64>,
    /// Trays reporting any coolant reading.
    pub trays_reporting: u32,
    /// The worst leak detector of the rack.
    pub leak: LeakState,
    /// Trays whose leak detector is not OK, in inventory order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leaking: Vec<String>,
    /// Trays whose flow is under the rack's limit, in inventory order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub low_flow: Vec<String>,
    /// The rack's limits (from the layout), where set.
    pub flow_min_lpm: Option<f64>,
    pub delta_t_max_celsius: Option<f64>,
}

impl CoolantTile {
    /// Return over supply by more than the limit.
    pub fn delta_t_high(&self) -> bool {
        matches!((self.delta_t_celsius, self.delta_t_max_celsius), (Some(d), Some(m)) if d > m)
    }
}

impl RackTile {
    /// Power as a share of the limit, if known.
    pub fn load_ratio(&self) -> Option<f64> {
        self.power_watts
            .filter(|_| self.power_limit_watts > 0.0)
            .map(|p| p / self.power_limit_watts)
    }

    /// The rack's severity for colour: a critical leak, over its power limit or an NVLink
    /// switch tray down is critical; NVLink links down or switch trays not reporting, a
    /// power shelf down, degraded or not reporting, a leak warning, a tray
    /// short of coolant flow, coolant delta-T over its limit, above 90% of its power limit
    /// or throttling GPUs is a warning.
    pub fn severity(&self) -> Severity {
        let over = self.load_ratio().is_some_and(|r| r > 1.0);
        let leak = self.coolant.as_ref().map(|c| c.leak);
        let incident = self.incident.as_ref().map(|i| i.severity.as_str());
        if over || leak == Some(LeakState::Critical) || incident == Some("critical") {
            return Severity::Critical;
        }
        if incident == Some("warning") {
            return Severity::Warning.max(self.power_severity());
        }
        self.power_severity()
    }

    /// Its colour without the open incidents.
    fn power_severity(&self) -> Severity {
        let over = self.load_ratio().is_some_and(|r| r > 1.0);
        let leak = self.coolant.as_ref().map(|c| c.leak);
        if over || leak == Some(LeakState::Critical) {
            return Severity::Critical;
        }
        let coolant_trouble = self.coolant.as_ref().is_some_and(|c| {
            c.leak == LeakState::Warning || !c.low_flow.is_empty() || c.delta_t_high()
        });
        if self
            .fabric
            .as_ref()
            .is_some_and(|f| f.reporting() && f.lost() > 0)
        {
            return Severity::Critical;
        }
        let shelf_trouble = self.shelves.as_ref().is_some_and(ShelvesTile::in_trouble)
            || self.fabric.as_ref().is_some_and(FabricTile::in_trouble);
        match self.load_ratio() {
            _ if coolant_trouble || shelf_trouble => Severity::Warning,
            Some(r) if r > 0.9 => Severity::Warning,
            _ if self.gpus_throttling > 0 || self.nodes_not_reporting > 0 => Severity::Warning,
            _ => Severity::Ok,
        }
    }
}

/// The fixed severity palette of the UI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Ok,
    Warning,
    Critical,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// One node of the floor, in the floor's display precision (power to 0.1 kW, temperature
/// to 1 °C, SM activity to 5%), so that a tick only carries nodes whose display changed;
/// the node page has the exact values. Short field
/// names: at 2,048 nodes these are most of a delta's bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct NodeTile {
    #[serde(rename = "n")]
    pub name: String,
    #[serde(rename = "r")]
    pub rack: String,
    #[serde(rename = "u")]
    pub u_position: u32,
    #[serde(rename = "h")]
    pub u_height: u32,
    #[serde(rename = "s")]
    pub state: NodeState,
    /// Node power from its BMC; `None` when not reporting.
    #[serde(rename = "p", default)]
    pub power_watts: Option<f64>,
    #[serde(rename = "t", default)]
    pub gpu_temp_max_celsius: Option<f64>,
    #[serde(rename = "a", default)]
    pub sm_active_mean: Option<f64>,
    #[serde(rename = "g")]
    pub gpus: u32,
    #[serde(rename = "x", default)]
    pub gpus_throttling: u32,
    #[serde(rename = "j", default)]
    pub jobs: Vec<u64>,
    /// Reliability marks ([`marks`]): a lemon to send for repair, a straggling GPU, a
    /// hung job. Set by the alert task and the recent reliability, stamped each tick.
    #[serde(rename = "k", default, skip_serializing_if = "marks::none")]
    pub marks: u8,
}

/// The bits of [`NodeTile::marks`].
pub mod marks {
    /// Its lemon score recommends RMA or deep diagnostics (the last 30 days).
    pub const LEMON: u8 = 1;
    /// One of its GPUs is a straggler of a running job (an open `straggler` alert).
    pub const STRAGGLER: u8 = 2;
    /// It runs a job that is hung (an open `job_hung` alert).
    pub const HUNG: u8 = 4;

    pub fn none(m: &u8) -> bool {
        *m == 0
    }

    /// What the marks say, in words, in the floor's order (radar first).
    pub fn words(m: u8) -> Vec<&'static str> {
        let mut w = Vec::new();
        if m & HUNG != 0 {
            w.push("running a hung job");
        }
        if m & STRAGGLER != 0 {
            w.push("a straggling GPU");
        }
        if m & LEMON != 0 {
            w.push("RMA recommended");
        }
        w
    }
}

/// GPUs throttling by one cause.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct ReasonCount {
    /// NVML's name: `sw_thermal`, `hw_thermal`, `sw_power_cap`, `hw_slowdown`,
    /// `hw_power_brake`.
    pub reason: String,
    pub gpus: u32,
}

/// A running job with throttled GPUs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct JobThrottle {
    pub id: u64,
    pub name: String,
    pub gpus: u32,
    pub gpus_throttling: u32,
    /// Mean SM clock deficit of its throttled GPUs against boost, 0.0 to 1.0.
    pub clock_deficit: Option<f64>,
}

/// Thermal and power throttling now.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Thermal {
    pub by_reason: Vec<ReasonCount>,
    pub by_job: Vec<JobThrottle>,
    /// GPU-hours lost to throttling since the server started (clock deficit x time).
    pub lost_gpu_hours: f64,
    /// The same, per rack (only racks that lost some).
    #[serde(default)]
    pub lost_by_rack: Vec<(String, f64)>,
}

/// One switch domain's GPUs now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct DomainTile {
    pub name: String,
    pub kind: DomainKind,
    pub parent: Option<String>,
    pub nodes: u32,
    pub gpus: GpuCounts,
    pub sm_active_mean: Option<f64>,
    /// Downlink over uplink bandwidth; 1.0 is non-blocking.
    pub oversubscription: f64,
    /// Every node idle and schedulable: a whole domain a large job could have.
    pub free_whole: bool,
    /// NVLink traffic of its GPUs, sent plus received, bytes per second (to 1 GB/s);
    /// `None` where no exporter reports it.
    #[serde(default)]
    pub nvlink_bytes_per_second: Option<f64>,
    /// InfiniBand traffic of its nodes, received plus sent, bytes per second (2 significant
    /// digits); `None` where no node_exporter reports it.
    #[serde(default)]
    pub ib_bytes_per_second: Option<f64>,
}

/// A running job spread over more leaf switches (or blocks) than its size needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct FragmentedJob {
    pub id: u64,
    pub name: String,
    pub user: String,
    pub nodes: u32,
    /// Leaf switches or Slurm blocks.
    pub kind: DomainKind,
    /// Domains of that kind the job's nodes are in.
    pub used: u32,
    /// The fewest its node count needs.
    pub min: u32,
}

/// Free capacity of one Slurm block topology in the units jobs ask for (`--segment`):
/// what could start now, by segment size.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct SegmentFree {
    /// The base block (segments fit in one), in nodes.
    pub base: u32,
    pub blocks: u32,
    pub idle_nodes: u32,
    pub largest_free_segment: u32,
    /// Per segment size: (size, segments that could start now, idle nodes they strand).
    pub sizes: Vec<(u32, u32, u32)>,
    /// Pending jobs that ask for a segment: with a target now, without one, never.
    pub pending: (u32, u32, u32),
}
