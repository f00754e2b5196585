//! Heat: GPUs thermally throttled too long, and racks breathing air over their inlet
//! limit.

use app::units;

use super::{Condition, RuleState, Tick};

/// A node with GPUs thermally throttled for `thermal_throttle_ms` (a warning).
pub(super) fn throttling(t: &Tick<'_>, st: &mut RuleState, out: &mut Vec<Condition>) {
    let cfg = t.cfg;
    for (node, gpus) in t.gpus_by_node() {
        let thermal = gpus
            .iter()
            .filter(|g| g.throttle.is_some_and(|r| r.is_thermal()))
            .count();
        if thermal > 0 && st.held("thermal_throttling", node, t.now, cfg.thermal_throttle_ms) {
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

/// A rack's inlet over its limit (critical: its GPUs will throttle).
pub(super) fn inlet_over_limit(t: &Tick<'_>, _: &mut RuleState, out: &mut Vec<Condition>) {
    for rack in &t.ov.racks {
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
    }
}
