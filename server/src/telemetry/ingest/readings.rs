//! [`Ingest::readings`]: the scrape source's [`Readings`] at one instant, from the latest
//! readings still fresh.

use std::collections::HashMap;

use app::model::{GpuReading, Inventory, Job, NodeState, UnixMs};

use super::{Ingest, FABRIC_MIN_INTERVAL};
use crate::telemetry::{NodeReading, RackReadings, Readings};

impl Ingest {
    /// Readings as of `now_ms` from what was scraped no longer than `fresh_ms` ago, with the
    /// scheduler's view of nodes and jobs: each node's own readings and each rack's
    /// shelves and fabric, nothing summed (aggregation does that).
    pub fn readings(
        &self,
        inv: &Inventory,
        now_ms: UnixMs,
        at_ms: UnixMs,
        fresh_ms: i64,
        nodes: impl IntoIterator<Item = (String, NodeState)>,
        jobs: Vec<Job>,
    ) -> Readings {
        let fresh = |t: Option<UnixMs>| t.is_some_and(|t| now_ms - t <= fresh_ms);
        let fabric_fresh_ms = fresh_ms.max(3 * FABRIC_MIN_INTERVAL.as_millis() as i64);
        let fabric_fresh = |t: Option<UnixMs>| t.is_some_and(|t| now_ms - t <= fabric_fresh_ms);
        let nodes = nodes.into_iter();
        let mut gpus = Vec::with_capacity(inv.gpu_count());
        let mut out = Vec::with_capacity(nodes.size_hint().0);
        // Looked up only for a node that is not reporting, to list its GPUs: where the
        // scheduler lists nodes in the inventory's order, by position, else by name.
        let mut inv_node: Option<HashMap<&str, &app::model::Node>> = None;
        for (k, (name, state)) in nodes.enumerate() {
            let l = self.latest.get(&name);
            let mut n = NodeReading::silent(name, state);
            match l.filter(|l| fresh(l.gpus_at_ms)) {
                Some(l) => {
                    gpus.extend_from_slice(&l.gpus);
                    n.places.clone_from(&l.places);
                    n.switches.clone_from(&l.switches);
                }
                // Not reporting: its GPUs are there, with nothing known about them.
                None => {
                    let known = match inv.nodes.get(k).filter(|x| x.name == n.name) {
                        Some(x) => Some(x),
                        None => inv_node
                            .get_or_insert_with(|| {
                                inv.nodes.iter().map(|n| (n.name.as_str(), n)).collect()
                            })
                            .get(n.name.as_str())
                            .copied(),
                    };
                    gpus.extend(known.into_iter().flat_map(|k| &k.gpus).map(|g| GpuReading {
                        node: n.name.clone(),
                        index: g.index,
                        ..GpuReading::default()
                    }));
                }
            }
            if let Some(l) = l.filter(|l| fresh(l.bmc_at_ms)) {
                n.power_watts = l.power_watts;
                n.inlet_celsius = l.inlet_celsius;
                n.coolant = Some(l.coolant).filter(|c| !c.is_empty());
            }
            if let Some(l) = l.filter(|l| fresh(l.node_at_ms)) {
                n.ib_bytes_per_second = l.ib_bytes_per_second;
                n.ib_link_downed_total = l.ib_link_downed;
            }
            out.push(n);
        }
        // Only the racks whose rack-level producers have something fresh.
        let racks = inv
            .racks
            .iter()
            .filter_map(|r| {
                let l = self.rack_latest.get(&r.name)?;
                let shelves = if fresh(l.at_ms) {
                    l.shelves.clone()
                } else {
                    Vec::new()
                };
                let fabric = fabric_fresh(l.fabric_at_ms)
                    .then(|| l.fabric.clone())
                    .flatten();
                (!shelves.is_empty() || fabric.is_some()).then(|| RackReadings {
                    rack: r.name.clone(),
                    shelves,
                    fabric,
                    ..RackReadings::default()
                })
            })
            .collect();
        Readings {
            at_ms,
            gpus,
            racks,
            nodes: out,
            jobs,
            index: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::ingest::{Kind, PowerMapping};
    use crate::telemetry::scrape::Client;

    #[test]
    fn stale_nodes_contribute_nothing() {
        let inv = crate::sim::layout(8, "t");
        let mut ing = Ingest::new(
            Client::new(
                Default::default(),
                crate::tls::client_config(None).expect("tls"),
            ),
            Vec::new(),
            PowerMapping::default(),
            4,
        );
        ing.take(
            "gpu001",
            Kind::Bmc,
            b"ipmi_dcmi_power_consumption_watts 5000\n",
            1_000,
        );
        ing.take(
            "gpu002",
            Kind::Bmc,
            b"ipmi_dcmi_power_consumption_watts 4000\n",
            9_000,
        );
        let nodes: Vec<_> = inv
            .nodes
            .iter()
            .map(|n| (n.name.clone(), NodeState::Idle))
            .collect();
        let r = ing.readings(&inv, 10_000, 10_000, 2_000, nodes.clone(), Vec::new());
        let power: Vec<_> = r.nodes.iter().map(|n| n.power_watts).collect();
        assert_eq!(power[..3], [None, Some(4000.0), None]);
        let r = ing.readings(&inv, 20_000, 20_000, 2_000, nodes, Vec::new());
        assert!(r.nodes.iter().all(|n| n.power_watts.is_none()));
    }
}
