//! Rack power against the rack's limit.

use super::{Condition, RuleState, Tick};

/// A rack drawing over its limit is `rack_power_over_limit` (critical); over
/// `rack_power_high_ratio` of it for `rack_power_high_ms`, `rack_power_high` (a warning).
/// Over the limit, the high hold is not kept: it starts again below it.
pub(super) fn rack_power(t: &Tick<'_>, st: &mut RuleState, out: &mut Vec<Condition>) {
    let cfg = t.cfg;
    for rack in &t.ov.racks {
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
                    && st.held("rack_power_high", &rack.name, t.now, cfg.rack_power_high_ms) =>
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
}
