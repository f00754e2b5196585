//! A node's GPUs and NVSwitches: fatal and hot NVSwitches, double-bit ECC errors,
//! drain-class XIDs, rows remapped for uncorrectable errors and rising PCIe replays. A node
//! out of service fires none but the replays (the action was taken).

use app::units;

use super::{Condition, RuleState, Tick};

/// NVSwitches (HGX baseboards): a fatal SXid takes the node's NVLink fabric down until the
/// switch is reset (`nvswitch_fatal`, critical, a drain-class condition); a switch at its
/// slowdown temperature is `nvswitch_hot` (a warning).
pub(super) fn nvswitch(t: &Tick<'_>, _: &mut RuleState, out: &mut Vec<Condition>) {
    let Some(r) = t.f.readings else { return };
    for n in &r.nodes {
        let (node, sws) = (&n.name, &n.switches);
        if sws.is_empty() || t.out_of_service(node) {
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
            let jobs: Vec<String> =
                t.ov.nodes
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
}

/// Double-bit ECC errors on any of a node's GPUs (critical, drain-class).
pub(super) fn ecc_double_bit(t: &Tick<'_>, _: &mut RuleState, out: &mut Vec<Condition>) {
    for (node, gpus) in t.gpus_by_node() {
        let dbe: Vec<u32> = gpus
            .iter()
            .filter(|g| g.ecc_dbe_total.is_some_and(|x| x > 0))
            .map(|g| g.index)
            .collect();
        if !dbe.is_empty() && !t.out_of_service(node) {
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
    }
}

/// A GPU's last XID, when NVIDIA's catalog gives it a drain-class action (critical, per
/// GPU).
pub(super) fn xid(t: &Tick<'_>, _: &mut RuleState, out: &mut Vec<Condition>) {
    for (node, gpus) in t.gpus_by_node() {
        for g in gpus {
            let Some(x) = g.last_xid else { continue };
            let Some((meaning, action)) = app::xid::lookup(x) else {
                continue;
            };
            if action.is_drain_class() && !t.out_of_service(node) {
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
    }
}

/// Rows remapped for uncorrectable memory errors on any of a node's GPUs (critical,
/// drain-class).
pub(super) fn remapped_rows(t: &Tick<'_>, _: &mut RuleState, out: &mut Vec<Condition>) {
    for (node, gpus) in t.gpus_by_node() {
        let remapped: Vec<u32> = gpus
            .iter()
            .filter(|g| g.remapped_rows_uncorrectable.is_some_and(|x| x > 0))
            .map(|g| g.index)
            .collect();
        if !remapped.is_empty() && !t.out_of_service(node) {
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
    }
}

/// PCIe replays rising (a warning, per GPU): firing while the count rose within the last 5
/// minutes. The first count seen is a baseline, not a rise.
pub(super) fn pcie_replays(t: &Tick<'_>, st: &mut RuleState, out: &mut Vec<Condition>) {
    let now = t.now;
    for (node, gpus) in t.gpus_by_node() {
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
            if e.2.is_some_and(|rose| now - rose <= 5 * 60_000) {
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
    }
}
