//! Racks' NVLink fabric (NMX-T): switch trays down and GPU links not active, naming the
//! compute trays cut and the jobs running on them.

use super::{Condition, RuleState, Tick};

/// Racks' NVLink switch trays (NMX-T): a switch tray with not one link active, or one the
/// layout gives missing from a fresh reading, is `nvlink_switch_tray_down` (critical: every
/// GPU of the domain loses that tray's share of its NVLink bandwidth, and jobs running
/// there see NVLink errors); GPU links not active otherwise are `nvlink_links_down` (a
/// warning). Both name the rack, the switch trays, the compute trays cut and the jobs
/// running on them.
pub(super) fn nvlink(t: &Tick<'_>, _: &mut RuleState, out: &mut Vec<Condition>) {
    let ov = t.ov;
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
