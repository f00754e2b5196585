//! Wire types of the live overview and the snapshot/delta protocol spoken over
//! server-sent events.
//!
//! The server sends one `snapshot` event on connect, then one `delta` event per tick that
//! carries only what changed. A client that misses a delta (a sequence gap) discards its
//! state and waits for the snapshot that the server sends after any gap. Pure: no I/O.

use serde::{Deserialize, Serialize};

use crate::model::{Cooling, DomainKind, LeakState, NodeState, UnixMs};

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
}

/// One rack of the mini-map.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct RackTile {
    pub name: String,
    pub row: String,
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// Everything the live pages show, as of `at_ms`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Overview {
    pub cluster: String,
    /// Increases by one per tick; deltas name the sequence they lead to.
    pub seq: u64,
    /// When the readings behind these numbers were taken (source time: simulated time
    /// when the simulator is the source).
    pub at_ms: UnixMs,
    /// Wall-clock time at which the server published these numbers. Staleness is measured
    /// from this, never from `at_ms`, whose clock may not be the wall clock.
    pub published_ms: UnixMs,
    /// The live interval: a value older than two of these is stale.
    pub interval_ms: i64,
    pub summary: Summary,
    pub racks: Vec<RackTile>,
    /// Every node, in inventory order.
    #[serde(default)]
    pub nodes: Vec<NodeTile>,
    /// Multi-node switch domains (leaves, spines, blocks, NVLink domains of several nodes).
    #[serde(default)]
    pub domains: Vec<DomainTile>,
    #[serde(default)]
    pub thermal: Thermal,
    #[serde(default)]
    pub fragmented: Vec<FragmentedJob>,
    /// Per block topology; empty without Slurm blocks that have sizes.
    #[serde(default)]
    pub segments: Vec<SegmentFree>,
}

/// What changed between two overviews.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct OverviewDelta {
    /// The sequence this delta applies to.
    pub from_seq: u64,
    pub seq: u64,
    pub at_ms: UnixMs,
    pub published_ms: UnixMs,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    /// Racks whose tile changed, whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub racks: Vec<RackTile>,
    /// Nodes whose tile changed, by index, whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<(u32, NodeTile)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<(u32, DomainTile)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thermal: Option<Thermal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fragmented: Option<Vec<FragmentedJob>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<Vec<SegmentFree>>,
}

/// Why a delta could not be applied; the client must wait for a snapshot.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("delta from sequence {delta_from} does not follow sequence {have}")]
    Gap { have: u64, delta_from: u64 },
    #[error("delta names rack {0}, which the snapshot does not have")]
    UnknownRack(String),
    #[error("delta names node or domain {0} at a place the snapshot does not have")]
    UnknownEntry(String),
}

/// Entries of `next` that differ from `prev` at the same index (all of them when the
/// lists differ in length: the client then gets a gap-free full replacement only through
/// a snapshot, see `Overview::diff`).
fn changed<T: Clone + PartialEq>(prev: &[T], next: &[T]) -> Vec<(u32, T)> {
    next.iter()
        .enumerate()
        .filter(|(i, t)| prev.get(*i) != Some(*t))
        .map(|(i, t)| (i as u32, t.clone()))
        .collect()
}

impl Overview {
    /// Who draws `rack`'s power: each running job with its share of the rack's reporting
    /// nodes' power (a node's power split evenly between the jobs on it), most first.
    pub fn rack_job_power(&self, rack: &str) -> Vec<(u64, f64)> {
        let mut by_job: Vec<(u64, f64)> = Vec::new();
        for n in self.nodes.iter().filter(|n| n.rack == rack) {
            let Some(p) = n.power_watts.filter(|_| !n.jobs.is_empty()) else {
                continue;
            };
            let share = p / n.jobs.len() as f64;
            for &j in &n.jobs {
                match by_job.iter_mut().find(|(id, _)| *id == j) {
                    Some(e) => e.1 += share,
                    None => by_job.push((j, share)),
                }
            }
        }
        by_job.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        by_job
    }

    /// The jobs running on any of `nodes`, by id, each once.
    pub fn jobs_on(&self, nodes: &[String]) -> Vec<u64> {
        let mut jobs: Vec<u64> = self
            .nodes
            .iter()
            .filter(|n| nodes.contains(&n.name))
            .flat_map(|n| n.jobs.iter().copied())
            .collect();
        jobs.sort_unstable();
        jobs.dedup();
        jobs
    }

    /// The delta that turns `self` into `next`.
    pub fn diff(&self, next: &Overview) -> OverviewDelta {
        let racks = next
            .racks
            .iter()
            .filter(|r| self.racks.iter().find(|o| o.name == r.name) != Some(*r))
            .cloned()
            .collect();
        OverviewDelta {
            from_seq: self.seq,
            seq: next.seq,
            at_ms: next.at_ms,
            published_ms: next.published_ms,
            summary: (self.summary != next.summary).then(|| next.summary.clone()),
            racks,
            nodes: changed(&self.nodes, &next.nodes),
            domains: changed(&self.domains, &next.domains),
            thermal: (self.thermal != next.thermal).then(|| next.thermal.clone()),
            fragmented: (self.fragmented != next.fragmented).then(|| next.fragmented.clone()),
            segments: (self.segments != next.segments).then(|| next.segments.clone()),
        }
    }

    /// Whether a delta can carry the change to `next` (same nodes and domains in the same
    /// places); when not, the server sends a snapshot instead.
    pub fn same_shape(&self, next: &Overview) -> bool {
        self.nodes.len() == next.nodes.len()
            && self.domains.len() == next.domains.len()
            && self.racks.len() == next.racks.len()
            && self
                .nodes
                .iter()
                .zip(&next.nodes)
                .all(|(a, b)| a.name == b.name)
    }

    /// Applies a delta in place; on error `self` is unchanged.
    pub fn apply(&mut self, delta: &OverviewDelta) -> Result<(), ApplyError> {
        if delta.from_seq != self.seq {
            return Err(ApplyError::Gap {
                have: self.seq,
                delta_from: delta.from_seq,
            });
        }
        let mut idx = Vec::with_capacity(delta.racks.len());
        for r in &delta.racks {
            let i = self
                .racks
                .iter()
                .position(|o| o.name == r.name)
                .ok_or_else(|| ApplyError::UnknownRack(r.name.clone()))?;
            idx.push(i);
        }
        for (i, n) in &delta.nodes {
            if self.nodes.get(*i as usize).is_none_or(|o| o.name != n.name) {
                return Err(ApplyError::UnknownEntry(n.name.clone()));
            }
        }
        for (i, d) in &delta.domains {
            if self
                .domains
                .get(*i as usize)
                .is_none_or(|o| o.name != d.name)
            {
                return Err(ApplyError::UnknownEntry(d.name.clone()));
            }
        }
        for (i, r) in idx.into_iter().zip(&delta.racks) {
            self.racks[i] = r.clone();
        }
        for (i, n) in &delta.nodes {
            self.nodes[*i as usize] = n.clone();
        }
        for (i, d) in &delta.domains {
            self.domains[*i as usize] = d.clone();
        }
        if let Some(t) = &delta.thermal {
            self.thermal = t.clone();
        }
        if let Some(f) = &delta.fragmented {
            self.fragmented = f.clone();
        }
        if let Some(f) = &delta.segments {
            self.segments = f.clone();
        }
        if let Some(s) = &delta.summary {
            self.summary = s.clone();
        }
        self.seq = delta.seq;
        self.at_ms = delta.at_ms;
        self.published_ms = delta.published_ms;
        Ok(())
    }

    /// Whether these numbers were published more than two live intervals before `now_ms`
    /// (wall clock).
    pub fn is_stale(&self, now_ms: UnixMs) -> bool {
        now_ms - self.published_ms > 2 * self.interval_ms.max(1)
    }
}

/// An overview with the server's clock at the moment it was sent, so the client can tell
/// how old the data was on arrival without trusting its own clock against the server's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct LiveSnapshot {
    pub server_now_ms: UnixMs,
    pub overview: Overview,
}

/// Names of the SSE events on `/api/live`.
pub const EVENT_SNAPSHOT: &str = "snapshot";
pub const EVENT_DELTA: &str = "delta";

/// What names an overview for resuming `/api/live` (`?since=` and the events' ids, which a
/// browser sends back as `Last-Event-ID`): its sequence and when it was published, so a
/// restarted server, counting sequences from 1 again, cannot take one for its own.
pub fn resume_id(o: &Overview) -> String {
    format!("{}-{}", o.seq, o.published_ms)
}

/// The sequence and publication time of a [`resume_id`]; `None` for anything else.
pub fn parse_resume_id(s: &str) -> Option<(u64, UnixMs)> {
    let (seq, at) = s.trim().split_once('-')?;
    Some((seq.parse().ok()?, at.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tile(name: &str, power: f64) -> RackTile {
        RackTile {
            name: name.into(),
            row: "A".into(),
            position: 0,
            power_watts: Some(power),
            power_limit_watts: 40_000.0,
            inlet_celsius: Some(24.0),
            cooling: Cooling::Air,
            gpus_throttling: 0,
            nodes_unavailable: 0,
            nodes_not_reporting: 0,
            gpu_temp_max_celsius: None,
            inlet_limit_celsius: 35.0,
            jobs: Vec::new(),
            coolant: None,
            placement: None,
            shelves: None,
            fabric: None,
        }
    }

    fn node(name: &str, power: f64) -> NodeTile {
        NodeTile {
            name: name.into(),
            rack: "A01".into(),
            u_position: 1,
            u_height: 4,
            state: NodeState::Allocated,
            power_watts: Some(power),
            gpu_temp_max_celsius: Some(70.0),
            sm_active_mean: Some(0.8),
            gpus: 8,
            gpus_throttling: 0,
            jobs: vec![7],
            marks: 0,
        }
    }

    fn overview(seq: u64, p1: f64, p2: f64, running: u32) -> Overview {
        Overview {
            cluster: "sim".into(),
            seq,
            at_ms: 1000 * seq as i64,
            published_ms: 5000 + 1000 * seq as i64,
            interval_ms: 1000,
            summary: Summary {
                jobs_running: running,
                ..Summary::default()
            },
            racks: vec![tile("A01", p1), tile("A02", p2)],
            nodes: vec![node("gpu001", p1 / 8.0), node("gpu002", 5000.0)],
            ..Overview::default()
        }
    }

    #[test]
    fn delta_carries_only_what_changed_and_applies_exactly() {
        let a = overview(1, 30_000.0, 31_000.0, 5);
        let b = overview(2, 30_000.0, 32_500.0, 5);
        let d = a.diff(&b);
        assert_eq!(d.summary, None);
        assert_eq!(d.racks.len(), 1);
        assert_eq!(d.racks[0].name, "A02");
        assert!(d.nodes.is_empty(), "node power unchanged");
        let mut c = a.clone();
        c.apply(&d).expect("applies");
        assert_eq!(c, b);
        // A node's change travels by index and lands in its place.
        let e = overview(3, 40_000.0, 32_500.0, 5);
        let d = b.diff(&e);
        assert_eq!(d.nodes.len(), 1);
        assert_eq!(d.nodes[0].0, 0);
        c.apply(&d).expect("applies");
        assert_eq!(c, e);
        // Short keys on the wire.
        let json = serde_json::to_string(&d.nodes[0].1).expect("json");
        assert!(json.starts_with(r#"{"n":"gpu001","r":"A01""#), "{json}");
    }

    #[test]
    fn a_node_delta_for_another_shape_is_refused() {
        let a = overview(1, 1.0, 2.0, 1);
        let mut d = a.diff(&overview(2, 8.0, 2.0, 1));
        d.nodes[0].1.name = "gpu999".into();
        let mut x = a.clone();
        assert!(matches!(x.apply(&d), Err(ApplyError::UnknownEntry(_))));
        assert_eq!(x, a);
        assert!(a.same_shape(&overview(2, 8.0, 2.0, 1)));
        let mut other = overview(2, 8.0, 2.0, 1);
        other.nodes.pop();
        assert!(!a.same_shape(&other));
    }

    #[test]
    fn a_gap_is_refused_and_leaves_state_alone() {
        let a = overview(1, 1.0, 2.0, 1);
        let c = overview(3, 1.0, 2.0, 2);
        let d = overview(2, 1.0, 2.0, 1).diff(&c);
        let mut x = a.clone();
        assert_eq!(
            x.apply(&d),
            Err(ApplyError::Gap {
                have: 1,
                delta_from: 2
            })
        );
        assert_eq!(x, a);
    }

    #[test]
    fn unknown_rack_is_refused_atomically() {
        let a = overview(1, 1.0, 2.0, 1);
        let mut d = a.diff(&overview(2, 5.0, 2.0, 9));
        d.racks.push(tile("Z99", 1.0));
        let mut x = a.clone();
        assert!(matches!(x.apply(&d), Err(ApplyError::UnknownRack(_))));
        assert_eq!(x, a);
    }

    #[test]
    fn staleness_is_two_intervals() {
        let a = overview(5, 1.0, 2.0, 1);
        assert!(!a.is_stale(a.published_ms + 2000));
        assert!(a.is_stale(a.published_ms + 2001));
    }

    #[test]
    fn severity_from_power_against_limit() {
        assert_eq!(tile("x", 30_000.0).severity(), Severity::Ok);
        assert_eq!(tile("x", 37_000.0).severity(), Severity::Warning);
        assert_eq!(tile("x", 41_000.0).severity(), Severity::Critical);
        let mut t = tile("x", 10_000.0);
        t.gpus_throttling = 3;
        assert_eq!(t.severity(), Severity::Warning);
        t.gpus_throttling = 0;
        t.nodes_not_reporting = 1;
        assert_eq!(t.severity(), Severity::Warning);
        t.power_watts = None;
        assert_eq!(t.load_ratio(), None);
    }

    #[test]
    fn resume_ids_round_trip_and_refuse_anything_else() {
        let o = Overview {
            seq: 57,
            published_ms: 1_795_968_000_123,
            ..Overview::default()
        };
        assert_eq!(resume_id(&o), "57-1795968000123");
        assert_eq!(
            parse_resume_id(&resume_id(&o)),
            Some((57, 1_795_968_000_123))
        );
        for bad in ["", "57", "57-", "-1", "x-1", "57-1-2", "57-1.5"] {
            assert_eq!(parse_resume_id(bad), None, "{bad}");
        }
    }
}
