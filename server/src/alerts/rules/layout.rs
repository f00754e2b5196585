//! The layout file against DCGM: where an operator would go to pull a tray.

use super::{Condition, RuleState, Tick};

/// Racks whose trays DCGM places elsewhere than the layout file does (a warning): the
/// tray an operator would pull for repair is not where the layout says.
pub(super) fn layout_disagrees(t: &Tick<'_>, _: &mut RuleState, out: &mut Vec<Condition>) {
    for rack in &t.ov.racks {
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
