//! The domain model: cluster -> rows -> racks -> nodes -> GPUs, switch domains, jobs,
//! telemetry readings and checkpoints.
//!
//! Pure data and pure functions: no I/O, no clock (times are parameters, in Unix
//! milliseconds), so it compiles to wasm and tests are exact. Units are in field names.

use serde::{Deserialize, Serialize};

/// Unix time in milliseconds. Every time in the model is one of these, passed in.
pub type UnixMs = i64;

/// How a rack is cooled; liquid-cooled racks take far higher power limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Cooling {
    Air,
    Liquid,
}

/// A rack on the floor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Rack {
    pub name: String,
    pub row: String,
    /// The data hall the rack stands in; empty where the layout names no halls.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hall: String,
    /// The pod (a group of rows) within the hall, where the layout names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// Position in its row, from 0.
    pub position: u32,
    pub power_limit_watts: f64,
    pub cooling: Cooling,
    /// The inlet temperature above which GPUs in this rack are expected to throttle.
    pub inlet_limit_celsius: f64,
    /// Liquid racks: the coolant flow through one tray (node) below which it is starved,
    /// in litres per minute; `None`: not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coolant_flow_min_lpm: Option<f64>,
    /// Liquid racks: the rise of coolant return over supply temperature above which the
    /// loop carries more heat than its flow is sized for; `None`: not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coolant_delta_t_max_celsius: Option<f64>,
    /// The rack's chassis serial number as the site recorded it, checked against what
    /// DCGM reports for the rack's trays (field 572); `None`: not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chassis_serial: Option<String>,
    /// Rack-scale systems: the power shelves feeding the rack's bus bar (whose limit is
    /// `power_limit_watts`); `None`: the rack has none Gantry watches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_shelves: Option<u32>,
    /// Shelves held in reserve by the site's redundancy (N+1: 1; N+N with 8 shelves: 4):
    /// the shelves' limit is the working capacity less that of this many of the largest
    /// working shelves.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub power_shelves_redundant: u32,
    /// Rack-scale NVLink: the NVLink switch trays of the rack's domain (an NVL72 rack has
    /// nine), read through NVIDIA NMX-T; `None`: the rack has none Gantry watches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_trays: Option<u32>,
}

fn is_zero(x: &u32) -> bool {
    *x == 0
}

/// A leak detector's state, in Redfish's words (`LeakDetector.DetectorState`: OK,
/// Warning, Critical); BMC exporters print it as a sensor state 0, 1, 2.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum LeakState {
    #[default]
    Ok,
    Warning,
    Critical,
}

impl LeakState {
    /// From a sensor state as exporters print it (0 nominal, 1 warning, 2 critical).
    pub fn from_sensor(v: f64) -> Option<LeakState> {
        match v {
            0.0 => Some(LeakState::Ok),
            1.0 => Some(LeakState::Warning),
            2.0 => Some(LeakState::Critical),
            _ => None,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            LeakState::Ok => "OK",
            LeakState::Warning => "Warning",
            LeakState::Critical => "Critical",
        }
    }
}

/// One tray's (node's) liquid-cooling readings from its BMC. A missing value is `None`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct CoolantReading {
    pub supply_celsius: Option<f64>,
    pub return_celsius: Option<f64>,
    /// Litres per minute through the tray.
    pub flow_lpm: Option<f64>,
    /// The worst of its leak detectors.
    pub leak: Option<LeakState>,
}

impl CoolantReading {
    pub fn is_empty(&self) -> bool {
        *self == CoolantReading::default()
    }
}

/// One power supply's state as Redfish gives it (`Status.Health`, `Status.State`), the way
/// redfish_exporter prints them: health 1 OK, 2 Warning, 3 Critical; state 1 Enabled, 7
/// Absent, others (disabled, standby, offline, in test...) not delivering.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SupplyHealth {
    #[default]
    Ok,
    Warning,
    Critical,
}

impl SupplyHealth {
    /// From redfish_exporter's health gauge (1 OK, 2 Warning, 3 Critical).
    pub fn from_gauge(v: f64) -> Option<SupplyHealth> {
        match v {
            1.0 => Some(SupplyHealth::Ok),
            2.0 => Some(SupplyHealth::Warning),
            3.0 => Some(SupplyHealth::Critical),
            _ => None,
        }
    }
}

/// One power shelf of a rack as its power management controller reports it through
/// Redfish: its supplies counted by what they can do, and their capacity.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct ShelfReading {
    /// The shelf's name (Redfish's chassis id, e.g. `PowerShelf_3`).
    pub shelf: String,
    /// Supplies the shelf reports, present or not.
    pub supplies: u32,
    /// Supplies delivering: enabled (or no state given) and not in critical health.
    pub working: u32,
    /// Working supplies whose health is Warning.
    pub warning: u32,
    /// The summed capacity of the working supplies, in watts; `None` when one of them does
    /// not say (redfish_exporter prints a missing capacity as 0).
    pub capacity_watts: Option<f64>,
    /// The summed output of its supplies now, in watts, where they report it.
    pub output_watts: Option<f64>,
}

impl ShelfReading {
    /// No supply delivers.
    pub fn is_down(&self) -> bool {
        self.working == 0
    }

    /// Some supply is not delivering or in warning, yet the shelf delivers.
    pub fn is_degraded(&self) -> bool {
        !self.is_down() && (self.working < self.supplies || self.warning > 0)
    }
}

/// One NVSwitch of a node (an HGX baseboard's) as DCGM reports it (fields 856-870).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct SwitchReading {
    /// DCGM's switch id on the node.
    pub switch: u32,
    pub temp_celsius: Option<f64>,
    /// The temperature at which it slows down, and at which it shuts down.
    pub slowdown_celsius: Option<f64>,
    pub shutdown_celsius: Option<f64>,
    /// The fatal SXid last reported (the switch's NVLink fabric is down until reset).
    pub fatal_sxid: Option<u32>,
    pub non_fatal_sxid: Option<u32>,
    pub reset_required: Option<bool>,
    /// Links reported active, and those reported in any other state, by link id.
    pub links_active: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links_not_active: Vec<u32>,
}

impl SwitchReading {
    /// At or above its slowdown temperature.
    pub fn is_hot(&self) -> bool {
        matches!((self.temp_celsius, self.slowdown_celsius), (Some(t), Some(l)) if t >= l)
    }
}

/// A GPU as inventory (not its readings).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Gpu {
    pub index: u32,
    pub uuid: String,
    pub model: String,
    pub max_power_watts: f64,
}

/// A node: a server in a rack, known to Slurm by `name`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Node {
    pub name: String,
    pub rack: String,
    /// Lowest rack unit the chassis occupies (1 = bottom).
    pub u_position: u32,
    pub u_height: u32,
    pub gpus: Vec<Gpu>,
    /// Names of the switch domains this node belongs to (NVLink domain, leaf, block).
    pub domains: Vec<String>,
}

/// Kinds of switch domain: sets of nodes that share a switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DomainKind {
    /// An NVLink/NVSwitch domain (one HGX board, or an NVL72 rack).
    Nvlink,
    /// An InfiniBand leaf switch.
    Leaf,
    /// An InfiniBand spine switch above leaves.
    Spine,
    /// A Slurm topology/block block.
    Block,
}

/// A switch domain and what is under it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct SwitchDomain {
    pub name: String,
    pub kind: DomainKind,
    /// Parent switch (a leaf's spine), if any.
    pub parent: Option<String>,
    pub nodes: Vec<String>,
    /// Downlink over uplink bandwidth; 1.0 is non-blocking, 2.0 is 2:1.
    pub oversubscription: f64,
    /// A block's aggregation sizes in nodes, the base block (the unit segments fit in)
    /// first; empty for other kinds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_sizes: Vec<u32>,
}

/// A data hall: a building's room of rows, fed by its own power feed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Hall {
    pub name: String,
    /// The hall's power feed; `None`: not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_feed_watts: Option<f64>,
}

/// A cluster's inventory: what exists, as opposed to what it is doing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Inventory {
    pub cluster: String,
    /// The data halls, in the layout's order; empty where it names none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub halls: Vec<Hall>,
    pub rows: Vec<String>,
    pub racks: Vec<Rack>,
    pub nodes: Vec<Node>,
    pub domains: Vec<SwitchDomain>,
}

impl Inventory {
    pub fn gpu_count(&self) -> usize {
        self.nodes.iter().map(|n| n.gpus.len()).sum()
    }

    /// Each rack's hall, by rack name (racks in no hall left out).
    pub fn hall_of_rack(&self) -> std::collections::HashMap<&str, &str> {
        self.racks
            .iter()
            .filter(|r| !r.hall.is_empty())
            .map(|r| (r.name.as_str(), r.hall.as_str()))
            .collect()
    }

    /// The nodes under switch domain `d`: its own and, through every level of switches
    /// below it (a spine's leaves, a core's spines), theirs; each once, in the order met.
    /// The one definition of a domain's nodes for aggregation, truth, history and actions.
    /// For many domains, build [`Inventory::domain_tree`] once and ask it.
    pub fn domain_nodes<'a>(&'a self, d: &'a SwitchDomain) -> Vec<&'a str> {
        self.domain_tree().nodes(d)
    }

    /// Each switch domain's children, indexed once (a fleet has some 20,000 domains:
    /// looking for children by scanning them all, per domain, was most of a tick).
    pub fn domain_tree(&self) -> DomainTree<'_> {
        let mut children: std::collections::HashMap<&str, Vec<&SwitchDomain>> =
            std::collections::HashMap::new();
        for c in &self.domains {
            if let Some(p) = c.parent.as_deref() {
                children.entry(p).or_default().push(c);
            }
        }
        DomainTree { children }
    }
}

/// The switch domains' parent links, indexed by parent ([`Inventory::domain_tree`]).
pub struct DomainTree<'a> {
    children: std::collections::HashMap<&'a str, Vec<&'a SwitchDomain>>,
}

impl<'a> DomainTree<'a> {
    /// [`Inventory::domain_nodes`], with the children looked up in the index.
    pub fn nodes(&self, d: &'a SwitchDomain) -> Vec<&'a str> {
        let children = |s: &SwitchDomain| -> &[&'a SwitchDomain] {
            self.children
                .get(s.name.as_str())
                .map(Vec::as_slice)
                .unwrap_or(&[])
        };
        // A leaf, an NVLink domain or a block: its own list (the common case, every tick).
        if children(d).is_empty() {
            return d.nodes.iter().map(String::as_str).collect();
        }
        let mut out: Vec<&str> = Vec::new();
        let mut seen_node: std::collections::HashSet<&str> = std::collections::HashSet::new();
        let mut seen_switch: std::collections::HashSet<&str> = std::collections::HashSet::new();
        let mut todo = vec![d];
        // Each switch is taken once: a parent cycle in a bad layout cannot loop.
        while let Some(s) = todo.pop() {
            if !seen_switch.insert(&s.name) {
                continue;
            }
            out.extend(
                s.nodes
                    .iter()
                    .map(String::as_str)
                    .filter(|n| seen_node.insert(n)),
            );
            // Children in reverse so that they are taken in inventory order.
            todo.extend(children(s).iter().rev());
        }
        out
    }
}

/// A node's scheduler state, normalized across Slurm versions and transports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    Idle,
    Allocated,
    Mixed,
    /// DRAIN set while jobs still run.
    Draining,
    /// DRAIN set and no jobs left.
    Drained,
    Down,
    NotResponding,
    Maintenance,
    Reserved,
    Planned,
    Unknown,
}

impl NodeState {
    pub const ALL: [NodeState; 11] = [
        NodeState::Idle,
        NodeState::Allocated,
        NodeState::Mixed,
        NodeState::Draining,
        NodeState::Drained,
        NodeState::Down,
        NodeState::NotResponding,
        NodeState::Maintenance,
        NodeState::Reserved,
        NodeState::Planned,
        NodeState::Unknown,
    ];

    pub fn label(self) -> &'static str {
        match self {
            NodeState::Idle => "idle",
            NodeState::Allocated => "allocated",
            NodeState::Mixed => "mixed",
            NodeState::Draining => "draining",
            NodeState::Drained => "drained",
            NodeState::Down => "down",
            NodeState::NotResponding => "not responding",
            NodeState::Maintenance => "maintenance",
            NodeState::Reserved => "reserved",
            NodeState::Planned => "planned",
            NodeState::Unknown => "unknown",
        }
    }

    /// Whether the node can take no new work for a reason an operator must act on.
    pub fn is_unavailable(self) -> bool {
        matches!(
            self,
            NodeState::Drained
                | NodeState::Down
                | NodeState::NotResponding
                | NodeState::Maintenance
        )
    }
}

/// A job's state, normalized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Pending,
    Running,
    Requeued,
    Completing,
    Completed,
    Failed,
    Cancelled,
    Timeout,
    NodeFail,
    Other,
}

impl JobState {
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            JobState::Completed
                | JobState::Failed
                | JobState::Cancelled
                | JobState::Timeout
                | JobState::NodeFail
        )
    }

    pub fn label(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Requeued => "requeued",
            JobState::Completing => "completing",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Timeout => "timeout",
            JobState::NodeFail => "node_fail",
            JobState::Other => "other",
        }
    }

    pub fn parse(s: &str) -> JobState {
        match s {
            "pending" => JobState::Pending,
            "running" => JobState::Running,
            "requeued" => JobState::Requeued,
            "completing" => JobState::Completing,
            "completed" => JobState::Completed,
            "failed" => JobState::Failed,
            "cancelled" => JobState::Cancelled,
            "timeout" => JobState::Timeout,
            "node_fail" => JobState::NodeFail,
            _ => JobState::Other,
        }
    }
}

/// A Slurm job as Gantry keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Job {
    pub id: u64,
    pub name: String,
    pub user: String,
    pub account: String,
    pub partition: String,
    pub state: JobState,
    pub nodes: Vec<String>,
    pub gpus: u32,
    pub submit_ms: UnixMs,
    pub start_ms: Option<UnixMs>,
    pub end_ms: Option<UnixMs>,
}

/// Clock-event ("throttle") reasons, DCGM field 112, bit for bit as NVML defines them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(transparent)]
pub struct ThrottleReasons(pub u64);

impl ThrottleReasons {
    pub const GPU_IDLE: u64 = 0x001;
    pub const CLOCKS_SETTING: u64 = 0x002;
    pub const SW_POWER_CAP: u64 = 0x004;
    pub const HW_SLOWDOWN: u64 = 0x008;
    pub const SYNC_BOOST: u64 = 0x010;
    pub const SW_THERMAL: u64 = 0x020;
    pub const HW_THERMAL: u64 = 0x040;
    pub const HW_POWER_BRAKE: u64 = 0x080;
    pub const DISPLAY_CLOCKS: u64 = 0x100;

    /// Reasons that mean lost throughput. Idle, application-clock and display-clock
    /// settings and sync boost are not throttling in the field's sense.
    pub const THROTTLING_MASK: u64 = Self::SW_POWER_CAP
        | Self::HW_SLOWDOWN
        | Self::SW_THERMAL
        | Self::HW_THERMAL
        | Self::HW_POWER_BRAKE;

    /// Each reason bit with the name operators use for it.
    pub const NAMES: [(u64, &'static str); 9] = [
        (Self::GPU_IDLE, "GPU idle"),
        (Self::CLOCKS_SETTING, "application clocks"),
        (Self::SW_POWER_CAP, "SW power cap"),
        (Self::HW_SLOWDOWN, "HW slowdown"),
        (Self::SYNC_BOOST, "sync boost"),
        (Self::SW_THERMAL, "SW thermal"),
        (Self::HW_THERMAL, "HW thermal"),
        (Self::HW_POWER_BRAKE, "HW power brake"),
        (Self::DISPLAY_CLOCKS, "display clocks"),
    ];

    pub fn is_throttling(self) -> bool {
        self.0 & Self::THROTTLING_MASK != 0
    }

    pub fn is_thermal(self) -> bool {
        self.0 & (Self::SW_THERMAL | Self::HW_THERMAL) != 0
    }

    /// The names of the bits set, in bit order; unknown bits are named by value.
    pub fn names(self) -> Vec<String> {
        let mut out = Vec::new();
        let mut known = 0;
        for (bit, name) in Self::NAMES {
            known |= bit;
            if self.0 & bit != 0 {
                out.push(name.to_string());
            }
        }
        let unknown = self.0 & !known;
        if unknown != 0 {
            out.push(format!("unknown 0x{unknown:x}"));
        }
        out
    }
}

/// One GPU's readings at one instant. A missing value is `None`, never 0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct GpuReading {
    pub node: String,
    pub index: u32,
    pub power_watts: Option<f64>,
    pub temp_celsius: Option<f64>,
    pub sm_clock_mhz: Option<f64>,
    /// DCGM_FI_PROF_SM_ACTIVE, 0.0 to 1.0.
    pub sm_active_ratio: Option<f64>,
    pub throttle: Option<ThrottleReasons>,
    pub ecc_dbe_total: Option<u64>,
    pub last_xid: Option<u32>,
    /// Single-bit ECC errors (corrected; normal in small numbers).
    #[serde(default)]
    pub ecc_sbe_total: Option<u64>,
    /// PCIe replays since boot; a rising count means a bad link.
    #[serde(default)]
    pub pcie_replay_total: Option<u64>,
    /// Memory rows remapped for uncorrectable errors (HBM); any means the GPU should go.
    #[serde(default)]
    pub remapped_rows_uncorrectable: Option<u64>,
    /// NVLink traffic, sent plus received, in bytes per second (DCGM profiling fields).
    #[serde(default)]
    pub nvlink_bytes_per_second: Option<f64>,
    /// PCIe traffic, sent plus received, in bytes per second.
    #[serde(default)]
    pub pcie_bytes_per_second: Option<f64>,
    /// The power limit the driver enforces now, in watts.
    #[serde(default)]
    pub power_limit_watts: Option<f64>,
    /// HBM temperature (GDDR boards do not report one).
    #[serde(default)]
    pub memory_temp_celsius: Option<f64>,
    /// DCGM_FI_DEV_GPU_UTIL: percent of time a kernel ran, 0 to 100 (coarse: a GPU can be
    /// 100% "utilized" with one SM busy; SM activity tells more).
    #[serde(default)]
    pub gpu_util_percent: Option<f64>,
    /// Graphics engine, tensor pipe and DRAM interface activity, 0.0 to 1.0.
    #[serde(default)]
    pub gr_engine_active_ratio: Option<f64>,
    #[serde(default)]
    pub tensor_active_ratio: Option<f64>,
    #[serde(default)]
    pub dram_active_ratio: Option<f64>,
    /// Energy since the driver loaded, in joules.
    #[serde(default)]
    pub energy_joules: Option<f64>,
    /// Framebuffer memory in use, in MiB (DCGM_FI_DEV_FB_USED).
    #[serde(default)]
    pub fb_used_mib: Option<f64>,
}

/// A GPU port of an NVLink domain whose link is not active, as NMX-T labels it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct NvlinkPortDown {
    /// The compute tray's slot in the rack (switch trays counted) and its index among the
    /// compute trays, as NMX-T labels them (`chassis_slot_index`, `tray_index`).
    pub chassis_slot: Option<u32>,
    pub tray_index: Option<u32>,
    /// The GPU on its tray (`device_num_on_tray`).
    pub device: Option<u32>,
    pub port_label: String,
    /// NMX-T's `logical_state`.
    pub state: String,
    /// Which end NMX-T blames (`Local_phy`, `Remote_phy`, `Unknown`).
    pub down_blame: Option<String>,
}

/// One NVLink switch tray, as the GPU ports cabled to it see it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct SwitchTrayLinks {
    /// The tray's name in the link partner description (`sw06`).
    pub tray: String,
    /// Its ASICs seen (`U1`, `U2`), in order.
    pub asics: Vec<String>,
    pub links: u32,
    pub active: u32,
    /// Link-down events summed over its links (`None`: no counter given).
    pub link_down_events: Option<f64>,
    /// The links not active, by compute tray and GPU (bounded by the reader).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_active: Vec<NvlinkPortDown>,
}

impl SwitchTrayLinks {
    pub fn links_down(&self) -> u32 {
        self.links.saturating_sub(self.active)
    }

    /// Not one of its links is active: the tray is down.
    pub fn is_down(&self) -> bool {
        self.links > 0 && self.active == 0
    }
}

/// An NVLink domain's fabric as one NMX-T reading gives it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct NvlinkFabric {
    /// The chassis (rack) serial numbers the ports carry.
    pub chassis_ids: Vec<String>,
    /// GPU ports read, and ports of other devices (switch ASICs) counted but not mapped.
    pub gpu_ports: u32,
    pub other_ports: u32,
    /// GPU ports without a partner description the reader understands.
    pub unpartnered_gpu_ports: u32,
    /// Those of them not active (bounded by the reader): a link down whose switch tray
    /// the reading does not name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpartnered_down: Vec<NvlinkPortDown>,
    /// Switch trays in natural order of their names.
    pub switch_trays: Vec<SwitchTrayLinks>,
}

impl NvlinkFabric {
    /// Switch trays with a link not active.
    pub fn trays_degraded(&self) -> impl Iterator<Item = &SwitchTrayLinks> {
        self.switch_trays.iter().filter(|t| t.links_down() > 0)
    }
}

/// A checkpoint of a training job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Checkpoint {
    pub job_id: u64,
    /// The training step the save holds; `None` where nothing the framework wrote says
    /// (never a made-up 0). One save per path.
    pub step: Option<u64>,
    pub path: String,
    pub size_bytes: u64,
    pub started_ms: UnixMs,
    pub duration_ms: i64,
    pub complete: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_names_decode_every_bit_and_flag_unknown_ones() {
        let r =
            ThrottleReasons(ThrottleReasons::SW_POWER_CAP | ThrottleReasons::HW_THERMAL | 0x1000);
        assert_eq!(
            r.names(),
            vec!["SW power cap", "HW thermal", "unknown 0x1000"]
        );
        assert!(r.is_throttling());
        assert!(r.is_thermal());
    }

    #[test]
    fn idle_and_app_clocks_are_not_throttling() {
        let r = ThrottleReasons(ThrottleReasons::GPU_IDLE | ThrottleReasons::CLOCKS_SETTING);
        assert!(!r.is_throttling());
        assert_eq!(r.names(), vec!["GPU idle", "application clocks"]);
    }

    #[test]
    fn job_state_labels_round_trip() {
        for s in [
            JobState::Pending,
            JobState::Running,
            JobState::Requeued,
            JobState::Completing,
            JobState::Completed,
            JobState::Failed,
            JobState::Cancelled,
            JobState::Timeout,
            JobState::NodeFail,
        ] {
            assert_eq!(JobState::parse(s.label()), s);
        }
        assert_eq!(JobState::parse("weird"), JobState::Other);
    }

    #[test]
    fn a_domain_has_its_own_nodes_and_every_level_below_it() {
        let d = |name: &str, parent: Option<&str>, nodes: &[&str]| SwitchDomain {
            name: name.into(),
            kind: DomainKind::Leaf,
            parent: parent.map(String::from),
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            oversubscription: 1.0,
            block_sizes: Vec::new(),
        };
        let inv = Inventory {
            cluster: "c".into(),
            halls: Vec::new(),
            rows: vec![],
            racks: vec![],
            nodes: vec![],
            domains: vec![
                d("core", None, &[]),
                d("spine1", Some("core"), &[]),
                d("leaf1", Some("spine1"), &["n1", "n2"]),
                d("leaf2", Some("spine1"), &["n3"]),
                // A switch with nodes of its own and a child that repeats one of them.
                d("spine2", Some("core"), &["n4"]),
                d("leaf3", Some("spine2"), &["n4", "n5"]),
                // A parent cycle in a bad layout ends.
                d("x", Some("y"), &["n6"]),
                d("y", Some("x"), &["n7"]),
            ],
        };
        let of = |name: &str| {
            inv.domain_nodes(
                &inv.domains
                    .iter()
                    .find(|x| x.name == name)
                    .expect("domain")
                    .clone(),
            )
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>()
        };
        assert_eq!(of("leaf1"), ["n1", "n2"]);
        assert_eq!(of("spine1"), ["n1", "n2", "n3"]);
        assert_eq!(of("spine2"), ["n4", "n5"]);
        assert_eq!(of("core"), ["n1", "n2", "n3", "n4", "n5"]);
        assert_eq!(of("x"), ["n6", "n7"]);
    }
}
