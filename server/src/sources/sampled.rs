//! A share of the simulator's nodes read over HTTP (`sim.scrape_every`): at 16,384 nodes
//! one machine cannot both serve and scrape every exporter every 10 s, so every Nth node's
//! (and rack's) exporters are scraped as a site's would be, by the scrape task, and the
//! rest are read directly. The scrape path is then measured at fleet size on its share,
//! and every figure still covers the whole fleet.

use std::collections::HashSet;

use app::model::{GpuReading, Inventory};

use crate::telemetry::ingest::{NodeTarget, RackTarget};
use crate::telemetry::Readings;

/// Which nodes and racks are scraped: every `every`th of each, in the inventory's order
/// (node 0 of every rack at 8 nodes a rack and `every` = 8).
pub struct Sampled {
    nodes: HashSet<String>,
    racks: HashSet<String>,
}

impl Sampled {
    pub fn new(inv: &Inventory, every: usize) -> Sampled {
        let every = every.max(1);
        let pick = |names: Vec<&String>| -> HashSet<String> {
            names.into_iter().step_by(every).cloned().collect()
        };
        Sampled {
            nodes: pick(inv.nodes.iter().map(|n| &n.name).collect()),
            racks: pick(inv.racks.iter().map(|r| &r.name).collect()),
        }
    }

    /// The targets of the sampled nodes and racks only.
    pub fn targets(
        &self,
        nodes: Vec<NodeTarget>,
        racks: Vec<RackTarget>,
    ) -> (Vec<NodeTarget>, Vec<RackTarget>) {
        (
            nodes
                .into_iter()
                .filter(|t| self.nodes.contains(&t.node))
                .collect(),
            racks
                .into_iter()
                .filter(|t| self.racks.contains(&t.rack))
                .collect(),
        )
    }

    /// `direct` with the sampled nodes, their GPUs and the sampled racks as `scraped` has
    /// them: what the scrape holds fresh, nothing where it holds nothing (a sampled node
    /// whose exporters did not answer is silent, as it would be on a real site).
    pub fn merge(&self, direct: &Readings, scraped: &Readings) -> Readings {
        let mut out = Readings {
            at_ms: direct.at_ms,
            gpus: direct.gpus.clone(),
            racks: Vec::with_capacity(direct.racks.len()),
            nodes: direct.nodes.clone(),
            jobs: direct.jobs.clone(),
            index: Default::default(),
        };
        for n in out
            .nodes
            .iter_mut()
            .filter(|n| self.nodes.contains(&n.name))
        {
            let state = n.state;
            *n = match scraped.node(&n.name) {
                Some(s) => s.clone(),
                None => crate::telemetry::NodeReading::silent(n.name.clone(), state),
            };
            // The scheduler's state is the simulator's, whatever the scrape saw.
            n.state = state;
        }
        for g in out.gpus.iter_mut().filter(|g| self.nodes.contains(&g.node)) {
            let seen = scraped
                .gpus_of(&g.node)
                .find(|s| s.index == g.index)
                .cloned();
            *g = seen.unwrap_or_else(|| GpuReading {
                node: g.node.clone(),
                index: g.index,
                ..GpuReading::default()
            });
        }
        for r in &direct.racks {
            if !self.racks.contains(&r.rack) {
                out.racks.push(r.clone());
            } else if let Some(s) = scraped.racks.iter().find(|s| s.rack == r.rack) {
                out.racks.push(s.clone());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Sim;

    #[test]
    fn sampled_nodes_come_from_the_scrape_and_the_rest_from_the_simulator() {
        let mut sim = Sim::with_profile(crate::sim::Profile::Nvl72, 72, 7, "t", 1_795_968_000_000);
        sim.advance_to(1_795_968_000_000 + 600_000);
        let direct = sim.readings();
        let inv = sim.inventory();
        let s = Sampled::new(inv, 8);
        assert_eq!(s.nodes.len(), 9, "72 trays, every 8th");
        assert_eq!(s.racks.len(), 1, "4 racks, every 8th");
        // What a scrape held: the first sampled node with other values, the rest silent.
        let first = inv.nodes[0].name.clone();
        let mut scraped = Readings {
            nodes: vec![crate::telemetry::NodeReading {
                power_watts: Some(1.0),
                ..crate::telemetry::NodeReading::silent(first.clone(), app::model::NodeState::Down)
            }],
            gpus: vec![GpuReading {
                node: first.clone(),
                index: 0,
                power_watts: Some(2.0),
                ..GpuReading::default()
            }],
            ..Readings::default()
        };
        scraped.at_ms = direct.at_ms;
        let m = s.merge(&direct, &scraped);
        assert_eq!(m.nodes.len(), direct.nodes.len());
        assert_eq!(m.gpus.len(), direct.gpus.len());
        let n0 = m.node(&first).expect("node");
        assert_eq!(n0.power_watts, Some(1.0));
        assert_eq!(
            n0.state, direct.nodes[0].state,
            "the scheduler's state stays"
        );
        let g: Vec<_> = m.gpus_of(&first).map(|g| g.power_watts).collect();
        assert_eq!(g, [Some(2.0), None, None, None]);
        // Node 8 is sampled and was not scraped: silent. Node 1 is not: as the simulator has it.
        let (n1, n8) = (&inv.nodes[1].name, &inv.nodes[8].name);
        assert_eq!(m.node(n8).and_then(|n| n.power_watts), None);
        assert!(m.gpus_of(n8).all(|g| g.power_watts.is_none()));
        assert_eq!(m.node(n1), direct.node(n1));
        assert!(m.gpus_of(n1).all(|g| g.power_watts.is_some()));
        // Rack 0 is sampled and its exporters said nothing; the others are the simulator's.
        assert!(m.racks.iter().all(|r| r.rack != inv.racks[0].name));
        assert_eq!(m.racks.len(), direct.racks.len() - 1);
        // The targets: the sampled ones only.
        let (nt, rt) = s.targets(
            crate::telemetry::ingest::targets(inv, "g/{node}", "b/{node}"),
            crate::telemetry::ingest::rack_targets(inv, Some("r/{rack}"), None),
        );
        assert_eq!(nt.len(), 9);
        assert_eq!(rt.len(), 1);
        assert_eq!(nt[1].node, inv.nodes[8].name);
    }
}
