//! What the scrape source scrapes: each node's exporters ([`NodeTarget`]) and each rack's
//! ([`RackTarget`]) from URL templates, and which exporter a target is ([`Kind`]).

use std::time::Duration;

use app::model::Inventory;

/// One node's exporters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeTarget {
    pub node: String,
    pub gpu_url: String,
    pub bmc_url: String,
    /// node_exporter, where configured: InfiniBand port counters.
    pub node_url: Option<String>,
}

impl NodeTarget {
    /// Every exporter URL of the node, with what it is.
    pub(super) fn urls(&self) -> impl Iterator<Item = (&String, Kind)> {
        [(&self.gpu_url, Kind::Gpu), (&self.bmc_url, Kind::Bmc)]
            .into_iter()
            .chain(self.node_url.iter().map(|u| (u, Kind::Node)))
    }
}

/// Adds each node's node_exporter URL from `template` (`{node}` is the node name).
pub fn with_node_exporter(mut targets: Vec<NodeTarget>, template: Option<&str>) -> Vec<NodeTarget> {
    if let Some(t) = template {
        for n in &mut targets {
            n.node_url = Some(t.replace("{node}", &n.node));
        }
    }
    targets
}

/// A rack's exporter: its power controller's (its power shelves, [`Kind::Shelf`]) or its
/// NVLink domain's NMX-T ([`Kind::Fabric`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RackTarget {
    pub rack: String,
    pub url: String,
    pub kind: Kind,
}

/// Targets for the racks of `inv` that have power shelves (from `shelf_template`) and
/// NVLink switch trays (from `fabric_template`); `{rack}` is the rack name.
pub fn rack_targets(
    inv: &Inventory,
    shelf_template: Option<&str>,
    fabric_template: Option<&str>,
) -> Vec<RackTarget> {
    let mut out = Vec::new();
    for (t, kind) in [
        (shelf_template, Kind::Shelf),
        (fabric_template, Kind::Fabric),
    ] {
        let Some(t) = t else { continue };
        out.extend(
            inv.racks
                .iter()
                .filter(|r| match kind {
                    Kind::Shelf => r.power_shelves.is_some(),
                    _ => r.switch_trays.is_some(),
                })
                .map(|r| RackTarget {
                    rack: r.name.clone(),
                    url: t.replace("{rack}", &r.name),
                    kind,
                }),
        );
    }
    out
}

/// An NMX-T reading is a whole NVLink domain's ports (an NVL72's 1,296 GPU ports and as
/// many of its switches): it is read at most this often, however short the scrape
/// interval, and stays fresh for three of these.
pub const FABRIC_MIN_INTERVAL: Duration = Duration::from_secs(5);

/// Targets for every node of `inv` from URL templates in which `{node}` is the node name.
pub fn targets(inv: &Inventory, gpu_template: &str, bmc_template: &str) -> Vec<NodeTarget> {
    inv.nodes
        .iter()
        .map(|n| NodeTarget {
            node: n.name.clone(),
            gpu_url: gpu_template.replace("{node}", &n.name),
            bmc_url: bmc_template.replace("{node}", &n.name),
            node_url: None,
        })
        .collect()
}

/// Which exporter of a node a target is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gpu,
    Bmc,
    Node,
    /// A rack's power controller (the owner is the rack, not a node).
    Shelf,
    /// A rack's NVLink domain's NMX-T (the owner is the rack).
    Fabric,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_name_every_node() {
        let inv = crate::sim::layout(16, "t");
        let t = targets(
            &inv,
            "http://{node}:9400/metrics",
            "http://bmc-{node}:9290/metrics",
        );
        assert_eq!(t.len(), 16);
        assert_eq!(t[2].gpu_url, "http://gpu003:9400/metrics");
        assert_eq!(t[2].bmc_url, "http://bmc-gpu003:9290/metrics");
    }
}
