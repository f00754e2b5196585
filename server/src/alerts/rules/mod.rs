//! The rules: thresholds from `[alerts]`, the facts they read, the durations they track in
//! [`RuleState`], and [`evaluate`], which turns one tick into the conditions true now. Pure:
//! no store, no clock, no HTTP.
//!
//! A file per family, each exporting its rule functions; `RULES` lists them all and
//! [`evaluate`] runs each on the tick:
//! - `gpu.rs`: a node's GPUs and NVSwitches (`nvswitch_fatal`, `nvswitch_hot`,
//!   `ecc_double_bit`, `xid`, `remapped_rows`, `pcie_replays`);
//! - `thermal.rs`: `thermal_throttling`, `inlet_over_limit`;
//! - `power.rs`: `rack_power_over_limit`, `rack_power_high`;
//! - `coolant.rs`: `coolant_leak`, `coolant_leak_warning`, `coolant_flow_low`,
//!   `coolant_delta_t_high`;
//! - `shelves.rs`: `power_shelf_down`, `power_shelf_degraded`;
//! - `fabric.rs`: `nvlink_switch_tray_down`, `nvlink_links_down`;
//! - `layout.rs`: `layout_disagrees`;
//! - `targets.rs`: what does not answer (`node_not_responding`, `target_down`);
//! - `jobs.rs`: `nccl_latency`, `checkpoint_overdue`, `gpus_idle`;
//! - `radar.rs`: a multi-node job's GPUs against their peers (`straggler`, `job_hung`);
//! - `scheduler.rs`: slurmctld itself (`backfill_slow`, `agent_queue_high`).
//!
//! `data.rs` says whether a tick holds what a rule reads about a subject ([`has_data`]):
//! a condition gone for want of readings is unknown, not clear.
//!
//! [`evaluate`] sorts what the rules push (one condition per rule and subject), so the
//! table's order is not observable; it keeps the order the rules were written in.

use std::collections::{HashMap, HashSet};

use app::live::Overview;
use app::model::{GpuReading, NodeState, UnixMs};
use serde::Serialize;

use super::webhook::WebhookFormat;
use crate::scheduler::SchedJob;
use crate::telemetry::{scrape::TargetHealth, Readings};

pub use data::has_data;

mod coolant;
mod data;
mod fabric;
mod gpu;
mod jobs;
mod layout;
mod power;
pub mod radar;
mod scheduler;
mod shelves;
mod targets;
mod thermal;

/// Thresholds and durations, from `[alerts]`.
#[derive(Clone, Debug, PartialEq)]
pub struct AlertConfig {
    /// Rack power over this share of its limit for `rack_power_high_ms` is a warning.
    pub rack_power_high_ratio: f64,
    pub rack_power_high_ms: i64,
    /// GPUs thermally throttled longer than this.
    pub thermal_throttle_ms: i64,
    /// A scrape target failing this many times in a row is down.
    pub target_failures: u32,
    /// NCCL all-reduce latency over this for `nccl_consecutive` steps...
    pub nccl_latency_us: f64,
    pub nccl_consecutive: usize,
    /// ...or over this multiple of the job's own median of its first `nccl_baseline_steps`.
    pub nccl_baseline_factor: f64,
    pub nccl_baseline_steps: usize,
    /// A job that has checkpointed and then not for this long.
    pub checkpoint_overdue_ms: i64,
    /// slurmctld's backfill cycle over this many seconds is a warning (Slurm's own
    /// `bf_max_time` defaults to 30 s: a cycle near it stops short of the queue).
    pub backfill_cycle_seconds: f64,
    /// slurmctld's agent queue (RPCs it has yet to send to nodes) over this for
    /// `agent_queue_ms` is a warning.
    pub agent_queue_max: u64,
    pub agent_queue_ms: i64,
    /// A GPU of a multi-node job under this share of its peers' median SM activity for
    /// `straggler_ms` is a straggler.
    pub straggler_ratio: f64,
    pub straggler_ms: i64,
    /// A multi-node job busy with flat power and no InfiniBand traffic this long is hung.
    pub hang_ms: i64,
    /// A running job's GPU under this activity with at most `idle_gpu_memory_mib` in use,
    /// for `idle_gpu_ms`, is held idle (`gpus_idle`, [`crate::aggregate::idle`]).
    pub idle_gpu_activity: f64,
    pub idle_gpu_memory_mib: f64,
    pub idle_gpu_ms: i64,
    /// POST each firing and resolution here (`http://` or `https://`).
    pub webhook_url: Option<String>,
    /// `gantry` (Gantry's JSON) or `alertmanager` (Alertmanager's v2 alert list).
    pub webhook_format: WebhookFormat,
    /// The site's Alertmanager (its base URL): every open incident is sent there, once per
    /// incident, through its v2 API.
    pub alertmanager_url: Option<String>,
    /// Drain a node on a double-bit ECC error or a drain-class XID. Off by default.
    pub auto_drain: bool,
    /// An alert resolves after its condition was clear this many evaluations in a row...
    pub resolve_after_evaluations: u32,
    /// ...and, if critical, for at least this long (source time).
    pub critical_clear_ms: i64,
    /// A condition back within this long of its resolution reopens the same alert.
    pub reopen_within_ms: i64,
}

impl Default for AlertConfig {
    fn default() -> Self {
        let idle = crate::aggregate::idle::IdleRule::default();
        AlertConfig {
            rack_power_high_ratio: 0.9,
            rack_power_high_ms: 5 * 60_000,
            thermal_throttle_ms: 5 * 60_000,
            target_failures: 3,
            nccl_latency_us: 100.0,
            nccl_consecutive: 3,
            nccl_baseline_factor: 1.3,
            nccl_baseline_steps: 20,
            checkpoint_overdue_ms: 2 * 3_600_000,
            backfill_cycle_seconds: 20.0,
            agent_queue_max: 100,
            agent_queue_ms: 5 * 60_000,
            straggler_ratio: 0.8,
            straggler_ms: 5 * 60_000,
            hang_ms: crate::aggregate::hang::DEFAULT_HANG_MS,
            idle_gpu_activity: idle.activity_below,
            idle_gpu_memory_mib: idle.memory_mib,
            idle_gpu_ms: idle.hold_ms,
            webhook_url: None,
            webhook_format: WebhookFormat::Gantry,
            alertmanager_url: None,
            auto_drain: false,
            resolve_after_evaluations: 3,
            critical_clear_ms: 60_000,
            reopen_within_ms: 10 * 60_000,
        }
    }
}

impl AlertConfig {
    /// What a GPU held idle is.
    pub fn idle_rule(&self) -> crate::aggregate::idle::IdleRule {
        crate::aggregate::idle::IdleRule {
            activity_below: self.idle_gpu_activity,
            memory_mib: self.idle_gpu_memory_mib,
            hold_ms: self.idle_gpu_ms,
        }
    }
}

/// One condition true now.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Condition {
    pub rule: &'static str,
    /// What it is about: `node:gpu038`, `rack:B02`, `job:1042`, `target:http://…`.
    pub subject: String,
    pub severity: &'static str,
    pub summary: String,
    /// The page to look at.
    pub link: String,
    /// The node a drain would take out, for the auto-drain policy.
    pub drain_node: Option<String>,
}

impl Condition {
    /// The condition as the store records a firing alert.
    pub fn as_new_alert(&self) -> crate::store::NewAlert<'_> {
        crate::store::NewAlert {
            rule: self.rule,
            subject: &self.subject,
            severity: self.severity,
            summary: &self.summary,
            link: &self.link,
        }
    }
}

/// Facts beyond the overview that some rules need.
#[derive(Default)]
pub struct Facts<'a> {
    pub readings: Option<&'a Readings>,
    pub jobs: &'a [SchedJob],
    /// The inventory and the scheduler's nodes: what taking a rack out costs in segments.
    pub inventory: Option<&'a app::model::Inventory>,
    pub nodes: &'a [crate::scheduler::SchedNode],
    pub targets: &'a [TargetHealth],
    /// Per running job: its NCCL latency samples, oldest first (step, microseconds).
    pub nccl: HashMap<u64, Vec<(u64, f64)>>,
    /// Per running job: when its newest complete checkpoint finished.
    pub last_checkpoint_ms: HashMap<u64, UnixMs>,
    /// The scheduler's own health, when its newest read is fresh.
    pub health: Option<&'a app::queue::SchedHealth>,
}

/// When each duration-bound condition started being true (source time).
#[derive(Default)]
pub struct RuleState {
    since: HashMap<(&'static str, String), UnixMs>,
    /// The keys of `since` held this round: the others are forgotten at its end.
    seen: HashSet<(&'static str, String)>,
    /// Per node, per GPU index: the last PCIe replay count seen, and when it last rose.
    replays: HashMap<String, Vec<(u32, u64, Option<UnixMs>)>>,
    /// Per job that looks hung: since when, and its power band.
    hangs: HashMap<u64, radar::HangHold>,
}

impl RuleState {
    /// Whether `key` has held for `ms` (it starts holding now if new); keys not held this
    /// round are forgotten by [`RuleState::retain`].
    fn held(&mut self, rule: &'static str, subject: &str, now: UnixMs, ms: i64) -> bool {
        let k = (rule, subject.to_string());
        self.seen.insert(k.clone());
        let since = *self.since.entry(k).or_insert(now);
        now - since >= ms
    }

    /// Notes `rule` on `subject` as holding since long ago: an alert another process fired
    /// (before a restart or a change of leader) is still firing if its condition holds at
    /// the first look, without waiting out its duration again.
    pub fn seed(&mut self, rule: &'static str, subject: &str) {
        self.since
            .entry((rule, subject.to_string()))
            .or_insert(UnixMs::MIN / 2);
    }

    /// Forgets the holds not seen this round, and starts the next.
    fn retain(&mut self) {
        let seen = std::mem::take(&mut self.seen);
        self.since.retain(|k, _| seen.contains(k));
    }
}

/// One tick as every rule sees it.
struct Tick<'a> {
    cfg: &'a AlertConfig,
    ov: &'a Overview,
    f: &'a Facts<'a>,
    now: UnixMs,
    node_state: HashMap<&'a str, NodeState>,
    /// The readings' GPUs by node, nodes in name order (empty without readings): readings
    /// come grouped by node, so the sort is a check more than work.
    gpus: Vec<&'a GpuReading>,
}

impl<'a> Tick<'a> {
    fn new(cfg: &'a AlertConfig, ov: &'a Overview, f: &'a Facts<'a>) -> Self {
        let node_state = ov
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.state))
            .collect();
        let mut gpus: Vec<&GpuReading> = f.readings.into_iter().flat_map(|r| &r.gpus).collect();
        gpus.sort_by(|a, b| a.node.cmp(&b.node));
        Tick {
            cfg,
            ov,
            f,
            now: ov.at_ms,
            node_state,
            gpus,
        }
    }

    /// Drained, draining, down or in maintenance: its hardware alerts stop (the action was
    /// taken, or the node is out anyway).
    fn out_of_service(&self, node: &str) -> bool {
        matches!(
            self.node_state.get(node),
            Some(
                NodeState::Drained | NodeState::Draining | NodeState::Down | NodeState::Maintenance
            )
        )
    }

    /// Each node's GPUs, in node name order, no per-GPU map entry built.
    fn gpus_by_node(&self) -> impl Iterator<Item = (&'a str, &[&'a GpuReading])> {
        self.gpus
            .chunk_by(|a, b| a.node == b.node)
            .map(|gpus| (gpus[0].node.as_str(), gpus))
    }
}

/// A rule: reads the tick, keeps what it must in the state, pushes the conditions true now.
type Rule = fn(&Tick<'_>, &mut RuleState, &mut Vec<Condition>);

/// Every rule, by family.
const RULES: &[Rule] = &[
    gpu::nvswitch,
    gpu::ecc_double_bit,
    gpu::xid,
    gpu::remapped_rows,
    gpu::pcie_replays,
    thermal::throttling,
    thermal::inlet_over_limit,
    power::rack_power,
    coolant::leak,
    coolant::flow_low,
    coolant::delta_t_high,
    shelves::power_shelves,
    fabric::nvlink,
    layout::layout_disagrees,
    targets::node_not_responding,
    targets::target_down,
    jobs::nccl_latency,
    jobs::checkpoint_overdue,
    jobs::gpus_idle,
    radar::evaluate,
    scheduler::backfill_slow,
    scheduler::agent_queue_high,
];

fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// The conditions true at `ov.at_ms`.
pub fn evaluate(
    cfg: &AlertConfig,
    ov: &Overview,
    f: &Facts<'_>,
    st: &mut RuleState,
) -> Vec<Condition> {
    let tick = Tick::new(cfg, ov, f);
    let mut out = Vec::new();
    for rule in RULES {
        rule(&tick, st, &mut out);
    }
    st.retain();
    out.sort();
    out.dedup_by(|a, b| a.rule == b.rule && a.subject == b.subject);
    out
}

#[cfg(test)]
mod tests;
