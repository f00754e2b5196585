//! Whether a tick carries what a rule reads about a subject. A condition that vanished
//! while its inputs are missing (a scrape missed, an exporter down, a rack half dark) is
//! unknown, not false: the alert stays open, marked "no data", instead of resolving and
//! firing again at the next scrape.

use app::model::{GpuReading, NodeState};

use super::Facts;
use crate::telemetry::{NodeReading, Readings};

/// Rules that read no telemetry: the scheduler, the scrape targets' health, the layout
/// and the store's NCCL and checkpoint facts always say what they say.
const WITHOUT_TELEMETRY: [&str; 5] = [
    "node_not_responding",
    "target_down",
    "layout_disagrees",
    "nccl_latency",
    "checkpoint_overdue",
];

/// Whether `f` holds the readings `rule` judges `subject` (`node:…`, `rack:…`, `job:…`,
/// `target:…`) by.
pub fn has_data(rule: &str, subject: &str, f: &Facts<'_>) -> bool {
    if WITHOUT_TELEMETRY.contains(&rule) {
        return true;
    }
    // The scheduler's own: its diagnostics, fresh.
    if subject.starts_with("scheduler:") {
        return f.health.is_some();
    }
    let Some(r) = f.readings else {
        return false;
    };
    let mut parts = subject.split(':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("node"), Some(node), _) => match rule {
            "inlet_over_limit" => bmc(node_reading(r, node)),
            _ => gpus_reporting(r, node),
        },
        (Some("rack"), Some(rack), _) => match rule {
            "power_shelf_down" | "power_shelf_degraded" => r
                .racks
                .iter()
                .any(|x| x.rack == rack && !x.shelves.is_empty()),
            "nvlink_switch_tray_down" | "nvlink_links_down" => {
                r.racks.iter().any(|x| x.rack == rack && x.fabric.is_some())
            }
            // Sums and maxima over the rack's nodes: each node in service must report.
            _ => {
                let Some(inv) = f.inventory else {
                    return false;
                };
                let mut any = false;
                for n in inv.nodes.iter().filter(|n| n.rack == rack) {
                    let reading = node_reading(r, &n.name);
                    if reading.is_some_and(|x| x.state == NodeState::Down) {
                        continue;
                    }
                    if !bmc(reading) {
                        return false;
                    }
                    any = true;
                }
                any
            }
        },
        // A straggler's subject names its GPU's node: `job:ID:NODE:gpuN`.
        (Some("job"), Some(_), Some(node)) => gpus_reporting(r, node),
        (Some("job"), Some(id), None) => {
            let Ok(id) = id.parse::<u64>() else {
                return true;
            };
            match f.jobs.iter().find(|j| j.job.id == id) {
                Some(j) => j.job.nodes.iter().all(|n| gpus_reporting(r, n)),
                // The job is gone: its condition is over, not unknown.
                None => true,
            }
        }
        _ => true,
    }
}

fn node_reading<'a>(r: &'a Readings, node: &str) -> Option<&'a NodeReading> {
    r.node(node)
}

/// Its BMC reported within the freshness window.
fn bmc(n: Option<&NodeReading>) -> bool {
    n.is_some_and(|n| n.power_watts.is_some() || n.inlet_celsius.is_some() || n.coolant.is_some())
}

/// A GPU reading from a node that reports: the readings list a silent node's GPUs too,
/// with nothing known about them.
fn reporting(g: &GpuReading) -> bool {
    g.power_watts.is_some()
        || g.temp_celsius.is_some()
        || g.sm_clock_mhz.is_some()
        || g.sm_active_ratio.is_some()
        || g.ecc_dbe_total.is_some()
        || g.last_xid.is_some()
        || g.throttle.is_some()
}

fn gpus_reporting(r: &Readings, node: &str) -> bool {
    r.gpus_of(node).any(reporting) || node_reading(r, node).is_some_and(|n| !n.switches.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::RackReadings;

    fn readings() -> Readings {
        let inv = crate::sim::layout(8, "t");
        let mut r = Readings {
            at_ms: 0,
            ..Readings::default()
        };
        for n in &inv.nodes {
            let mut nr = NodeReading::silent(n.name.clone(), NodeState::Allocated);
            nr.power_watts = Some(5_000.0);
            r.nodes.push(nr);
            for g in &n.gpus {
                r.gpus.push(GpuReading {
                    node: n.name.clone(),
                    index: g.index,
                    power_watts: Some(600.0),
                    ..GpuReading::default()
                });
            }
        }
        r
    }

    #[test]
    fn a_silent_node_has_no_data_for_its_gpu_rules_only() {
        let inv = crate::sim::layout(8, "t");
        let mut r = readings();
        for g in r.gpus.iter_mut().filter(|g| g.node == "gpu002") {
            *g = GpuReading {
                node: g.node.clone(),
                index: g.index,
                ..GpuReading::default()
            };
        }
        let f = Facts {
            readings: Some(&r),
            inventory: Some(&inv),
            ..Facts::default()
        };
        assert!(!has_data("ecc_double_bit", "node:gpu002", &f));
        assert!(has_data("ecc_double_bit", "node:gpu001", &f));
        assert!(has_data("node_not_responding", "node:gpu002", &f));
        assert!(!has_data("straggler", "job:7:gpu002:gpu3", &f));
        assert!(has_data("target_down", "target:http://x/metrics", &f));
        // Its BMC still reports: the rack's sums are whole.
        let rack = &inv.nodes[1].rack;
        assert!(has_data(
            "rack_power_over_limit",
            &format!("rack:{rack}"),
            &f
        ));
        let f = Facts {
            readings: None,
            ..Facts::default()
        };
        assert!(!has_data("ecc_double_bit", "node:gpu001", &f));
        assert!(has_data("nccl_latency", "job:7", &f));
    }

    #[test]
    fn a_rack_with_a_dark_node_in_service_has_no_data_for_its_sums() {
        let inv = crate::sim::layout(8, "t");
        let rack = inv.nodes[0].rack.clone();
        let mut r = readings();
        r.nodes[0].power_watts = None;
        let f = Facts {
            readings: Some(&r),
            inventory: Some(&inv),
            ..Facts::default()
        };
        let subject = format!("rack:{rack}");
        assert!(!has_data("rack_power_high", &subject, &f));
        // A node the scheduler has down is not expected to report.
        r.nodes[0].state = NodeState::Down;
        let f = Facts {
            readings: Some(&r),
            inventory: Some(&inv),
            ..Facts::default()
        };
        assert!(has_data("rack_power_high", &subject, &f));
        // Shelves and fabric come per rack.
        assert!(!has_data("power_shelf_down", &subject, &f));
        r.racks.push(RackReadings {
            rack: rack.clone(),
            shelves: vec![Default::default()],
            ..RackReadings::default()
        });
        let f = Facts {
            readings: Some(&r),
            inventory: Some(&inv),
            ..Facts::default()
        };
        assert!(has_data("power_shelf_down", &subject, &f));
        assert!(!has_data("nvlink_links_down", &subject, &f));
    }
}
