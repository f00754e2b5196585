//! Liquid racks' coolant loops: a leak detector critical (critical) or warning (warning),
//! trays under the flow limit and return over supply by more than the delta-T limit
//! (warnings). A leak names the rack, its trays, the jobs running in the rack and what
//! taking the rack out of service costs in free segments.

use super::{Condition, RuleState, Tick};

/// A leak detector critical is `coolant_leak` (critical), in warning
/// `coolant_leak_warning` (a warning).
pub(super) fn leak(t: &Tick<'_>, _: &mut RuleState, out: &mut Vec<Condition>) {
    let (ov, f) = (t.ov, t.f);
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
                Some(inv) => {
                    crate::cluster::segments::drain_impact(inv, f.nodes, f.jobs, &rack_nodes)
                }
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
                    c.leaking.join(", "),
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
    }
}

/// Trays under the flow limit (a warning per rack).
pub(super) fn flow_low(t: &Tick<'_>, _: &mut RuleState, out: &mut Vec<Condition>) {
    for rack in &t.ov.racks {
        let Some(c) = &rack.coolant else { continue };
        if !c.low_flow.is_empty() {
            out.push(Condition {
                rule: "coolant_flow_low",
                subject: format!("rack:{}", rack.name),
                severity: "warning",
                summary: format!(
                    "rack {}: coolant flow under {:.1} L/min at tray {} (rack total {} L/min)",
                    rack.name,
                    c.flow_min_lpm.unwrap_or(0.0),
                    c.low_flow.join(", "),
                    c.flow_lpm.map_or("-".to_string(), |x| format!("{x:.1}"))
                ),
                link: "/thermal".into(),
                drain_node: None,
            });
        }
    }
}

/// Return over supply by more than the rack's delta-T limit (a warning).
pub(super) fn delta_t_high(t: &Tick<'_>, _: &mut RuleState, out: &mut Vec<Condition>) {
    for rack in &t.ov.racks {
        let Some(c) = &rack.coolant else { continue };
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
