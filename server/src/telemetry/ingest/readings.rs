//! [`Ingest::readings`]: the scrape source's [`Readings`] at one instant, from the latest
//! readings still fresh.

use std::collections::HashMap;

use app::model::{GpuReading, Inventory, Job, NodeState, RackReading, UnixMs};

use super::{Ingest, FABRIC_MIN_INTERVAL};
use crate::telemetry::Readings;

impl Ingest {
    /// Readings as of `now_ms` from what was scraped no longer than `fresh_ms` ago, with the
    /// scheduler's view of nodes and jobs.
    pub fn readings(
        &self,
        inv: &Inventory,
        now_ms: UnixMs,
        at_ms: UnixMs,
        fresh_ms: i64,
        nodes: Vec<(String, NodeState)>,
        jobs: Vec<Job>,
    ) -> Readings {
        let fresh = |t: Option<UnixMs>| t.is_some_and(|t| now_ms - t <= fresh_ms);
        let fabric_fresh_ms = fresh_ms.max(3 * FABRIC_MIN_INTERVAL.as_millis() as i64);
        let fabric_fresh = |t: Option<UnixMs>| t.is_some_and(|t| now_ms - t <= fabric_fresh_ms);
        let mut gpus = Vec::with_capacity(inv.gpu_count());
        let mut node_power = Vec::with_capacity(nodes.len());
        let mut ib_rate = Vec::with_capacity(nodes.len());
        let mut ib_downs = Vec::with_capacity(nodes.len());
        let mut coolant = Vec::with_capacity(nodes.len());
        let mut places = Vec::with_capacity(nodes.len());
        let mut switches = Vec::with_capacity(nodes.len());
        let mut rack_power: HashMap<&str, f64> = HashMap::new();
        let mut rack_inlet: HashMap<&str, f64> = HashMap::new();
        let inv_node: HashMap<&str, &app::model::Node> =
            inv.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        for (name, _) in &nodes {
            let l = self.latest.get(name);
            let known = inv_node.get(name.as_str());
            places.push(
                l.filter(|l| fresh(l.gpus_at_ms))
                    .map(|l| l.places.clone())
                    .unwrap_or_default(),
            );
            switches.push(
                l.filter(|l| fresh(l.gpus_at_ms))
                    .map(|l| l.switches.clone())
                    .unwrap_or_default(),
            );
            match l.filter(|l| fresh(l.gpus_at_ms)) {
                Some(l) => gpus.extend(l.gpus.iter().cloned()),
                // Not reporting: its GPUs are there, with nothing known about them.
                None => gpus.extend(known.into_iter().flat_map(|n| &n.gpus).map(|g| GpuReading {
                    node: name.clone(),
                    index: g.index,
                    ..GpuReading::default()
                })),
            }
            let bmc = l.filter(|l| fresh(l.bmc_at_ms));
            let power = bmc.and_then(|l| l.power_watts);
            node_power.push(power);
            coolant.push(bmc.map(|l| l.coolant).filter(|c| !c.is_empty()));
            let node_exp = l.filter(|l| fresh(l.node_at_ms));
            ib_rate.push(node_exp.and_then(|l| l.ib_bytes_per_second));
            ib_downs.push(node_exp.and_then(|l| l.ib_link_downed));
            if let Some(rack) = known.map(|n| n.rack.as_str()) {
                if let Some(p) = power {
                    *rack_power.entry(rack).or_default() += p;
                }
                if let Some(t) = bmc.and_then(|l| l.inlet_celsius) {
                    let e = rack_inlet.entry(rack).or_insert(t);
                    *e = e.max(t);
                }
            }
        }
        let racks = inv
            .racks
            .iter()
            .map(|r| RackReading {
                rack: r.name.clone(),
                nodes_power_watts: rack_power.get(r.name.as_str()).copied(),
                inlet_celsius: rack_inlet.get(r.name.as_str()).copied(),
                shelves: self
                    .rack_latest
                    .get(&r.name)
                    .filter(|l| fresh(l.at_ms))
                    .map(|l| l.shelves.clone())
                    .unwrap_or_default(),
                fabric: self
                    .rack_latest
                    .get(&r.name)
                    .filter(|l| fabric_fresh(l.fabric_at_ms))
                    .and_then(|l| l.fabric.clone()),
            })
            .collect();
        Readings {
            at_ms,
            gpus,
            racks,
            nodes,
            node_power_watts: node_power,
            jobs,
            node_ib_bytes_per_second: ib_rate,
            node_ib_bytes_total: Vec::new(),
            node_ib_link_downed_total: ib_downs,
            node_coolant: coolant,
            node_places: places,
            node_switches: switches,
            rack_supplies: Vec::new(),
            rack_links: Vec::new(),
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
        assert_eq!(r.racks[0].nodes_power_watts, Some(4000.0));
        assert_eq!(r.node_power_watts[0], None);
        let r = ing.readings(&inv, 20_000, 20_000, 2_000, nodes, Vec::new());
        assert_eq!(r.racks[0].nodes_power_watts, None);
    }
}
