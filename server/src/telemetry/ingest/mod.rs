//! The scrape source of telemetry: every node's exporters (dcgm-exporter per GPU, and a
//! BMC exporter for node power and inlet temperature), fetched with bounded concurrency,
//! decoded, and kept as the latest reading per node. `readings` assembles what aggregation
//! needs from the fresh ones plus the scheduler's state; a node not refreshed for two
//! scrape intervals contributes nothing (shown as missing, never as zero).
//!
//! By concern: `targets` (what is scraped, and which exporter a target is), `round` (a
//! round's plan, fetch and apply, with backoff and jitter), `decode` (one body into the
//! latest readings, by exporter), `mapping`, `bmc` and `infiniband` (what a BMC's and
//! node_exporter's texts say), `query` (the same latest readings from a PromQL store) and
//! `readings` (the fresh ones as [`Readings`](crate::telemetry::Readings)). This file holds
//! the state they share.

mod bmc;
mod decode;
mod infiniband;
mod mapping;
mod query;
pub mod query_dcgm;
mod readings;
mod round;
mod targets;

use std::collections::{BTreeMap, HashMap};

use app::model::{CoolantReading, GpuReading, UnixMs};

use crate::cluster::placement::GpuPlace;
use crate::telemetry::nvlink_fabric;
pub use crate::telemetry::scrape::RoundStats;
use crate::telemetry::scrape::{Client, TargetHealth};

use bmc::bmc_sample;
pub use bmc::{read_bmc, BmcReading};
use infiniband::counter_rate;
pub use infiniband::{
    read_ib, read_ib_total, IbCounters, IB_LINK_DOWNED, IB_LINK_DOWNED_PROMQL, IB_METRICS,
    IB_RATE_PROMQL,
};
pub use mapping::PowerMapping;
pub use query::PROMQL_QUERIES;
pub use round::{Fetched, Round};
pub use targets::{
    rack_targets, targets, with_node_exporter, Kind, NodeTarget, RackTarget, FABRIC_MIN_INTERVAL,
};

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
    /// The PromQL path's GPU queries and the identity labels they keep between rounds.
    dcgm_queries: query_dcgm::DcgmQueries,
}

impl Ingest {
    /// An `Ingest` with `self`'s client and mapping and nothing read yet: the one a reading
    /// task shares with the tick while it reads into its own.
    pub fn empty_copy(&self) -> Ingest {
        Ingest::new(
            self.client.clone(),
            Vec::new(),
            self.mapping.clone(),
            self.concurrency,
        )
    }

    /// Takes `other`'s latest readings (nodes and racks) as its own.
    pub fn take_latest_from(&mut self, other: &Ingest) {
        self.latest.clone_from(&other.latest);
        self.rack_latest.clone_from(&other.rack_latest);
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
            .flat_map(|t| {
                t.urls()
                    .map(|(u, _)| (u.clone(), TargetHealth::of(u, format!("node:{}", t.node))))
            })
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
            dcgm_queries: query_dcgm::DcgmQueries::default(),
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
                    .or_insert_with(|| TargetHealth::of(u, format!("node:{}", t.node)));
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
                .or_insert_with(|| TargetHealth::of(&t.url, format!("rack:{}", t.rack)));
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

    /// Every target's health, by URL.
    pub fn health(&self) -> Vec<TargetHealth> {
        self.health.values().cloned().collect()
    }
}

/// An [`Ingest`] shared by its own scrape task and the live tick that reads it.
pub type SharedIngest = std::sync::Arc<std::sync::Mutex<Ingest>>;

/// How a source gets its telemetry.
pub enum Telemetry {
    /// Scraped inside each live tick: the simulator's own exporters (a tick then shows one
    /// simulated instant).
    InTick(Box<Ingest>),
    /// Scraped by [`run_scraper`] or read from a PromQL store by its task; the tick only
    /// reads the latest. Configured exporters of real nodes and PromQL stores: a slow one
    /// delays its own round, never a tick.
    Task(SharedIngest),
}
