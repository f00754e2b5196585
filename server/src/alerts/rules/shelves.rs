//! Racks' power shelves: a shelf down or degraded, the rack's limit against its bus bar,
//! and who draws its power.

use super::{Condition, RuleState, Tick};

/// Racks' power shelves: a shelf down (no supply delivering, or missing from its
/// controller's reading) is `power_shelf_down`, critical when the rack draws more than
/// its lowered limit, else a warning; a shelf with a supply down or in warning is
/// `power_shelf_degraded` (a warning). Both name the shelves, the rack's limit against its
/// bus bar, and the jobs drawing its power with their share.
pub(super) fn power_shelves(t: &Tick<'_>, _: &mut RuleState, out: &mut Vec<Condition>) {
    let ov = t.ov;
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
