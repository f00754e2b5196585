//! The scrape source of telemetry: every node's exporters (dcgm-exporter per GPU, and a
//! BMC exporter for node power and inlet temperature), fetched with bounded concurrency,
//! decoded, and kept as the latest reading per node. `readings` assembles what aggregation
//! needs from the fresh ones plus the scheduler's state; a node not refreshed for two
//! scrape intervals contributes nothing (shown as missing, never as zero).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};

use app::model::{
    CoolantReading, GpuReading, Inventory, Job, LeakState, NodeState, RackReading, UnixMs,
};

use crate::placement::GpuPlace;
use crate::telemetry::nvlink_fabric::{self, FabricReader};
use crate::telemetry::promql::{PromError, PromQl};
pub use crate::telemetry::scrape::RoundStats;
use crate::telemetry::scrape::{Client, ScrapeError, TargetHealth};
use crate::telemetry::shelves::{self, ShelfReader};
use crate::telemetry::Readings;
use crate::telemetry::{dcgm, exposition};

/// Which metrics of the BMC/PDU exporter carry node power, inlet temperature and, on
/// liquid-cooled trays, the coolant loop: a site maps its own exporter's names here
/// (defaults: ipmi_exporter's, its generic sensors for flow and leak state).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PowerMapping {
    pub power_metric: String,
    /// The label that picks the power sensor, if the metric has several.
    pub power_label: Option<(String, String)>,
    pub inlet_metric: String,
    /// The label that picks the inlet sensor among the temperature sensors, if any.
    pub inlet_label: Option<(String, String)>,
    /// Coolant supply (into the tray) and return temperatures, in °C.
    pub coolant_supply_metric: String,
    pub coolant_supply_label: Option<(String, String)>,
    pub coolant_return_metric: String,
    pub coolant_return_label: Option<(String, String)>,
    /// Coolant flow through the tray, in litres per minute.
    pub coolant_flow_metric: String,
    pub coolant_flow_label: Option<(String, String)>,
    /// Leak detector state: 0 OK, 1 warning, 2 critical (ipmi_exporter's sensor states,
    /// Redfish's `DetectorState`); the worst of the matching series counts.
    pub leak_metric: String,
    pub leak_label: Option<(String, String)>,
    /// A rack's power shelves, from its power management controller's Redfish exporter
    /// (defaults: redfish_exporter's): each supply's health (1 OK, 2 Warning, 3 Critical),
    /// state (1 Enabled, 7 Absent, ...), capacity and output in watts, the shelf named by
    /// `shelf_label` and the supply within it by `supply_label`.
    pub shelf_health_metric: String,
    pub shelf_state_metric: String,
    pub shelf_capacity_metric: String,
    pub shelf_output_metric: String,
    pub shelf_label: String,
    pub supply_label: String,
}

impl Default for PowerMapping {
    fn default() -> Self {
        let name = |v: &str| Some(("name".to_string(), v.to_string()));
        PowerMapping {
            power_metric: "ipmi_dcmi_power_consumption_watts".into(),
            power_label: None,
            inlet_metric: "ipmi_temperature_celsius".into(),
            inlet_label: name("Inlet Temp"),
            coolant_supply_metric: "ipmi_temperature_celsius".into(),
            coolant_supply_label: name("Coolant Supply Temp"),
            coolant_return_metric: "ipmi_temperature_celsius".into(),
            coolant_return_label: name("Coolant Return Temp"),
            coolant_flow_metric: "ipmi_sensor_value".into(),
            coolant_flow_label: name("Coolant Flow"),
            leak_metric: "ipmi_sensor_state".into(),
            leak_label: name("Leak Detector"),
            shelf_health_metric: shelves::HEALTH_METRIC.into(),
            shelf_state_metric: shelves::STATE_METRIC.into(),
            shelf_capacity_metric: shelves::CAPACITY_METRIC.into(),
            shelf_output_metric: shelves::OUTPUT_METRIC.into(),
            shelf_label: shelves::SHELF_LABEL.into(),
            supply_label: shelves::SUPPLY_LABEL.into(),
        }
    }
}

impl PowerMapping {
    /// Every (metric, label picker) the mapping reads, for PromQL selectors and for
    /// `gantry inspect metrics`: power, inlet, supply, return, flow, leak.
    pub fn pickers(&self) -> [(&str, &Option<(String, String)>); 6] {
        [
            (&self.power_metric, &self.power_label),
            (&self.inlet_metric, &self.inlet_label),
            (&self.coolant_supply_metric, &self.coolant_supply_label),
            (&self.coolant_return_metric, &self.coolant_return_label),
            (&self.coolant_flow_metric, &self.coolant_flow_label),
            (&self.leak_metric, &self.leak_label),
        ]
    }

    /// The names the rack power controller's shelves are read by.
    pub fn shelf_names(&self) -> shelves::ShelfNames<'_> {
        shelves::ShelfNames {
            metrics: [
                &self.shelf_health_metric,
                &self.shelf_state_metric,
                &self.shelf_capacity_metric,
                &self.shelf_output_metric,
            ],
            shelf_label: &self.shelf_label,
            supply_label: &self.supply_label,
        }
    }
}

/// What a BMC/PDU exporter's text says, through `mapping`.
#[derive(Debug)]
pub struct BmcReading {
    pub power_watts: Option<f64>,
    pub inlet_celsius: Option<f64>,
    pub coolant: CoolantReading,
    pub report: exposition::Report,
}

/// Puts one mapped sample (`which`: the index in [`PowerMapping::pickers`]) into `out`:
/// the last finite one of each reading, the worst leak state.
fn bmc_sample(which: usize, v: f64, out: &mut (Option<f64>, Option<f64>, CoolantReading)) {
    if !v.is_finite() {
        return;
    }
    match which {
        0 => out.0 = Some(v),
        1 => out.1 = Some(v),
        2 => out.2.supply_celsius = Some(v),
        3 => out.2.return_celsius = Some(v),
        4 if v >= 0.0 => out.2.flow_lpm = Some(v),
        5 => {
            if let Some(l) = LeakState::from_sensor(v) {
                out.2.leak = Some(out.2.leak.map_or(l, |o| o.max(l)));
            }
        }
        _ => {}
    }
}

/// Reads node power, inlet temperature and the coolant loop from a BMC or PDU exporter's
/// text: the last finite sample of each mapped metric whose label (if the mapping names
/// one) matches; of leak detectors, the worst state.
pub fn read_bmc(body: &[u8], m: &PowerMapping) -> BmcReading {
    let mut out = (None, None, CoolantReading::default());
    let pickers = m.pickers();
    let report = exposition::parse(body, |s| {
        for (i, (metric, label)) in pickers.iter().enumerate() {
            let picked = s.name == *metric
                && label
                    .as_ref()
                    .is_none_or(|(k, v)| s.label(k) == Some(v.as_str()));
            if picked {
                bmc_sample(i, s.value, &mut out);
            }
        }
    });
    BmcReading {
        power_watts: out.0,
        inlet_celsius: out.1,
        coolant: out.2,
        report,
    }
}

/// The sum of node_exporter's InfiniBand data counters (received and sent, every port),
/// if it has any.
pub fn read_ib_total(body: &[u8]) -> (Option<f64>, exposition::Report) {
    let (ib, report) = read_ib(body);
    (ib.bytes_total, report)
}

/// What Gantry reads from node_exporter's InfiniBand collector, summed over a node's ports.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IbCounters {
    /// Data bytes received plus sent.
    pub bytes_total: Option<f64>,
    /// Times a link failed to recover from an error and went down.
    pub link_downed_total: Option<u64>,
}

/// The counters of a node_exporter body.
pub fn read_ib(body: &[u8]) -> (IbCounters, exposition::Report) {
    let mut out = IbCounters::default();
    let report = exposition::parse_classified(
        body,
        |name| {
            if IB_METRICS.contains(&name) {
                Some(true)
            } else {
                (name == IB_LINK_DOWNED).then_some(false)
            }
        },
        |bytes, s| {
            if s.value.is_finite() && s.value >= 0.0 {
                if bytes {
                    *out.bytes_total.get_or_insert(0.0) += s.value;
                } else {
                    // A counter of events: whole, and far below 2^53.
                    *out.link_downed_total.get_or_insert(0) += s.value as u64;
                }
            }
        },
    );
    (out, report)
}

/// One node's exporters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeTarget {
    pub node: String,
    pub gpu_url: String,
    pub bmc_url: String,
    /// node_exporter, where configured: InfiniBand port counters.
    pub node_url: Option<String>,
}

impl NodeTarget {
    /// Every exporter URL of the node, with what it is.
    fn urls(&self) -> impl Iterator<Item = (&String, Kind)> {
        [(&self.gpu_url, Kind::Gpu), (&self.bmc_url, Kind::Bmc)]
            .into_iter()
            .chain(self.node_url.iter().map(|u| (u, Kind::Node)))
    }
}

/// The InfiniBand port counters Gantry reads from node_exporter (its `infiniband`
/// collector): bytes received and sent, per HCA port.
pub const IB_METRICS: [&str; 2] = [
    "node_infiniband_port_data_received_bytes_total",
    "node_infiniband_port_data_transmitted_bytes_total",
];

/// node_exporter's count of link-down events per HCA port (`link_downed` in sysfs).
pub const IB_LINK_DOWNED: &str = "node_infiniband_link_downed_total";

/// The link-down counters through a PromQL store, summed over each node's ports.
pub const IB_LINK_DOWNED_PROMQL: &str =
    "sum without (device, port) (node_infiniband_link_downed_total)";

/// The same counters through a PromQL store: bytes per second received and sent, summed
/// over each node's HCA ports. The window spans several scrapes at any usual interval
/// (15 s to 30 s), so one missed scrape does not blank a node.
/// (Two sums added, not one over both names: without their names the two counters of a
/// port have the same labels, which PromQL refuses in one vector.)
pub const IB_RATE_PROMQL: &str = "sum without (device, port) (rate(node_infiniband_port_data_received_bytes_total[2m])) + sum without (device, port) (rate(node_infiniband_port_data_transmitted_bytes_total[2m]))";

/// Queries per PromQL round (counted as targets in the scrape metrics; the NVLink
/// fabric's three, asked at most every [`FABRIC_MIN_INTERVAL`], count as one).
pub const PROMQL_QUERIES: usize = 8;

/// Adds each node's node_exporter URL from `template` (`{node}` is the node name).
pub fn with_node_exporter(mut targets: Vec<NodeTarget>, template: Option<&str>) -> Vec<NodeTarget> {
    if let Some(t) = template {
        for n in &mut targets {
            n.node_url = Some(t.replace("{node}", &n.node));
        }
    }
    targets
}

/// A rack's exporter: its power controller's (its power shelves, [`Kind::Shelf`]) or its
/// NVLink domain's NMX-T ([`Kind::Fabric`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RackTarget {
    pub rack: String,
    pub url: String,
    pub kind: Kind,
}

/// Targets for the racks of `inv` that have power shelves (from `shelf_template`) and
/// NVLink switch trays (from `fabric_template`); `{rack}` is the rack name.
pub fn rack_targets(
    inv: &Inventory,
    shelf_template: Option<&str>,
    fabric_template: Option<&str>,
) -> Vec<RackTarget> {
    let mut out = Vec::new();
    for (t, kind) in [
        (shelf_template, Kind::Shelf),
        (fabric_template, Kind::Fabric),
    ] {
        let Some(t) = t else { continue };
        out.extend(
            inv.racks
                .iter()
                .filter(|r| match kind {
                    Kind::Shelf => r.power_shelves.is_some(),
                    _ => r.switch_trays.is_some(),
                })
                .map(|r| RackTarget {
                    rack: r.name.clone(),
                    url: t.replace("{rack}", &r.name),
                    kind,
                }),
        );
    }
    out
}

/// An NMX-T reading is a whole NVLink domain's ports (an NVL72's 1,296 GPU ports and as
/// many of its switches): it is read at most this often, however short the scrape
/// interval, and stays fresh for three of these.
pub const FABRIC_MIN_INTERVAL: Duration = Duration::from_secs(5);

/// Targets for every node of `inv` from URL templates in which `{node}` is the node name.
pub fn targets(inv: &Inventory, gpu_template: &str, bmc_template: &str) -> Vec<NodeTarget> {
    inv.nodes
        .iter()
        .map(|n| NodeTarget {
            node: n.name.clone(),
            gpu_url: gpu_template.replace("{node}", &n.name),
            bmc_url: bmc_template.replace("{node}", &n.name),
            node_url: None,
        })
        .collect()
}

#[derive(Clone, Debug, Default)]
struct NodeLatest {
    gpus_at_ms: Option<UnixMs>,
    gpus: Vec<GpuReading>,
    /// Where DCGM places the node's GPUs (empty where it does not say).
    places: Vec<GpuPlace>,
    /// The node's NVSwitches, where its exporter reports them.
    switches: Vec<app::model::SwitchReading>,
    bmc_at_ms: Option<UnixMs>,
    power_watts: Option<f64>,
    inlet_celsius: Option<f64>,
    coolant: CoolantReading,
    node_at_ms: Option<UnixMs>,
    /// The InfiniBand counters (received plus sent, over every port) at the last scrape.
    ib_total: Option<(f64, UnixMs)>,
    /// Their rate between the last two scrapes.
    ib_bytes_per_second: Option<f64>,
    /// Link-down events over every port, at the last scrape.
    ib_link_downed: Option<u64>,
}

/// A rack's last shelf and NVLink fabric readings.
#[derive(Clone, Debug, Default)]
struct RackLatest {
    at_ms: Option<UnixMs>,
    shelves: Vec<app::model::ShelfReading>,
    fabric_at_ms: Option<UnixMs>,
    fabric: Option<nvlink_fabric::Fabric>,
}

/// The scrape source's state.
pub struct Ingest {
    client: Client,
    targets: Vec<NodeTarget>,
    rack_targets: Vec<RackTarget>,
    rack_latest: HashMap<String, RackLatest>,
    mapping: PowerMapping,
    concurrency: usize,
    latest: HashMap<String, NodeLatest>,
    health: BTreeMap<String, TargetHealth>,
    /// With jitter, each target keeps its own phase in the interval (a stable hash of its
    /// URL), so scrapes spread over the interval instead of arriving all at once.
    jitter: bool,
    /// When the first round ran; first scrapes are due at this plus each target's phase.
    started_ms: Option<UnixMs>,
    /// The PromQL InfiniBand query failed last round (logged when it starts failing).
    ib_failing: bool,
    /// When the PromQL NVLink fabric queries last ran.
    fabric_queried_ms: Option<UnixMs>,
}

/// A stable offset in `[0, interval)` for `url` (FNV-1a).
fn phase_ms(url: &str, interval: Duration) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in url.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (h % (interval.as_millis().max(1) as u64)) as i64
}

/// Which exporter of a node a target is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gpu,
    Bmc,
    Node,
    /// A rack's power controller (the owner is the rack, not a node).
    Shelf,
    /// A rack's NVLink domain's NMX-T (the owner is the rack).
    Fabric,
}

/// The scrapes of one round, planned from an [`Ingest`] and fetched without it.
pub struct Round {
    client: Client,
    concurrency: usize,
    jobs: Vec<(String, String, Kind)>,
}

impl Round {
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Fetches every planned target, `concurrency` at a time; a slow or failing target
    /// holds up only its own slot.
    pub async fn fetch(self) -> Vec<Fetched> {
        let client = self.client;
        stream::iter(self.jobs)
            .map(|(node, url, kind)| {
                let client = client.clone();
                async move {
                    let t = Instant::now();
                    let result = client.fetch(&url).await;
                    Fetched {
                        node,
                        url,
                        kind,
                        result,
                        took: t.elapsed(),
                    }
                }
            })
            .buffer_unordered(self.concurrency)
            .collect()
            .await
    }
}

/// One target's answer in a round.
pub struct Fetched {
    node: String,
    url: String,
    kind: Kind,
    result: Result<Vec<u8>, ScrapeError>,
    took: Duration,
}

impl Fetched {
    /// An answer (the body, or why there is none) of `node`'s `kind` exporter at `url`, as a
    /// round would have fetched it: for tests and for replaying recorded scrapes.
    pub fn answer(node: &str, url: &str, kind: Kind, result: Result<Vec<u8>, ScrapeError>) -> Self {
        Fetched {
            node: node.into(),
            url: url.into(),
            kind,
            result,
            took: Duration::ZERO,
        }
    }
}

impl Ingest {
    pub fn new(
        client: Client,
        targets: Vec<NodeTarget>,
        mapping: PowerMapping,
        concurrency: usize,
    ) -> Ingest {
        let health = targets
            .iter()
            .flat_map(NodeTarget::urls)
            .map(|(u, _)| (u.clone(), TargetHealth::new(u)))
            .collect();
        Ingest {
            client,
            targets,
            rack_targets: Vec::new(),
            rack_latest: HashMap::new(),
            mapping,
            concurrency: concurrency.max(1),
            latest: HashMap::new(),
            health,
            jitter: false,
            started_ms: None,
            ib_failing: false,
            fabric_queried_ms: None,
        }
    }

    /// Replaces the targets (the scheduler's node list changed). Health and latest readings
    /// of targets that remain are kept; those of removed ones are dropped.
    pub fn set_targets(&mut self, targets: Vec<NodeTarget>) {
        let keep: std::collections::HashSet<&str> = targets
            .iter()
            .flat_map(NodeTarget::urls)
            .map(|(u, _)| u.as_str())
            .collect();
        let racks: std::collections::HashSet<&str> =
            self.rack_targets.iter().map(|t| t.url.as_str()).collect();
        self.health
            .retain(|u, _| keep.contains(u.as_str()) || racks.contains(u.as_str()));
        for t in &targets {
            for (u, _) in t.urls() {
                self.health
                    .entry(u.clone())
                    .or_insert_with(|| TargetHealth::new(u));
            }
        }
        let nodes: std::collections::HashSet<&str> =
            targets.iter().map(|t| t.node.as_str()).collect();
        self.latest.retain(|n, _| nodes.contains(n.as_str()));
        self.targets = targets;
    }

    /// Replaces the racks' targets (power controllers, NMX-T), keeping the health and
    /// readings of those that remain.
    pub fn set_rack_targets(&mut self, targets: Vec<RackTarget>) {
        let old: std::collections::HashSet<String> =
            self.rack_targets.iter().map(|t| t.url.clone()).collect();
        let new: std::collections::HashSet<&str> = targets.iter().map(|t| t.url.as_str()).collect();
        self.health
            .retain(|u, _| !old.contains(u) || new.contains(u.as_str()));
        for t in &targets {
            self.health
                .entry(t.url.clone())
                .or_insert_with(|| TargetHealth::new(&t.url));
        }
        let racks: std::collections::HashSet<&str> =
            targets.iter().map(|t| t.rack.as_str()).collect();
        self.rack_latest.retain(|r, _| racks.contains(r.as_str()));
        self.rack_targets = targets;
    }

    /// With racks' power controller targets.
    pub fn with_rack_targets(mut self, targets: Vec<RackTarget>) -> Ingest {
        self.set_rack_targets(targets);
        self
    }

    /// Spreads each target's scrapes over the interval (for real sites; off by default).
    pub fn with_jitter(mut self) -> Ingest {
        self.jitter = true;
        self
    }

    /// Scrapes every target once, `concurrency` at a time; a slow or failing target holds
    /// up only its own slot. `now_ms` stamps what arrives.
    pub async fn scrape_all(&mut self, now_ms: UnixMs) -> RoundStats {
        self.scrape_due(now_ms, Duration::ZERO).await
    }

    /// Scrapes the targets that are due at `now_ms` for a round `interval`: healthy ones
    /// every round, failing ones after their backoff (doubling per failure, up to
    /// [`crate::telemetry::scrape::MAX_BACKOFF`]), so a dead exporter costs one attempt now and then.
    pub async fn scrape_due(&mut self, now_ms: UnixMs, interval: Duration) -> RoundStats {
        let round = self.plan(now_ms, interval);
        let results = round.fetch().await;
        self.apply(results, now_ms)
    }

    /// The scrapes due at `now_ms`: what [`Round::fetch`] fetches without the `Ingest`
    /// (so the scrape task holds no lock while it waits on exporters).
    pub fn plan(&mut self, now_ms: UnixMs, interval: Duration) -> Round {
        let health = &self.health;
        let jitter = self.jitter;
        let started = *self.started_ms.get_or_insert(now_ms);
        let due = |url: &str, kind: Kind| {
            let interval = if kind == Kind::Fabric {
                interval.max(FABRIC_MIN_INTERVAL)
            } else {
                interval
            };
            match health.get(url) {
                None => true,
                Some(h) if jitter => match h.last_attempt_ms {
                    // First scrape at this target's phase after the first round.
                    None => now_ms >= started + phase_ms(url, interval),
                    Some(_) => h.next_due_ms(interval) <= now_ms,
                },
                // Every round while healthy (an NMX-T reading no more often than its
                // interval); after failures, past the backoff.
                Some(h) if kind == Kind::Fabric => h.next_due_ms(interval) <= now_ms,
                Some(h) => h.consecutive_failures == 0 || h.next_due_ms(interval) <= now_ms,
            }
        };
        let jobs: Vec<(String, String, Kind)> = self
            .targets
            .iter()
            .flat_map(|t| t.urls().map(|(u, k)| (t.node.clone(), u.clone(), k)))
            .chain(
                self.rack_targets
                    .iter()
                    .map(|t| (t.rack.clone(), t.url.clone(), t.kind)),
            )
            .filter(|(_, url, kind)| due(url, *kind))
            .collect();
        Round {
            client: self.client.clone(),
            concurrency: self.concurrency,
            jobs,
        }
    }

    /// Takes a round's answers: decodes bodies into the latest readings, records health.
    pub fn apply(&mut self, results: Vec<Fetched>, now_ms: UnixMs) -> RoundStats {
        let mut stats = RoundStats {
            targets: results.len(),
            ..RoundStats::default()
        };
        for Fetched {
            node,
            url,
            kind,
            result,
            took,
        } in results
        {
            let outcome = match result {
                Ok(body) => {
                    let (samples, errors) = self.take(&node, kind, &body, now_ms);
                    stats.samples += samples;
                    stats.line_errors += errors;
                    Ok(samples)
                }
                Err(e) => {
                    stats.failed += 1;
                    Err(e)
                }
            };
            // A target removed while its scrape was in flight has no health any more.
            if let Some(h) = self.health.get_mut(&url) {
                match &outcome {
                    Ok(n) => h.record(now_ms, took, Ok(*n)),
                    Err(e) => h.record(now_ms, took, Err(e)),
                }
            }
        }
        stats
    }

    /// Decodes one body into the node's (or, for a power controller, the rack's) latest
    /// readings; returns (samples, line errors).
    fn take(&mut self, node: &str, kind: Kind, body: &[u8], now_ms: UnixMs) -> (usize, usize) {
        if kind == Kind::Shelf {
            let (read, report) = shelves::read(body, &self.mapping.shelf_names());
            let l = self.rack_latest.entry(node.to_string()).or_default();
            l.shelves = read;
            l.at_ms = Some(now_ms);
            return (report.samples, report.error_count);
        }
        if kind == Kind::Fabric {
            let (read, report) = nvlink_fabric::read(body);
            let l = self.rack_latest.entry(node.to_string()).or_default();
            l.fabric = Some(read);
            l.fabric_at_ms = Some(now_ms);
            return (report.samples, report.error_count);
        }
        let latest = self.latest.entry(node.to_string()).or_default();
        match kind {
            Kind::Gpu => {
                let scrape = dcgm::decode(body, node);
                // The exporter's own host label may differ (a pod name); the target is the node.
                latest.gpus = scrape
                    .gpus
                    .iter()
                    .filter(|g| g.mig_instance.is_none())
                    .map(|g| GpuReading {
                        node: node.to_string(),
                        ..g.to_reading()
                    })
                    .collect();
                latest.places = places_of(&scrape.gpus);
                latest.switches = scrape.switches.iter().map(|x| x.to_reading()).collect();
                latest.gpus_at_ms = Some(now_ms);
                (scrape.samples, scrape.line_errors)
            }
            Kind::Bmc => {
                let b = read_bmc(body, &self.mapping);
                latest.power_watts = b.power_watts;
                latest.inlet_celsius = b.inlet_celsius;
                latest.coolant = b.coolant;
                latest.bmc_at_ms = Some(now_ms);
                (b.report.samples, b.report.error_count)
            }
            Kind::Shelf | Kind::Fabric => (0, 0),
            Kind::Node => {
                let (ib, report) = read_ib(body);
                let now = ib.bytes_total.map(|t| (t, now_ms));
                latest.ib_link_downed = ib.link_downed_total;
                latest.ib_bytes_per_second = counter_rate(latest.ib_total, now);
                latest.ib_total = now;
                latest.node_at_ms = Some(now_ms);
                (report.samples, report.error_count)
            }
        }
    }

    /// Fills the latest readings from a PromQL store instead of scraping: one query for
    /// every DCGM field, one for node power, one for inlet temperature, one for InfiniBand
    /// traffic (node_exporter's counters as a rate, where the store has them; none is not
    /// an error, and a failure of this query alone leaves the rest of the round standing,
    /// counted as one failed target). GPUs are placed by
    /// their exporter's `Hostname` label, else by the `instance` host; BMC series by a
    /// `node`/`hostname` label, else by the `instance` host.
    pub async fn query_promql(
        &mut self,
        prom: &PromQl,
        now_ms: UnixMs,
    ) -> Result<RoundStats, PromError> {
        let gpu_series = prom
            .query(
                &format!("{{__name__=~\"{}\"}}", dcgm::metric_names_regex()),
                None,
            )
            .await?;
        let selector = |metric: &str, label: &Option<(String, String)>| match label {
            Some((k, v)) => format!(
                "{metric}{{{k}=\"{}\"}}",
                v.replace('\\', "\\\\").replace('"', "\\\"")
            ),
            None => metric.to_string(),
        };
        let m = self.mapping.clone();
        let power = prom
            .query(&selector(&m.power_metric, &m.power_label), None)
            .await?;
        let inlet = prom
            .query(&selector(&m.inlet_metric, &m.inlet_label), None)
            .await?;
        // The coolant loop's four readings in one query: an air-cooled cluster has none of
        // them, which is no error; a failure of this query loses only them.
        let coolant_selector = m.pickers()[2..]
            .iter()
            .map(|(metric, label)| selector(metric, label))
            .collect::<Vec<_>>()
            .join(" or ");
        let (coolant, coolant_failed) = match prom.query(&coolant_selector, None).await {
            Ok(c) => (c, 0),
            Err(e) => {
                tracing::warn!(error = %e, "PromQL coolant query failed; coolant shows as missing");
                (Vec::new(), 1)
            }
        };
        let (ib, ib_failed) = match prom.query(IB_RATE_PROMQL, None).await {
            Ok(ib) => {
                self.ib_failing = false;
                (ib, 0)
            }
            Err(e) => {
                if !self.ib_failing {
                    tracing::warn!(error = %e, "PromQL InfiniBand query failed; traffic shows as missing");
                }
                self.ib_failing = true;
                (Vec::new(), 1)
            }
        };

        // Like traffic, link-down counters are optional: a failure loses only them.
        let (downs, downs_failed) = match prom.query(IB_LINK_DOWNED_PROMQL, None).await {
            Ok(d) => (d, 0),
            Err(e) => {
                if !self.ib_failing {
                    tracing::warn!(error = %e, "PromQL InfiniBand link query failed");
                }
                (Vec::new(), 1)
            }
        };

        // Racks' power shelves: optional too. A series names its rack by a `rack` label,
        // else by its `instance` host (the power controller the exporter reads).
        let shelf_selector = format!(
            "{{__name__=~\"{}\"}}",
            m.shelf_names()
                .metrics
                .iter()
                .map(|n| regex_escape(n))
                .collect::<Vec<_>>()
                .join("|")
        );
        let (shelf_series, shelves_failed) = match prom.query(&shelf_selector, None).await {
            Ok(x) => (x, 0),
            Err(e) => {
                tracing::warn!(error = %e, "PromQL power shelf query failed; shelves show as not reporting");
                (Vec::new(), 1)
            }
        };
        let mut shelf_readers: HashMap<String, ShelfReader> = HashMap::new();
        for s in &shelf_series {
            let Some(&(_, v)) = s.points.last() else {
                continue;
            };
            let rack = s
                .labels
                .get("rack")
                .cloned()
                .unwrap_or_else(|| s.instance_host().to_string());
            shelf_readers.entry(rack).or_default().push(
                &m.shelf_names(),
                s.name(),
                |k| s.labels.get(k).map(String::as_str),
                v,
            );
        }
        for (rack, reader) in shelf_readers {
            let l = self.rack_latest.entry(rack).or_default();
            l.shelves = reader.finish();
            l.at_ms = Some(now_ms);
        }

        // NVLink domains (NMX-T): optional too, and asked at most every
        // FABRIC_MIN_INTERVAL (between, the last answer stays as fresh as it is).
        let fabric_due = self
            .fabric_queried_ms
            .is_none_or(|t| now_ms - t >= FABRIC_MIN_INTERVAL.as_millis() as i64);
        let (mut fabric_samples, mut fabric_failed) = (0, 0);
        if fabric_due {
            self.fabric_queried_ms = Some(now_ms);
            match self.query_fabric(prom, now_ms).await {
                Ok(n) => fabric_samples = n,
                Err(e) => {
                    tracing::warn!(error = %e, "PromQL NVLink fabric query failed; switch trays show as not reporting");
                    fabric_failed = 1;
                }
            }
        }

        let mut decoder = dcgm::Decoder::default();
        for s in &gpu_series {
            if let Some(sample) = s.last_sample() {
                decoder.push(&sample, s.instance_host());
            }
        }
        let decoded = decoder.finish();
        let mut by_node: HashMap<String, Vec<&dcgm::DcgmGpu>> = HashMap::new();
        for g in decoded.gpus.iter().filter(|g| g.mig_instance.is_none()) {
            by_node.entry(g.host.clone()).or_default().push(g);
        }
        let mut switches: HashMap<&str, Vec<app::model::SwitchReading>> = HashMap::new();
        for sw in &decoded.switches {
            switches.entry(&sw.host).or_default().push(sw.to_reading());
        }
        for (node, gpus) in by_node {
            let sw = switches.remove(node.as_str()).unwrap_or_default();
            let l = self.latest.entry(node).or_default();
            l.gpus = gpus.iter().map(|g| g.to_reading()).collect();
            l.places = gpus.iter().filter_map(|g| g.place.clone()).collect();
            l.switches = sw;
            l.gpus_at_ms = Some(now_ms);
        }
        let node_of = |s: &crate::telemetry::promql::Series| -> String {
            ["node", "hostname", "Hostname"]
                .iter()
                .find_map(|k| s.labels.get(*k))
                .cloned()
                .unwrap_or_else(|| s.instance_host().to_string())
        };
        for s in &power {
            if let Some(&(_, v)) = s.points.last().filter(|(_, v)| v.is_finite()) {
                let l = self.latest.entry(node_of(s)).or_default();
                l.power_watts = Some(v);
                l.bmc_at_ms = Some(now_ms);
            }
        }
        for s in &inlet {
            if let Some(&(_, v)) = s.points.last().filter(|(_, v)| v.is_finite()) {
                let l = self.latest.entry(node_of(s)).or_default();
                l.inlet_celsius = Some(v);
                l.bmc_at_ms = Some(now_ms);
            }
        }
        let pickers = m.pickers();
        let mut coolant_by_node: HashMap<String, (Option<f64>, Option<f64>, CoolantReading)> =
            HashMap::new();
        for s in &coolant {
            let Some(&(_, v)) = s.points.last() else {
                continue;
            };
            let name = s.labels.get("__name__").map(String::as_str).unwrap_or("");
            let which = pickers
                .iter()
                .enumerate()
                .skip(2)
                .find(|(_, (metric, label))| {
                    name == *metric
                        && label
                            .as_ref()
                            .is_none_or(|(k, want)| s.labels.get(k) == Some(want))
                });
            if let Some((i, _)) = which {
                bmc_sample(i, v, coolant_by_node.entry(node_of(s)).or_default());
            }
        }
        for (node, (_, _, c)) in coolant_by_node {
            let l = self.latest.entry(node).or_default();
            l.coolant = c;
            l.bmc_at_ms = Some(now_ms);
        }
        for s in &ib {
            if let Some(&(_, v)) = s.points.last().filter(|(_, v)| v.is_finite() && *v >= 0.0) {
                let l = self.latest.entry(node_of(s)).or_default();
                l.ib_bytes_per_second = Some(v);
                l.node_at_ms = Some(now_ms);
            }
        }
        for s in &downs {
            if let Some(&(_, v)) = s.points.last().filter(|(_, v)| v.is_finite() && *v >= 0.0) {
                let l = self.latest.entry(node_of(s)).or_default();
                l.ib_link_downed = Some(v as u64);
                l.node_at_ms = Some(now_ms);
            }
        }
        Ok(RoundStats {
            targets: PROMQL_QUERIES,
            failed: ib_failed + downs_failed + coolant_failed + shelves_failed + fabric_failed,
            samples: fabric_samples
                + gpu_series.len()
                + shelf_series.len()
                + power.len()
                + inlet.len()
                + coolant.len()
                + ib.len()
                + downs.len(),
            line_errors: 0,
        })
    }

    /// Each NVLink domain's fabric from a PromQL store's NMX-T series, in three queries that
    /// keep the answer small whatever the domain's size: the GPU ports active counted per
    /// switch ASIC (`link_partner_description`), the GPU ports not active one by one, and
    /// the link-down events summed per switch ASIC. A series names its rack by a `rack`
    /// label, else by its `instance` host (the switch tray NMX-T runs on). Returns the
    /// series read.
    async fn query_fabric(&mut self, prom: &PromQl, now_ms: UnixMs) -> Result<usize, PromError> {
        use nvlink_fabric::{ACTIVE, GPU_DEVICE_PREFIX, LINK_DOWN_METRIC, PORT_METRIC};
        let gpu = format!("{PORT_METRIC}{{Device_ID=~\"{GPU_DEVICE_PREFIX}.*\"");
        let active = prom
            .query(
                &format!("count by (rack, instance, chassis_id, link_partner_description) ({gpu},logical_state=\"{ACTIVE}\"}})"),
                None,
            )
            .await?;
        let down = prom
            .query(&format!("{gpu},logical_state!=\"{ACTIVE}\"}}"), None)
            .await?;
        let events = prom
            .query(
                &format!("sum by (rack, instance, link_partner_description) ({LINK_DOWN_METRIC} * on (instance, Node_GUID, Port_Number) group_left (link_partner_description) {gpu}}})"),
                None,
            )
            .await?;
        let rack_of = |s: &crate::telemetry::promql::Series| -> String {
            s.labels
                .get("rack")
                .cloned()
                .unwrap_or_else(|| s.instance_host().to_string())
        };
        let label = |s: &crate::telemetry::promql::Series, k: &str| s.labels.get(k).cloned();
        let mut readers: HashMap<String, FabricReader> = HashMap::new();
        for s in &active {
            if let Some(&(_, v)) = s.points.last().filter(|(_, v)| v.is_finite() && *v >= 0.0) {
                readers.entry(rack_of(s)).or_default().add_active(
                    label(s, "link_partner_description").as_deref(),
                    label(s, "chassis_id").as_deref(),
                    v as u32,
                );
            }
        }
        for s in &down {
            if let Some(&(_, v)) = s.points.last() {
                readers.entry(rack_of(s)).or_default().push(
                    true,
                    |k| s.labels.get(k).map(String::as_str),
                    v,
                );
            }
        }
        for s in &events {
            if let Some(&(_, v)) = s.points.last() {
                readers
                    .entry(rack_of(s))
                    .or_default()
                    .add_events(label(s, "link_partner_description").as_deref(), v);
            }
        }
        for (rack, reader) in readers {
            let l = self.rack_latest.entry(rack).or_default();
            l.fabric = Some(reader.finish());
            l.fabric_at_ms = Some(now_ms);
        }
        Ok(active.len() + down.len() + events.len())
    }

    /// Every target's health, by URL.
    pub fn health(&self) -> Vec<TargetHealth> {
        self.health.values().cloned().collect()
    }

    /// Readings as of `now_ms` from what was scraped no longer than `fresh_ms` ago, with the
    /// scheduler's view of nodes and jobs.
    pub fn readings(
        &self,
        inv: &Inventory,
        now_ms: UnixMs,
        at_ms: UnixMs,
        fresh_ms: i64,
        nodes: Vec<(String, NodeState)>,
        jobs: Vec<Job>,
    ) -> Readings {
        let fresh = |t: Option<UnixMs>| t.is_some_and(|t| now_ms - t <= fresh_ms);
        let fabric_fresh_ms = fresh_ms.max(3 * FABRIC_MIN_INTERVAL.as_millis() as i64);
        let fabric_fresh = |t: Option<UnixMs>| t.is_some_and(|t| now_ms - t <= fabric_fresh_ms);
        let mut gpus = Vec::with_capacity(inv.gpu_count());
        let mut node_power = Vec::with_capacity(nodes.len());
        let mut ib_rate = Vec::with_capacity(nodes.len());
        let mut ib_downs = Vec::with_capacity(nodes.len());
        let mut coolant = Vec::with_capacity(nodes.len());
        let mut places = Vec::with_capacity(nodes.len());
        let mut switches = Vec::with_capacity(nodes.len());
        let mut rack_power: HashMap<&str, f64> = HashMap::new();
        let mut rack_inlet: HashMap<&str, f64> = HashMap::new();
        let inv_node: HashMap<&str, &app::model::Node> =
            inv.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        for (name, _) in &nodes {
            let l = self.latest.get(name);
            let known = inv_node.get(name.as_str());
            places.push(
                l.filter(|l| fresh(l.gpus_at_ms))
                    .map(|l| l.places.clone())
                    .unwrap_or_default(),
            );
            switches.push(
                l.filter(|l| fresh(l.gpus_at_ms))
                    .map(|l| l.switches.clone())
                    .unwrap_or_default(),
            );
            match l.filter(|l| fresh(l.gpus_at_ms)) {
                Some(l) => gpus.extend(l.gpus.iter().cloned()),
                // Not reporting: its GPUs are there, with nothing known about them.
                None => gpus.extend(known.into_iter().flat_map(|n| &n.gpus).map(|g| GpuReading {
                    node: name.clone(),
                    index: g.index,
                    ..GpuReading::default()
                })),
            }
            let bmc = l.filter(|l| fresh(l.bmc_at_ms));
            let power = bmc.and_then(|l| l.power_watts);
            node_power.push(power);
            coolant.push(bmc.map(|l| l.coolant).filter(|c| !c.is_empty()));
            let node_exp = l.filter(|l| fresh(l.node_at_ms));
            ib_rate.push(node_exp.and_then(|l| l.ib_bytes_per_second));
            ib_downs.push(node_exp.and_then(|l| l.ib_link_downed));
            if let Some(rack) = known.map(|n| n.rack.as_str()) {
                if let Some(p) = power {
                    *rack_power.entry(rack).or_default() += p;
                }
                if let Some(t) = bmc.and_then(|l| l.inlet_celsius) {
                    let e = rack_inlet.entry(rack).or_insert(t);
                    *e = e.max(t);
                }
            }
        }
        let racks = inv
            .racks
            .iter()
            .map(|r| RackReading {
                rack: r.name.clone(),
                nodes_power_watts: rack_power.get(r.name.as_str()).copied(),
                inlet_celsius: rack_inlet.get(r.name.as_str()).copied(),
                shelves: self
                    .rack_latest
                    .get(&r.name)
                    .filter(|l| fresh(l.at_ms))
                    .map(|l| l.shelves.clone())
                    .unwrap_or_default(),
                fabric: self
                    .rack_latest
                    .get(&r.name)
                    .filter(|l| fabric_fresh(l.fabric_at_ms))
                    .and_then(|l| l.fabric.clone()),
            })
            .collect();
        Readings {
            at_ms,
            gpus,
            racks,
            nodes,
            node_power_watts: node_power,
            jobs,
            node_ib_bytes_per_second: ib_rate,
            node_ib_bytes_total: Vec::new(),
            node_ib_link_downed_total: ib_downs,
            node_coolant: coolant,
            node_places: places,
            node_switches: switches,
            rack_supplies: Vec::new(),
            rack_links: Vec::new(),
        }
    }
}

/// `s` with RE2's metacharacters escaped, for a regular expression inside a PromQL
/// double-quoted string (whose own escape doubles the backslash).
fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$\"".contains(c) {
            out.push_str(if c == '"' { "\\" } else { "\\\\" });
        }
        out.push(c);
    }
    out
}

/// The places DCGM gives a scrape's GPUs (MIG instances are their GPU's).
fn places_of(gpus: &[dcgm::DcgmGpu]) -> Vec<GpuPlace> {
    gpus.iter()
        .filter(|g| g.mig_instance.is_none())
        .filter_map(|g| g.place.clone())
        .collect()
}

/// The rate of a counter between two readings `(value, at_ms)`; none across a reset (the
/// counter went down) or without two readings.
fn counter_rate(prev: Option<(f64, UnixMs)>, now: Option<(f64, UnixMs)>) -> Option<f64> {
    let ((v0, t0), (v1, t1)) = (prev?, now?);
    (t1 > t0 && v1 >= v0).then(|| (v1 - v0) * 1000.0 / (t1 - t0) as f64)
}

/// An [`Ingest`] shared by its own scrape task and the live tick that reads it.
pub type SharedIngest = std::sync::Arc<std::sync::Mutex<Ingest>>;

/// How a source gets its telemetry.
pub enum Telemetry {
    /// Scraped or queried inside each live tick: the simulator's own exporters (a tick then
    /// shows one simulated instant) and PromQL (one query per tick).
    InTick(Box<Ingest>),
    /// Scraped by [`run_scraper`]; the tick only reads the latest. Configured exporters of
    /// real nodes: a slow one delays its own scrape, never a tick.
    Task(SharedIngest),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promql_regular_expressions_are_escaped_inside_the_string() {
        assert_eq!(regex_escape("a_b:c"), "a_b:c");
        assert_eq!(regex_escape("a.b"), "a\\\\.b");
        assert_eq!(regex_escape("a\"b"), "a\\\"b");
    }

    #[test]
    fn templates_name_every_node() {
        let inv = crate::sim::layout(16, "t");
        let t = targets(
            &inv,
            "http://{node}:9400/metrics",
            "http://bmc-{node}:9290/metrics",
        );
        assert_eq!(t.len(), 16);
        assert_eq!(t[2].gpu_url, "http://gpu003:9400/metrics");
        assert_eq!(t[2].bmc_url, "http://bmc-gpu003:9290/metrics");
    }

    #[test]
    fn bmc_mapping_picks_the_inlet_sensor() {
        let mut ing = Ingest::new(
            Client::new(
                Default::default(),
                crate::tls::client_config(None).expect("tls"),
            ),
            Vec::new(),
            PowerMapping::default(),
            4,
        );
        let body = b"ipmi_dcmi_power_consumption_watts 5412\n\
                     ipmi_temperature_celsius{id=\"1\",name=\"Exhaust Temp\"} 48\n\
                     ipmi_temperature_celsius{id=\"2\",name=\"Inlet Temp\"} 24\n";
        ing.take("n1", Kind::Bmc, body, 1000);
        let l = &ing.latest["n1"];
        assert_eq!((l.power_watts, l.inlet_celsius), (Some(5412.0), Some(24.0)));
    }

    #[test]
    fn infiniband_counters_become_a_rate_and_a_reset_is_not_one() {
        let mut ing = Ingest::new(
            Client::new(
                Default::default(),
                crate::tls::client_config(None).expect("tls"),
            ),
            Vec::new(),
            PowerMapping::default(),
            4,
        );
        // node_exporter's infiniband collector, as Go prints the counters.
        let body = |rx: f64, tx: f64| {
            format!(
                "# TYPE node_infiniband_port_data_received_bytes_total counter\n\
                 node_infiniband_port_data_received_bytes_total{{device=\"mlx5_0\",port=\"1\"}} {rx:e}\n\
                 node_infiniband_port_data_received_bytes_total{{device=\"mlx5_1\",port=\"1\"}} {rx:e}\n\
                 node_infiniband_port_data_transmitted_bytes_total{{device=\"mlx5_0\",port=\"1\"}} {tx:e}\n\
                 node_infiniband_port_data_transmitted_bytes_total{{device=\"mlx5_1\",port=\"1\"}} {tx:e}\n\
                 node_infiniband_link_downed_total{{device=\"mlx5_0\",port=\"1\"}} 0\n"
            )
        };
        ing.take("n1", Kind::Node, body(1e12, 2e12).as_bytes(), 10_000);
        assert_eq!(
            ing.latest["n1"].ib_bytes_per_second, None,
            "one reading is no rate"
        );
        // 10 s later: 2 x (5 GB + 5 GB) more.
        ing.take(
            "n1",
            Kind::Node,
            body(1.005e12, 2.005e12).as_bytes(),
            20_000,
        );
        assert_eq!(ing.latest["n1"].ib_bytes_per_second, Some(2e9));
        // A reboot resets the counters: no rate for that interval, then rates again.
        ing.take("n1", Kind::Node, body(1e6, 1e6).as_bytes(), 30_000);
        assert_eq!(ing.latest["n1"].ib_bytes_per_second, None);
        ing.take("n1", Kind::Node, body(2e6, 2e6).as_bytes(), 31_000);
        assert_eq!(ing.latest["n1"].ib_bytes_per_second, Some(4e6));
        // An exporter without the collector: nothing, not zero.
        ing.take("n2", Kind::Node, b"node_load1 0.5\n", 10_000);
        ing.take("n2", Kind::Node, b"node_load1 0.5\n", 20_000);
        assert_eq!(ing.latest["n2"].ib_bytes_per_second, None);
    }

    #[test]
    fn a_site_maps_its_own_exporter_names() {
        // node_exporter's hwmon collector on an ACPI power meter.
        let mapping = PowerMapping {
            power_metric: "node_hwmon_power_average_watt".into(),
            power_label: Some(("sensor".into(), "power1".into())),
            inlet_metric: "node_hwmon_temp_celsius".into(),
            inlet_label: Some(("sensor".into(), "temp1".into())),
            ..PowerMapping::default()
        };
        let mut ing = Ingest::new(
            Client::new(
                Default::default(),
                crate::tls::client_config(None).expect("tls"),
            ),
            Vec::new(),
            mapping,
            4,
        );
        let body = b"node_hwmon_power_average_watt{chip=\"acpi_power_meter\",sensor=\"power2\"} 12\n\
                     node_hwmon_power_average_watt{chip=\"acpi_power_meter\",sensor=\"power1\"} 5120.5\n\
                     node_hwmon_temp_celsius{chip=\"platform_coretemp\",sensor=\"temp1\"} 23\n";
        ing.take("n1", Kind::Bmc, body, 1000);
        let l = &ing.latest["n1"];
        assert_eq!((l.power_watts, l.inlet_celsius), (Some(5120.5), Some(23.0)));
    }

    #[tokio::test]
    async fn failing_targets_wait_their_backoff() {
        // A port nobody listens on: every attempt fails at once.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port");
        let url = format!("http://{closed}/metrics");
        let t = vec![NodeTarget {
            node: "n1".into(),
            gpu_url: url.clone(),
            bmc_url: url.clone() + "?bmc",
            node_url: None,
        }];
        let mut ing = Ingest::new(
            Client::new(
                Default::default(),
                crate::tls::client_config(None).expect("tls"),
            ),
            t,
            PowerMapping::default(),
            4,
        );
        let i = Duration::from_secs(1);
        assert_eq!(ing.scrape_due(0, i).await.targets, 2);
        // Failed once: not due again until 2 s later.
        assert_eq!(ing.scrape_due(1_000, i).await.targets, 0);
        assert_eq!(ing.scrape_due(2_000, i).await.targets, 2);
        // Failed twice: 4 s.
        assert_eq!(ing.scrape_due(4_000, i).await.targets, 0);
        assert_eq!(ing.scrape_due(6_000, i).await.targets, 2);
        assert!(ing.health().iter().all(|h| h.consecutive_failures == 3));
    }

    #[test]
    fn jitter_spreads_targets_over_the_interval() {
        let i = Duration::from_secs(10);
        let phases: Vec<i64> = (0..64)
            .map(|n| phase_ms(&format!("http://gpu{n:03}:9400/metrics"), i))
            .collect();
        assert!(phases.iter().all(|p| (0..10_000).contains(p)));
        // Spread: every 2.5 s quarter of the interval holds some targets.
        for q in 0..4 {
            assert!(
                phases.iter().any(|p| p / 2_500 == q),
                "quarter {q} empty: {phases:?}"
            );
        }
        assert_eq!(
            phase_ms("http://a/metrics", i),
            phase_ms("http://a/metrics", i),
            "stable"
        );
    }

    #[tokio::test]
    async fn with_jitter_every_target_is_first_scraped_within_one_interval() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port");
        let targets: Vec<NodeTarget> = (0..20)
            .map(|n| NodeTarget {
                node: format!("n{n}"),
                gpu_url: format!("http://{closed}/gpu{n}"),
                bmc_url: format!("http://{closed}/bmc{n}"),
                node_url: None,
            })
            .collect();
        let mut ing = Ingest::new(
            Client::new(
                Default::default(),
                crate::tls::client_config(None).expect("tls"),
            ),
            targets,
            PowerMapping::default(),
            8,
        )
        .with_jitter();
        let i = Duration::from_secs(10);
        // Ticks every 3 s never line up with every phase; still, all 40 start within 10 s.
        let mut first_round = 0;
        for t in [0, 3_000, 6_000, 9_000, 10_000] {
            first_round += ing.scrape_due(t, i).await.targets;
        }
        assert_eq!(first_round, 40);
        assert!(ing.health().iter().all(|h| h.last_attempt_ms.is_some()));
    }

    #[test]
    fn stale_nodes_contribute_nothing() {
        let inv = crate::sim::layout(8, "t");
        let mut ing = Ingest::new(
            Client::new(
                Default::default(),
                crate::tls::client_config(None).expect("tls"),
            ),
            Vec::new(),
            PowerMapping::default(),
            4,
        );
        ing.take(
            "gpu001",
            Kind::Bmc,
            b"ipmi_dcmi_power_consumption_watts 5000\n",
            1_000,
        );
        ing.take(
            "gpu002",
            Kind::Bmc,
            b"ipmi_dcmi_power_consumption_watts 4000\n",
            9_000,
        );
        let nodes: Vec<_> = inv
            .nodes
            .iter()
            .map(|n| (n.name.clone(), NodeState::Idle))
            .collect();
        let r = ing.readings(&inv, 10_000, 10_000, 2_000, nodes.clone(), Vec::new());
        assert_eq!(r.racks[0].nodes_power_watts, Some(4000.0));
        assert_eq!(r.node_power_watts[0], None);
        let r = ing.readings(&inv, 20_000, 20_000, 2_000, nodes, Vec::new());
        assert_eq!(r.racks[0].nodes_power_watts, None);
    }
}
