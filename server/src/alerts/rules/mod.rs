//! The rules: thresholds from `[alerts]`, the facts they read, the durations they track in
//! [`RuleState`], and [`evaluate`], which turns one tick into the conditions true now. Pure:
//! no store, no clock, no HTTP.

use std::collections::{HashMap, HashSet};

use app::live::Overview;
use app::model::{JobState, NodeState, UnixMs};
use app::units;
use serde::Serialize;

use super::webhook::WebhookFormat;
use crate::aggregate::Readings;
use crate::scheduler::SchedJob;
use crate::scrape::TargetHealth;

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
    /// A GPU of a multi-node job under this share of its peers' median SM activity for
    /// `straggler_ms` is a straggler.
    pub straggler_ratio: f64,
    pub straggler_ms: i64,
    /// A multi-node job busy with flat power and no InfiniBand traffic this long is hung.
    pub hang_ms: i64,
    /// POST each firing and resolution here (`http://` or `https://`).
    pub webhook_url: Option<String>,
    /// `gantry` (Gantry's JSON) or `alertmanager` (Alertmanager's v2 alert list).
    pub webhook_format: WebhookFormat,
    /// Drain a node on a double-bit ECC error or a drain-class XID. Off by default.
    pub auto_drain: bool,
}

impl Default for AlertConfig {
    fn default() -> Self {
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
            straggler_ratio: 0.8,
            straggler_ms: 5 * 60_000,
            hang_ms: crate::aggregate::hang::DEFAULT_HANG_MS,
            webhook_url: None,
            webhook_format: WebhookFormat::Gantry,
            auto_drain: false,
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
}

/// When each duration-bound condition started being true (source time).
#[derive(Default)]
pub struct RuleState {
    since: HashMap<(&'static str, String), UnixMs>,
    /// Per node, per GPU index: the last PCIe replay count seen, and when it last rose.
    replays: HashMap<String, Vec<(u32, u64, Option<UnixMs>)>>,
    /// Per job that looks hung: since when, and its power band.
    hangs: HashMap<u64, radar::HangHold>,
}

impl RuleState {
    /// Whether `key` has held for `ms` (it starts holding now if new); keys not held this
    /// round are forgotten by [`RuleState::retain`].
    fn held(
        &mut self,
        rule: &'static str,
        subject: &str,
        now: UnixMs,
        ms: i64,
        seen: &mut HashSet<(&'static str, String)>,
    ) -> bool {
        let k = (rule, subject.to_string());
        seen.insert(k.clone());
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

    fn retain(&mut self, seen: &HashSet<(&'static str, String)>) {
        self.since.retain(|k, _| seen.contains(k));
    }
}

/// Liquid racks' coolant loops: a leak detector critical (critical) or warning (warning),
/// trays under the flow limit and return over supply by more than the delta-T limit
/// (warnings). A leak names the rack, its trays, the jobs running in the rack and what
/// taking the rack out of service costs in free segments.
fn coolant(ov: &Overview, f: &Facts<'_>, out: &mut Vec<Condition>) {
    let list = |v: &[String]| v.join(", ");
    for rack in &ov.racks {
        let Some(c) = &rack.coolant else { continue };
        if c.leak != app::model::LeakState::Ok {
            let jobs: Vec<String> = rack.jobs.iter().map(u64::to_string).collect();
            let rack_nodes: Vec<String> = ov
                .nodes
                .iter()
                .filter(|n| n.rack == rack.name)
                .map(|n| n.name.clone())
                .collect();
            let segments = match f.inventory {
                Some(inv) => crate::segments::drain_impact(inv, f.nodes, f.jobs, &rack_nodes),
                None => Vec::new(),
            };
            let critical = c.leak == app::model::LeakState::Critical;
            out.push(Condition {
                rule: if critical {
                    "coolant_leak"
                } else {
                    "coolant_leak_warning"
                },
                subject: format!("rack:{}", rack.name),
                severity: if critical { "critical" } else { "warning" },
                summary: format!(
                    "rack {}: coolant leak detected ({}) at tray {}; running jobs: {}; taking the rack out of service: {}",
                    rack.name,
                    c.leak.label(),
                    list(&c.leaking),
                    if jobs.is_empty() { "none".to_string() } else { jobs.join(", ") },
                    if segments.is_empty() {
                        "no free segment is lost".to_string()
                    } else {
                        segments.join("; ")
                    }
                ),
                link: "/racks".into(),
                drain_node: None,
            });
        }
        if !c.low_flow.is_empty() {
            out.push(Condition {
                rule: "coolant_flow_low",
                subject: format!("rack:{}", rack.name),
                severity: "warning",
                summary: format!(
                    "rack {}: coolant flow under {:.1} L/min at tray {} (rack total {} L/min)",
                    rack.name,
                    c.flow_min_lpm.unwrap_or(0.0),
                    list(&c.low_flow),
                    c.flow_lpm.map_or("-".to_string(), |x| format!("{x:.1}"))
                ),
                link: "/thermal".into(),
                drain_node: None,
            });
        }
        if c.delta_t_high() {
            out.push(Condition {
                rule: "coolant_delta_t_high",
                subject: format!("rack:{}", rack.name),
                severity: "warning",
                summary: format!(
                    "rack {}: coolant return {:.1} °C over supply, above its {:.1} °C limit",
                    rack.name,
                    c.delta_t_celsius.unwrap_or(0.0),
                    c.delta_t_max_celsius.unwrap_or(0.0)
                ),
                link: "/thermal".into(),
                drain_node: None,
            });
        }
    }
}

/// Racks' power shelves: a shelf down (no supply delivering, or missing from its
/// controller's reading) is `power_shelf_down`, critical when the rack draws more than
/// its lowered limit, else a warning; a shelf with a supply down or in warning is
/// `power_shelf_degraded` (a warning). Both name the shelves, the rack's limit against its
/// bus bar, and the jobs drawing its power with their share.
fn shelves(ov: &Overview, out: &mut Vec<Condition>) {
    let kw = |w: f64| format!("{:.1} kW", w / 1000.0);
    for rack in &ov.racks {
        let Some(sh) = rack.shelves.as_ref().filter(|s| s.reporting()) else {
            continue;
        };
        let drawing = || {
            let jobs = ov.rack_job_power(&rack.name);
            if jobs.is_empty() {
                "no running job draws its power".to_string()
            } else {
                let list: Vec<String> = jobs
                    .iter()
                    .map(|(j, w)| format!("job {j} ({})", kw(*w)))
                    .collect();
                format!("drawing its power: {}", list.join(", "))
            }
        };
        let draw = rack.power_watts.map_or("-".to_string(), kw);
        if sh.lost() > 0 {
            let mut which = sh.down.clone();
            if sh.missing > 0 {
                which.push(format!("{} not in the reading", sh.missing));
            }
            let over = rack.load_ratio().is_some_and(|x| x > 1.0);
            out.push(Condition {
                rule: "power_shelf_down",
                subject: format!("rack:{}", rack.name),
                severity: if over { "critical" } else { "warning" },
                summary: format!(
                    "rack {}: power shelf down: {} ({} of {} shelves delivering); its limit is {} against the bus bar's {}{}; it draws {}; {}",
                    rack.name,
                    which.join(", "),
                    sh.expected.saturating_sub(sh.lost()),
                    sh.expected,
                    kw(rack.power_limit_watts),
                    kw(sh.busbar_watts),
                    if over { ", over it" } else { "" },
                    draw,
                    drawing()
                ),
                link: "/racks".into(),
                drain_node: None,
            });
        } else if !sh.degraded.is_empty() {
            out.push(Condition {
                rule: "power_shelf_degraded",
                subject: format!("rack:{}", rack.name),
                severity: "warning",
                summary: format!(
                    "rack {}: power shelf degraded: {} (a supply down or in warning); its limit is {} against the bus bar's {}; it draws {}; {}",
                    rack.name,
                    sh.degraded.join(", "),
                    kw(rack.power_limit_watts),
                    kw(sh.busbar_watts),
                    draw,
                    drawing()
                ),
                link: "/racks".into(),
                drain_node: None,
            });
        }
    }
}

/// Racks' NVLink switch trays (NMX-T): a switch tray with not one link active, or one the
/// layout gives missing from a fresh reading, is `nvlink_switch_tray_down` (critical: every
/// GPU of the domain loses that tray's share of its NVLink bandwidth, and jobs running
/// there see NVLink errors); GPU links not active otherwise are `nvlink_links_down` (a
/// warning). Both name the rack, the switch trays, the compute trays cut and the jobs
/// running on them.
fn fabric(ov: &Overview, out: &mut Vec<Condition>) {
    for rack in &ov.racks {
        let Some(f) = rack
            .fabric
            .as_ref()
            .filter(|f| f.reporting() && f.in_trouble())
        else {
            continue;
        };
        let jobs = ov.jobs_on(&f.cut);
        let running = if jobs.is_empty() {
            "no running job on them".to_string()
        } else {
            format!(
                "running jobs: {}",
                jobs.iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let cut = if f.cut.is_empty() {
            "none named".to_string()
        } else {
            f.cut.join(", ")
        };
        if f.lost() > 0 {
            let mut which = f.down.clone();
            if f.missing > 0 {
                which.push(format!("{} not in the reading", f.missing));
            }
            out.push(Condition {
                rule: "nvlink_switch_tray_down",
                subject: format!("rack:{}", rack.name),
                severity: "critical",
                summary: format!(
                    "rack {}: NVLink switch tray down: {} ({} of {} switch trays up; {} of {} GPU links active); compute trays cut: {cut}; {running}",
                    rack.name,
                    which.join(", "),
                    f.expected.saturating_sub(f.lost()),
                    f.expected,
                    f.active,
                    f.links,
                ),
                link: "/racks".into(),
                drain_node: None,
            });
        } else if !f.cut.is_empty() {
            out.push(Condition {
                rule: "nvlink_links_down",
                subject: format!("rack:{}", rack.name),
                severity: "warning",
                summary: format!(
                    "rack {}: {} NVLink link(s) not active, on switch tray {}: {}; compute trays cut: {cut}; {running}",
                    rack.name,
                    f.links.saturating_sub(f.active),
                    if f.degraded.is_empty() {
                        "not named".to_string()
                    } else {
                        f.degraded.join(", ")
                    },
                    f.links_down.join("; "),
                ),
                link: "/racks".into(),
                drain_node: None,
            });
        }
    }
}

/// Racks whose trays DCGM places elsewhere than the layout file does (a warning): the
/// tray an operator would pull for repair is not where the layout says.
fn layout_disagrees(ov: &Overview, out: &mut Vec<Condition>) {
    for rack in &ov.racks {
        let Some(p) = rack.placement.as_ref().filter(|p| !p.issues.is_empty()) else {
            continue;
        };
        out.push(Condition {
            rule: "layout_disagrees",
            subject: format!("rack:{}", rack.name),
            severity: "warning",
            summary: format!(
                "rack {}: the layout file disagrees with DCGM about {} tray(s): {}",
                rack.name,
                p.issues.len(),
                p.issues.join("; ")
            ),
            link: "/topology".into(),
            drain_node: None,
        });
    }
}

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
    let now = ov.at_ms;
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let node_state: HashMap<&str, NodeState> = ov
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.state))
        .collect();
    let out_of_service = |n: &str| {
        matches!(
            node_state.get(n),
            Some(
                NodeState::Drained | NodeState::Draining | NodeState::Down | NodeState::Maintenance
            )
        )
    };

    if let Some(r) = f.readings {
        // NVSwitches (HGX baseboards): a fatal SXid takes the node's NVLink fabric down
        // until the switch is reset (critical, a drain-class condition); a switch at its
        // slowdown temperature is a warning.
        for ((node, _), sws) in r.nodes.iter().zip(&r.node_switches) {
            if sws.is_empty() || out_of_service(node) {
                continue;
            }
            let fatal: Vec<String> = sws
                .iter()
                .filter_map(|s| {
                    s.fatal_sxid
                        .map(|x| format!("NVSwitch {} SXid {x}", s.switch))
                })
                .collect();
            if !fatal.is_empty() {
                let jobs: Vec<String> = ov
                    .nodes
                    .iter()
                    .find(|n| n.name == *node)
                    .map(|n| n.jobs.iter().map(u64::to_string).collect())
                    .unwrap_or_default();
                let reset = sws
                    .iter()
                    .any(|s| s.fatal_sxid.is_some() && s.reset_required == Some(true));
                out.push(Condition {
                    rule: "nvswitch_fatal",
                    subject: format!("node:{node}"),
                    severity: "critical",
                    summary: format!(
                        "{node}: fatal NVSwitch error ({}){}; its GPUs' NVLink fabric is down until the switch is reset; running jobs: {}",
                        fatal.join(", "),
                        if reset { ", reset required" } else { "" },
                        if jobs.is_empty() { "none".to_string() } else { jobs.join(", ") }
                    ),
                    link: units::node_href(node),
                    drain_node: Some(node.to_string()),
                });
            }
            let hot: Vec<String> = sws
                .iter()
                .filter(|s| s.is_hot())
                .map(|s| {
                    format!(
                        "NVSwitch {} at {:.0} °C (slows down at {:.0} °C)",
                        s.switch,
                        s.temp_celsius.unwrap_or(0.0),
                        s.slowdown_celsius.unwrap_or(0.0)
                    )
                })
                .collect();
            if !hot.is_empty() {
                out.push(Condition {
                    rule: "nvswitch_hot",
                    subject: format!("node:{node}"),
                    severity: "warning",
                    summary: format!("{node}: {}", hot.join(", ")),
                    link: units::node_href(node),
                    drain_node: None,
                });
            }
        }

        // Per node: double-bit ECC, drain-class XIDs, thermal throttling.
        // GPUs by node, nodes in name order: readings come grouped by node, so the sort
        // is a check more than work, and no per-GPU map entry is built.
        let mut sorted: Vec<&app::model::GpuReading> = r.gpus.iter().collect();
        sorted.sort_by(|a, b| a.node.cmp(&b.node));
        for gpus in sorted.chunk_by(|a, b| a.node == b.node) {
            let node = gpus[0].node.as_str();
            let dbe: Vec<u32> = gpus
                .iter()
                .filter(|g| g.ecc_dbe_total.is_some_and(|x| x > 0))
                .map(|g| g.index)
                .collect();
            if !dbe.is_empty() && !out_of_service(node) {
                out.push(Condition {
                    rule: "ecc_double_bit",
                    subject: format!("node:{node}"),
                    severity: "critical",
                    summary: format!(
                        "{node}: double-bit ECC errors on GPU {} — bad hardware; drain the node",
                        dbe.iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    link: units::node_href(node),
                    drain_node: Some(node.to_string()),
                });
            }
            for g in gpus {
                let Some(x) = g.last_xid else { continue };
                let Some((meaning, action)) = app::xid::lookup(x) else {
                    continue;
                };
                if action.is_drain_class() && !out_of_service(node) {
                    out.push(Condition {
                        rule: "xid",
                        subject: format!("node:{node}:gpu{}", g.index),
                        severity: "critical",
                        summary: format!(
                            "{node} GPU {}: XID {x}, {meaning}; {}",
                            g.index,
                            action.label()
                        ),
                        link: units::node_href(node),
                        drain_node: Some(node.to_string()),
                    });
                }
            }
            let remapped: Vec<u32> = gpus
                .iter()
                .filter(|g| g.remapped_rows_uncorrectable.is_some_and(|x| x > 0))
                .map(|g| g.index)
                .collect();
            if !remapped.is_empty() && !out_of_service(node) {
                out.push(Condition {
                    rule: "remapped_rows",
                    subject: format!("node:{node}"),
                    severity: "critical",
                    summary: format!(
                        "{node}: rows remapped for uncorrectable memory errors on GPU {} — drain the node",
                        remapped.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
                    ),
                    link: units::node_href(node),
                    drain_node: Some(node.to_string()),
                });
            }
            // PCIe replays rising: firing while the count rose within the last 5 minutes.
            for g in gpus {
                let Some(count) = g.pcie_replay_total else {
                    continue;
                };
                let per_gpu = match st.replays.get_mut(node) {
                    Some(v) => v,
                    None => st.replays.entry(node.to_string()).or_default(),
                };
                let i = match per_gpu.iter().position(|e| e.0 == g.index) {
                    Some(i) => i,
                    None => {
                        per_gpu.push((g.index, count, None));
                        per_gpu.len() - 1
                    }
                };
                let e = &mut per_gpu[i];
                if count > e.1 {
                    e.2 = Some(now);
                }
                e.1 = count;
                if e.2.is_some_and(|t| now - t <= 5 * 60_000) {
                    out.push(Condition {
                        rule: "pcie_replays",
                        subject: format!("node:{node}:gpu{}", g.index),
                        severity: "warning",
                        summary: format!(
                            "{node} GPU {}: PCIe replay counter rising ({count}): check the link or riser",
                            g.index
                        ),
                        link: units::node_href(node),
                        drain_node: None,
                    });
                }
            }
            let thermal = gpus
                .iter()
                .filter(|g| g.throttle.is_some_and(|t| t.is_thermal()))
                .count();
            if thermal > 0
                && st.held(
                    "thermal_throttling",
                    node,
                    now,
                    cfg.thermal_throttle_ms,
                    &mut seen,
                )
            {
                out.push(Condition {
                    rule: "thermal_throttling",
                    subject: format!("node:{node}"),
                    severity: "warning",
                    summary: format!(
                        "{node}: {thermal} GPU(s) thermally throttled for over {} min",
                        cfg.thermal_throttle_ms / 60_000
                    ),
                    link: units::node_href(node),
                    drain_node: None,
                });
            }
        }
    }

    for rack in &ov.racks {
        if let (Some(t), limit) = (rack.inlet_celsius, rack.inlet_limit_celsius) {
            if limit > 0.0 && t > limit {
                out.push(Condition {
                    rule: "inlet_over_limit",
                    subject: format!("rack:{}", rack.name),
                    severity: "critical",
                    summary: format!("rack {}: inlet {t:.0} °C, over its {limit:.0} °C limit — GPUs will throttle", rack.name),
                    link: "/thermal".into(),
                    drain_node: None,
                });
            }
        }
        match rack.load_ratio() {
            Some(x) if x > 1.0 => out.push(Condition {
                rule: "rack_power_over_limit",
                subject: format!("rack:{}", rack.name),
                severity: "critical",
                summary: format!(
                    "rack {}: {:.1} kW, over its {:.1} kW limit",
                    rack.name,
                    rack.power_watts.unwrap_or(0.0) / 1000.0,
                    rack.power_limit_watts / 1000.0
                ),
                link: "/racks".into(),
                drain_node: None,
            }),
            Some(x)
                if x > cfg.rack_power_high_ratio
                    && st.held(
                        "rack_power_high",
                        &rack.name,
                        now,
                        cfg.rack_power_high_ms,
                        &mut seen,
                    ) =>
            {
                out.push(Condition {
                    rule: "rack_power_high",
                    subject: format!("rack:{}", rack.name),
                    severity: "warning",
                    summary: format!(
                        "rack {}: over {:.0}% of its power limit for {} min",
                        rack.name,
                        cfg.rack_power_high_ratio * 100.0,
                        cfg.rack_power_high_ms / 60_000
                    ),
                    link: "/racks".into(),
                    drain_node: None,
                });
            }
            _ => {}
        }
    }

    coolant(ov, f, &mut out);
    shelves(ov, &mut out);
    fabric(ov, &mut out);
    layout_disagrees(ov, &mut out);

    for n in &ov.nodes {
        if matches!(n.state, NodeState::NotResponding | NodeState::Down) {
            out.push(Condition {
                rule: "node_not_responding",
                subject: format!("node:{}", n.name),
                severity: "warning",
                summary: format!("{}: {} in Slurm", n.name, n.state.label()),
                link: units::node_href(&n.name),
                drain_node: None,
            });
        }
    }

    for t in f.targets {
        if t.consecutive_failures >= cfg.target_failures {
            out.push(Condition {
                rule: "target_down",
                subject: format!("target:{}", t.url),
                severity: "warning",
                summary: format!(
                    "{} failed {} scrapes in a row: {}",
                    t.url,
                    t.consecutive_failures,
                    t.last_error.as_deref().unwrap_or("?")
                ),
                link: "/api/targets".into(),
                drain_node: None,
            });
        }
    }

    let running: Vec<&SchedJob> = f
        .jobs
        .iter()
        .filter(|j| j.job.state == JobState::Running)
        .collect();
    for j in &running {
        let id = j.job.id;
        if let Some(samples) = f.nccl.get(&id) {
            let k = cfg.nccl_consecutive.max(1);
            if samples.len() >= k {
                let last: Vec<f64> = samples[samples.len() - k..].iter().map(|s| s.1).collect();
                let baseline = (samples.len() >= cfg.nccl_baseline_steps + k)
                    .then(|| {
                        median(
                            &samples[..cfg.nccl_baseline_steps]
                                .iter()
                                .map(|s| s.1)
                                .collect::<Vec<_>>(),
                        )
                    })
                    .flatten();
                // Like with like: the job's own baseline once it has one, else the cluster's
                // threshold for small messages.
                let limit = match baseline {
                    Some(b) => b * cfg.nccl_baseline_factor,
                    None => cfg.nccl_latency_us,
                };
                if last.iter().all(|&l| l > limit) {
                    out.push(Condition {
                        rule: "nccl_latency",
                        subject: format!("job:{id}"),
                        severity: "warning",
                        summary: format!(
                            "job {id}: NCCL all-reduce over {limit:.0} us for {k} steps in a row (last {:.0} us){}",
                            last[k - 1],
                            baseline.map(|b| format!("; its baseline is {b:.0} us")).unwrap_or_default()
                        ),
                        link: format!("/jobs/{id}"),
                        drain_node: None,
                    });
                }
            }
        }
        if let Some(&last) = f.last_checkpoint_ms.get(&id) {
            if now - last > cfg.checkpoint_overdue_ms {
                out.push(Condition {
                    rule: "checkpoint_overdue",
                    subject: format!("job:{id}"),
                    severity: "warning",
                    summary: format!(
                        "job {id} ({}): no checkpoint for {}",
                        j.job.name,
                        app::units::duration_ms(now - last)
                    ),
                    link: "/jobs".into(),
                    drain_node: None,
                });
            }
        }
    }
    if let Some(r) = f.readings {
        radar::evaluate(cfg, r, f.jobs, now, st, &mut seen, &mut out);
    }
    st.retain(&seen);
    out.sort();
    out.dedup_by(|a, b| a.rule == b.rule && a.subject == b.subject);
    out
}

pub mod radar;
#[cfg(test)]
mod tests;
