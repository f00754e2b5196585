//! `Readings`: everything a source reports at one instant, the one thing telemetry hands
//! on. The simulator, the scrape source and PromQL each fill it; aggregation, the
//! pipeline, the hot window, rollups and alerts read it, and none of them knows which
//! source filled it.
//!
//! A source reports what its producers measure, one record per producer's subject: every
//! GPU (DCGM), every node (the scheduler's state, its BMC, node_exporter, DCGM's platform
//! identity and NVSwitches) and every rack that has a rack-level producer (power shelves,
//! NMX-T). Nothing in it is summed over nodes or racks: a rack's power from its nodes'
//! BMCs, its inlet, its GPUs' power are figured once, by aggregation (`aggregate`, a
//! layer above this one).

use app::model::{
    CoolantReading, GpuReading, Job, NodeState, NvlinkFabric, ShelfReading, SwitchReading, UnixMs,
};

use crate::cluster::placement::GpuPlace;

/// Everything a source reports at one instant: the input of aggregation, whichever
/// source (simulator, scrape, PromQL) produced it.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Readings {
    pub at_ms: UnixMs,
    /// Every GPU of the inventory, in its order (a node's GPUs together); one whose node is
    /// not reporting has no values.
    pub gpus: Vec<GpuReading>,
    /// The racks that have a rack-level producer reporting (power shelves, NMX-T), in the
    /// inventory's order; a rack without one is not here.
    pub racks: Vec<RackReadings>,
    /// Every node the scheduler knows, with what its exporters report.
    pub nodes: Vec<NodeReading>,
    /// Pending and running jobs.
    pub jobs: Vec<Job>,
    /// Nodes, their GPUs and their running job by node name, built at the first lookup
    /// ([`Readings::node`], [`Readings::gpus_of`], [`Readings::running_job_on`]).
    #[serde(skip)]
    pub index: ReadingsIndex,
}

/// [`Readings`]' lookups, built at the first (`Default::default()` where built).
#[derive(Clone, Debug, Default)]
pub struct ReadingsIndex(std::sync::OnceLock<Index>);

/// Lookups by node name, built once: at 16,384 nodes, finding a node by scanning was the
/// most of an exporter's answer and of the alert rules' "no data" test. Built for the
/// lengths it saw; a `Readings` changed after (its fields are public) is searched.
#[derive(Clone, Debug, Default)]
struct Index {
    lens: (usize, usize, usize),
    node: std::collections::HashMap<String, usize>,
    /// Each node's GPUs as a range of `gpus` (a node's GPUs together, as documented).
    gpus: std::collections::HashMap<String, std::ops::Range<usize>>,
    /// Each node's first running job, as a position in `jobs`.
    job: std::collections::HashMap<String, usize>,
}

/// One node at one instant: the scheduler's state and what the node's own exporters
/// report; `None` or empty where nothing fresh is reported.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NodeReading {
    pub name: String,
    /// Scheduler state.
    pub state: NodeState,
    /// Total power (BMC: GPUs and host).
    #[serde(default)]
    pub power_watts: Option<f64>,
    /// Inlet temperature (BMC).
    #[serde(default)]
    pub inlet_celsius: Option<f64>,
    /// Coolant readings from its BMC (liquid-cooled trays).
    #[serde(default)]
    pub coolant: Option<CoolantReading>,
    /// InfiniBand traffic, received plus sent, in bytes per second (node_exporter).
    #[serde(default)]
    pub ib_bytes_per_second: Option<f64>,
    /// InfiniBand byte counters summed over its ports, as node_exporter reports them: the
    /// simulator's exporters serve these.
    #[serde(default)]
    pub ib_bytes_total: Option<f64>,
    /// Count of InfiniBand link-down events summed over its ports (node_exporter's
    /// `node_infiniband_link_downed_total`).
    #[serde(default)]
    pub ib_link_downed_total: Option<u64>,
    /// Its GPUs' places as DCGM's platform identity fields give them; empty where the
    /// exporter prints none (see [`crate::cluster::placement`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub places: Vec<GpuPlace>,
    /// Its NVSwitches as DCGM reports them (HGX baseboards).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub switches: Vec<SwitchReading>,
}

impl NodeReading {
    /// A node in `state` with nothing reported.
    pub fn silent(name: String, state: NodeState) -> Self {
        NodeReading {
            name,
            state,
            power_watts: None,
            inlet_celsius: None,
            coolant: None,
            ib_bytes_per_second: None,
            ib_bytes_total: None,
            ib_link_downed_total: None,
            places: Vec::new(),
            switches: Vec::new(),
        }
    }
}

/// One rack's rack-level producers at one instant.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct RackReadings {
    pub rack: String,
    /// Its power shelves, from a fresh reading of its power management controller (empty:
    /// none, or not reporting).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shelves: Vec<ShelfReading>,
    /// Its NVLink domain's fabric, from a fresh NMX-T reading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<NvlinkFabric>,
    /// Its power supplies, supply by supply, where the source knows them (the simulator,
    /// whose exporter prints them); what aggregation reads is `shelves`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supplies: Vec<super::shelves::SupplyLine>,
    /// Its NVLink ports, where the source knows them port by port (the simulator, whose
    /// NMX-T exporter prints them); what aggregation reads is `fabric`.
    #[serde(skip)]
    pub links: Option<super::nvlink_fabric::RackLinks>,
}

impl Readings {
    /// The nodes whose GPUs DCGM places, with their places.
    pub fn places(&self) -> Vec<(&str, &[GpuPlace])> {
        self.nodes
            .iter()
            .filter(|n| !n.places.is_empty())
            .map(|n| (n.name.as_str(), n.places.as_slice()))
            .collect()
    }

    fn lens(&self) -> (usize, usize, usize) {
        (self.nodes.len(), self.gpus.len(), self.jobs.len())
    }

    /// The index, if it still describes these vectors.
    fn index(&self) -> Option<&Index> {
        let ix = self.index.0.get_or_init(|| {
            let mut ix = Index {
                lens: self.lens(),
                ..Index::default()
            };
            for (i, n) in self.nodes.iter().enumerate() {
                ix.node.entry(n.name.clone()).or_insert(i);
            }
            let mut i = 0;
            while i < self.gpus.len() {
                let node = &self.gpus[i].node;
                let end = i + self.gpus[i..]
                    .iter()
                    .take_while(|g| &g.node == node)
                    .count();
                // A node whose GPUs are not together: no index is used (all is searched).
                if ix.gpus.insert(node.clone(), i..end).is_some() {
                    ix.lens.1 = usize::MAX;
                }
                i = end;
            }
            for (i, j) in self.jobs.iter().enumerate() {
                if j.state == app::model::JobState::Running {
                    for n in &j.nodes {
                        ix.job.entry(n.clone()).or_insert(i);
                    }
                }
            }
            ix
        });
        (ix.lens == self.lens()).then_some(ix)
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&NodeReading> {
        self.node_position(name).map(|i| &self.nodes[i])
    }

    /// Where the node named `name` is in `nodes`.
    pub fn node_position(&self, name: &str) -> Option<usize> {
        match self.index() {
            Some(ix) => ix.node.get(name).copied(),
            None => self.nodes.iter().position(|n| n.name == name),
        }
        .filter(|&i| self.nodes.get(i).is_some_and(|n| n.name == name))
    }

    /// Node `name`'s GPUs, in their order.
    pub fn gpus_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a GpuReading> + 'a {
        let slice = match self.index() {
            Some(ix) => ix
                .gpus
                .get(name)
                .and_then(|r| self.gpus.get(r.clone()))
                .unwrap_or(&[]),
            None => &self.gpus[..],
        };
        slice.iter().filter(move |g| g.node == name)
    }

    /// The first running job on node `name`.
    pub fn running_job_on(&self, name: &str) -> Option<&Job> {
        let running = |j: &&Job| {
            j.state == app::model::JobState::Running && j.nodes.iter().any(|x| x == name)
        };
        match self.index() {
            Some(ix) => ix.job.get(name).and_then(|&i| self.jobs.get(i)),
            None => self.jobs.iter().find(running),
        }
        .filter(running)
    }

    /// The rack named `name`, if a rack-level producer reports it.
    pub fn rack(&self, name: &str) -> Option<&RackReadings> {
        self.racks.iter().find(|r| r.rack == name)
    }
}

/// `Readings` as rows say it: this version's form, or an older one's, whose nodes were
/// `(name, state)` pairs with parallel vectors of what they report (a standby of this
/// version reads the ticks an older leader publishes to `replica_ticks`).
#[derive(serde::Deserialize)]
struct Row {
    at_ms: UnixMs,
    #[serde(default)]
    gpus: Vec<GpuReading>,
    #[serde(default)]
    racks: Vec<RackReadings>,
    #[serde(default)]
    nodes: Vec<NodeRow>,
    #[serde(default)]
    jobs: Vec<Job>,
    #[serde(default)]
    node_power_watts: Vec<Option<f64>>,
    #[serde(default)]
    node_ib_bytes_per_second: Vec<Option<f64>>,
    #[serde(default)]
    node_ib_bytes_total: Vec<Option<f64>>,
    #[serde(default)]
    node_ib_link_downed_total: Vec<Option<u64>>,
    #[serde(default)]
    node_coolant: Vec<Option<CoolantReading>>,
    #[serde(default)]
    node_places: Vec<Vec<GpuPlace>>,
    #[serde(default)]
    node_switches: Vec<Vec<SwitchReading>>,
    #[serde(default)]
    rack_supplies: Vec<(String, Vec<super::shelves::SupplyLine>)>,
}

#[derive(serde::Deserialize)]
#[serde(untagged)]
enum NodeRow {
    // First: a derived struct also reads from a sequence, and would take the pair.
    Before(String, NodeState),
    Now(NodeReading),
}

impl<'de> serde::Deserialize<'de> for Readings {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut row = Row::deserialize(d)?;
        fn nth<T: Default>(v: &mut [T], i: usize) -> Option<T> {
            v.get_mut(i).map(std::mem::take)
        }
        let nodes = std::mem::take(&mut row.nodes)
            .into_iter()
            .enumerate()
            .map(|(i, n)| match n {
                NodeRow::Now(n) => n,
                // An older row: what the node reports is in the parallel vectors. (Its
                // inlet was only in the rack's sum, and is not recovered.)
                NodeRow::Before(name, state) => NodeReading {
                    name,
                    state,
                    power_watts: nth(&mut row.node_power_watts, i).flatten(),
                    inlet_celsius: None,
                    coolant: nth(&mut row.node_coolant, i).flatten(),
                    ib_bytes_per_second: nth(&mut row.node_ib_bytes_per_second, i).flatten(),
                    ib_bytes_total: nth(&mut row.node_ib_bytes_total, i).flatten(),
                    ib_link_downed_total: nth(&mut row.node_ib_link_downed_total, i).flatten(),
                    places: nth(&mut row.node_places, i).unwrap_or_default(),
                    switches: nth(&mut row.node_switches, i).unwrap_or_default(),
                },
            })
            .collect();
        for (rack, supplies) in row.rack_supplies {
            if let Some(r) = row.racks.iter_mut().find(|r| r.rack == rack) {
                r.supplies = supplies;
            }
        }
        Ok(Readings {
            at_ms: row.at_ms,
            gpus: row.gpus,
            racks: row.racks,
            nodes,
            jobs: row.jobs,
            index: Default::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_of_this_version_and_the_one_before_read_alike() {
        let before = r#"{"at_ms":5,"gpus":[],"racks":[{"rack":"A01","nodes_power_watts":900.0,"inlet_celsius":24.0}],
            "nodes":[["gpu001","idle"],["gpu002","down"]],"node_power_watts":[900.0,null],"jobs":[],
            "node_ib_bytes_per_second":[12.0,null],"node_ib_bytes_total":[],"node_ib_link_downed_total":[3,null]}"#;
        let r: Readings = serde_json::from_str(before).expect("older row");
        assert_eq!(r.nodes.len(), 2);
        assert_eq!(r.nodes[0].name, "gpu001");
        assert_eq!(r.nodes[0].power_watts, Some(900.0));
        assert_eq!(r.nodes[0].ib_bytes_per_second, Some(12.0));
        assert_eq!(r.nodes[0].ib_link_downed_total, Some(3));
        assert_eq!(r.nodes[1].state, NodeState::Down);
        assert_eq!(r.nodes[1].power_watts, None);
        assert_eq!(r.racks[0].rack, "A01");
        let again: Readings =
            serde_json::from_str(&serde_json::to_string(&r).expect("json")).expect("this row");
        assert_eq!(again.nodes, r.nodes);
        assert_eq!(again.racks.len(), 1);
    }

    #[test]
    fn lookups_by_name_agree_with_a_search_and_survive_a_change() {
        let gpu = |node: &str, index: u32| GpuReading {
            node: node.into(),
            index,
            ..GpuReading::default()
        };
        let job = |id: u64, state: app::model::JobState, nodes: &[&str]| Job {
            id,
            name: format!("j{id}"),
            user: "u".into(),
            account: "a".into(),
            partition: "gpu".into(),
            state,
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            gpus: 8,
            submit_ms: 0,
            start_ms: None,
            end_ms: None,
        };
        let mut r = Readings {
            gpus: vec![gpu("a", 0), gpu("a", 1), gpu("b", 0)],
            nodes: vec![
                NodeReading::silent("a".into(), NodeState::Idle),
                NodeReading::silent("b".into(), NodeState::Allocated),
            ],
            jobs: vec![
                job(1, app::model::JobState::Pending, &["b"]),
                job(2, app::model::JobState::Running, &["b"]),
            ],
            ..Readings::default()
        };
        assert_eq!(r.node("b").map(|n| n.state), Some(NodeState::Allocated));
        assert_eq!(r.node("c"), None);
        assert_eq!(r.gpus_of("a").map(|g| g.index).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(r.gpus_of("c").count(), 0);
        // A pending job on the node is not its running job.
        assert_eq!(r.running_job_on("b").map(|j| j.id), Some(2));
        assert_eq!(r.running_job_on("a").map(|j| j.id), None);
        // Changed after the index was built: found by searching, not by a stale index.
        r.nodes
            .insert(0, NodeReading::silent("c".into(), NodeState::Down));
        r.gpus.push(gpu("a", 2));
        assert_eq!(r.node_position("a"), Some(1));
        assert_eq!(r.node("c").map(|n| n.state), Some(NodeState::Down));
        assert_eq!(
            r.gpus_of("a").map(|g| g.index).collect::<Vec<_>>(),
            [0, 1, 2]
        );
    }
}
