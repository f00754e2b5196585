//! The cluster layout file: what Slurm does not know. Halls, pods, rows and racks on the floor, rack
//! power limits and cooling, PDUs, nodes by U position, NVLink domains; optionally Slurm's
//! topology file (topology.conf or topology.yaml) for leaf/spine switches and blocks.
//! Pure: text in, [`Inventory`] out.
//!
//! ```toml
//! [[hall]]                      # optional: a building's data hall and its power feed
//! name = "H1"
//! power_feed_kw = 25000         # unset: the hall's power is not judged against a feed
//!
//! [[rack]]
//! name = "A01"
//! row = "A"
//! hall = "H1"                   # every rack names a hall, or none does; a row is in one
//! pod = "P1"                    # optional: a pod (a group of rows) within the hall
//! power_limit_kw = 40
//! cooling = "air"               # or "liquid"
//! inlet_limit_celsius = 35      # default 35
//! coolant_flow_min_lpm = 1.5    # liquid only: per tray (node); unset: not judged
//! coolant_delta_t_max_celsius = 12  # liquid only: return over supply; unset: not judged
//! chassis_serial = "1652524000100"  # rack-scale systems: checked against DCGM's field 572
//! power_shelves = 8             # rack-scale systems: shelves on the bus bar (power_limit_kw)
//! power_shelves_redundant = 4   # shelves held in reserve (N+N of 8: 4; N+1: 1); default 0
//! switch_trays = 9              # rack-scale NVLink: the domain's switch trays (NMX-T)
//! pdu = "pdu-a01"
//! nodes = "gpu[001-008]"        # hostlist, bottom to top
//! u_start = 2                   # U of the first node (default 1)
//! u_height = 4                  # U per node (default 4)
//!
//! [[nvlink_domain]]
//! name = "nvl72-a"
//! nodes = "gb[001-018]"
//! ```

use std::collections::{BTreeMap, HashMap};

use app::model::{Cooling, DomainKind, Gpu, Hall, Inventory, Node, Rack, SwitchDomain};
use serde::Deserialize;

use crate::slurm::{hostlist, topology_yaml};

#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error("layout: {0}")]
    Toml(String),
    #[error("layout: rack {rack:?}: {message}")]
    Rack { rack: String, message: String },
    #[error("layout: node {0:?} is placed twice")]
    Twice(String),
    #[error("layout: NVLink domain {name:?}: {message}")]
    Domain { name: String, message: String },
    #[error("layout: hall {name:?}: {message}")]
    Hall { name: String, message: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    rack: Vec<FileRack>,
    #[serde(default)]
    nvlink_domain: Vec<FileDomain>,
    #[serde(default)]
    hall: Vec<FileHall>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHall {
    name: String,
    power_feed_kw: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRack {
    name: String,
    row: String,
    hall: Option<String>,
    pod: Option<String>,
    power_limit_kw: f64,
    cooling: Option<String>,
    inlet_limit_celsius: Option<f64>,
    coolant_flow_min_lpm: Option<f64>,
    coolant_delta_t_max_celsius: Option<f64>,
    chassis_serial: Option<String>,
    power_shelves: Option<u32>,
    power_shelves_redundant: Option<u32>,
    switch_trays: Option<u32>,
    pdu: Option<String>,
    #[serde(default)]
    nodes: String,
    u_start: Option<u32>,
    u_height: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDomain {
    name: String,
    nodes: String,
}

/// A parsed layout: the inventory without GPUs (Slurm's GRES tells those), and each
/// rack's PDU.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub inventory: Inventory,
    pub pdus: BTreeMap<String, String>,
}

/// Parses a layout file (and, if given, a Slurm topology file, `(file name, text)`:
/// topology.conf or topology.yaml, for switch domains and blocks).
pub fn parse(cluster: &str, text: &str, topo: Option<(&str, &str)>) -> Result<Layout, LayoutError> {
    let f: File = toml::from_str(text).map_err(|e| LayoutError::Toml(e.message().to_string()))?;
    let mut rows: Vec<String> = Vec::new();
    let mut racks = Vec::new();
    let mut nodes: Vec<Node> = Vec::new();
    let mut seen: HashMap<String, ()> = HashMap::new();
    let mut pdus = BTreeMap::new();
    let mut position_in_row: HashMap<String, u32> = HashMap::new();
    let mut row_place: HashMap<String, (String, Option<String>)> = HashMap::new();
    let mut hall_order: Vec<String> = Vec::new();
    for r in f.rack {
        let bad = |m: &str| LayoutError::Rack {
            rack: r.name.clone(),
            message: m.into(),
        };
        if r.name.is_empty() || r.row.is_empty() {
            return Err(bad("name and row are required"));
        }
        if !(r.power_limit_kw.is_finite() && r.power_limit_kw > 0.0 && r.power_limit_kw <= 2000.0) {
            return Err(bad("power_limit_kw must be above 0 and at most 2000"));
        }
        let cooling = match r.cooling.as_deref() {
            None | Some("air") => Cooling::Air,
            Some("liquid") => Cooling::Liquid,
            Some(_) => return Err(bad("cooling is \"air\" or \"liquid\"")),
        };
        for (key, v) in [
            ("coolant_flow_min_lpm", r.coolant_flow_min_lpm),
            ("coolant_delta_t_max_celsius", r.coolant_delta_t_max_celsius),
        ] {
            if let Some(v) = v {
                if cooling != Cooling::Liquid {
                    return Err(bad(&format!("{key} is for liquid-cooled racks")));
                }
                if !(v.is_finite() && v > 0.0 && v <= 1000.0) {
                    return Err(bad(&format!("{key} must be above 0 and at most 1000")));
                }
            }
        }
        match (r.power_shelves, r.power_shelves_redundant) {
            (Some(n), _) if !(1..=64).contains(&n) => {
                return Err(bad("power_shelves must be 1 to 64"));
            }
            (None, Some(_)) => return Err(bad("power_shelves_redundant needs power_shelves")),
            (Some(n), Some(k)) if k >= n => {
                return Err(bad(
                    "power_shelves_redundant must be fewer than power_shelves",
                ));
            }
            _ => {}
        }
        if r.switch_trays.is_some_and(|n| !(1..=64).contains(&n)) {
            return Err(bad("switch_trays must be 1 to 64"));
        }
        let (hall, pod) = placed_in(&r, &mut row_place, &mut hall_order)?;
        if !rows.contains(&r.row) {
            rows.push(r.row.clone());
        }
        let pos = position_in_row.entry(r.row.clone()).or_insert(0);
        racks.push(Rack {
            name: r.name.clone(),
            row: r.row.clone(),
            hall,
            pod,
            position: *pos,
            power_limit_watts: r.power_limit_kw * 1000.0,
            cooling,
            inlet_limit_celsius: r.inlet_limit_celsius.unwrap_or(35.0),
            coolant_flow_min_lpm: r.coolant_flow_min_lpm,
            coolant_delta_t_max_celsius: r.coolant_delta_t_max_celsius,
            chassis_serial: match r.chassis_serial.as_deref().map(str::trim) {
                None => None,
                Some(s) if !s.is_empty() && s.len() <= 64 => Some(s.to_string()),
                Some(_) => return Err(bad("chassis_serial must be 1 to 64 characters")),
            },
            power_shelves: r.power_shelves,
            power_shelves_redundant: r.power_shelves_redundant.unwrap_or(0),
            switch_trays: r.switch_trays,
        });
        *pos += 1;
        if let Some(p) = r.pdu {
            pdus.insert(r.name.clone(), p);
        }
        let names = if r.nodes.trim().is_empty() {
            Vec::new()
        } else {
            hostlist::expand(&r.nodes).map_err(|e| bad(&format!("nodes: {e}")))?
        };
        let (u0, h) = (r.u_start.unwrap_or(1), r.u_height.unwrap_or(4).max(1));
        for (i, n) in names.into_iter().enumerate() {
            if seen.insert(n.clone(), ()).is_some() {
                return Err(LayoutError::Twice(n));
            }
            nodes.push(Node {
                name: n,
                rack: r.name.clone(),
                u_position: u0 + i as u32 * h,
                u_height: h,
                gpus: Vec::new(),
                domains: Vec::new(),
            });
        }
    }
    let mut domains = Vec::new();
    for d in f.nvlink_domain {
        let members = hostlist::expand(&d.nodes).map_err(|e| LayoutError::Domain {
            name: d.name.clone(),
            message: e.to_string(),
        })?;
        domains.push(SwitchDomain {
            name: d.name,
            kind: DomainKind::Nvlink,
            parent: None,
            nodes: members,
            oversubscription: 1.0,
            block_sizes: Vec::new(),
        });
    }
    if let Some((file, text)) = topo {
        let all = topology_yaml::parse_file(file, text)
            .map_err(|e| LayoutError::Toml(format!("{file}: {e}")))?;
        // Every topology's switches and blocks are domains (an InfiniBand tree beside
        // NVLink blocks); each block keeps its own topology's sizes.
        for nt in &all.topologies {
            let t = &nt.topology;
            let parent_of: HashMap<&str, &str> = t
                .switches
                .iter()
                .flat_map(|s| {
                    s.switches
                        .iter()
                        .map(move |c| (c.as_str(), s.name.as_str()))
                })
                .collect();
            for s in &t.switches {
                let kind = if s.nodes.is_empty() {
                    DomainKind::Spine
                } else {
                    DomainKind::Leaf
                };
                domains.push(SwitchDomain {
                    name: s.name.clone(),
                    kind,
                    parent: parent_of.get(s.name.as_str()).map(|p| p.to_string()),
                    nodes: s.nodes.clone(),
                    oversubscription: 1.0,
                    block_sizes: Vec::new(),
                });
            }
            for b in &t.blocks {
                domains.push(SwitchDomain {
                    name: b.name.clone(),
                    kind: DomainKind::Block,
                    parent: None,
                    nodes: b.nodes.clone(),
                    oversubscription: 1.0,
                    block_sizes: t.block_sizes.clone(),
                });
            }
        }
        let mut names: HashMap<&str, ()> = HashMap::new();
        for d in &domains {
            if names.insert(d.name.as_str(), ()).is_some() {
                return Err(LayoutError::Domain {
                    name: d.name.clone(),
                    message: format!("defined twice (the layout and {file} share one namespace)"),
                });
            }
        }
    }
    let mut member_of: HashMap<&str, Vec<String>> = HashMap::new();
    for d in &domains {
        for n in &d.nodes {
            member_of
                .entry(n.as_str())
                .or_default()
                .push(d.name.clone());
        }
    }
    for n in &mut nodes {
        n.domains = member_of.remove(n.name.as_str()).unwrap_or_default();
    }
    let halls = halls(f.hall, &hall_order)?;
    Ok(Layout {
        inventory: Inventory {
            cluster: cluster.into(),
            halls,
            rows,
            racks,
            nodes,
            domains,
        },
        pdus,
    })
}

/// Longest hall or pod name kept.
const MAX_PLACE_NAME: usize = 64;

/// Where rack `r` stands: its hall and pod, the same for every rack of its row, and named
/// on every rack or on none (the first rack decides). Records the halls in first-seen order.
fn placed_in(
    r: &FileRack,
    row_place: &mut HashMap<String, (String, Option<String>)>,
    hall_order: &mut Vec<String>,
) -> Result<(String, Option<String>), LayoutError> {
    let bad = |m: String| LayoutError::Rack {
        rack: r.name.clone(),
        message: m,
    };
    let hall = r.hall.as_deref().map(str::trim).unwrap_or("").to_string();
    let pod = r.pod.as_deref().map(str::trim).map(str::to_string);
    if hall.len() > MAX_PLACE_NAME
        || pod
            .as_ref()
            .is_some_and(|p| p.is_empty() || p.len() > MAX_PLACE_NAME)
    {
        return Err(bad(format!(
            "hall and pod are 1 to {MAX_PLACE_NAME} characters"
        )));
    }
    if pod.is_some() && hall.is_empty() {
        return Err(bad("a pod is within a hall: name the hall too".into()));
    }
    let first = row_place.is_empty();
    let any_hall = row_place.values().any(|(h, _)| !h.is_empty());
    if !first && any_hall == hall.is_empty() {
        return Err(bad(
            "hall is named on some racks and not on others: name it on every rack or on none"
                .into(),
        ));
    }
    match row_place.get(&r.row) {
        Some((h, p)) if *h != hall || *p != pod => {
            return Err(bad(format!(
                "row {:?} is in hall {h:?}{} already: a row stands in one hall and pod",
                r.row,
                p.as_deref()
                    .map(|p| format!(", pod {p:?}"))
                    .unwrap_or_default()
            )));
        }
        Some(_) => {}
        None => {
            row_place.insert(r.row.clone(), (hall.clone(), pod.clone()));
        }
    }
    if !hall.is_empty() && !hall_order.contains(&hall) {
        hall_order.push(hall.clone());
    }
    Ok((hall, pod))
}

/// The halls the racks name, in the order they first appear, each with its feed from a
/// `[[hall]]` entry (if any); an entry that names a hall no rack is in is refused.
fn halls(entries: Vec<FileHall>, order: &[String]) -> Result<Vec<Hall>, LayoutError> {
    let mut feeds: HashMap<String, Option<f64>> = HashMap::new();
    for h in entries {
        let bad = |m: &str| LayoutError::Hall {
            name: h.name.clone(),
            message: m.into(),
        };
        if !order.contains(&h.name) {
            return Err(bad("no rack names this hall"));
        }
        if let Some(kw) = h.power_feed_kw {
            if !(kw.is_finite() && kw > 0.0 && kw <= 1_000_000.0) {
                return Err(bad("power_feed_kw must be above 0 and at most 1000000"));
            }
        }
        if feeds
            .insert(h.name.clone(), h.power_feed_kw.map(|kw| kw * 1000.0))
            .is_some()
        {
            return Err(bad("defined twice"));
        }
    }
    Ok(order
        .iter()
        .map(|name| Hall {
            name: name.clone(),
            power_feed_watts: feeds.get(name).copied().flatten(),
        })
        .collect())
}

/// The inventory for the nodes Slurm reports: placed as the layout says, with GPUs from
/// Slurm; nodes the layout does not place go to a rack named `unplaced`, so nothing
/// Slurm knows is hidden.
pub fn place(layout: &Layout, slurm: &[(String, u32)]) -> Inventory {
    let mut inv = layout.inventory.clone();
    let gpus: HashMap<&str, u32> = slurm.iter().map(|(n, g)| (n.as_str(), *g)).collect();
    let placed: HashMap<String, ()> = inv.nodes.iter().map(|n| (n.name.clone(), ())).collect();
    for n in &mut inv.nodes {
        n.gpus = (0..gpus.get(n.name.as_str()).copied().unwrap_or(0))
            .map(|g| Gpu {
                index: g,
                uuid: String::new(),
                model: String::new(),
                max_power_watts: 700.0,
            })
            .collect();
    }
    let extra: Vec<&(String, u32)> = slurm
        .iter()
        .filter(|(n, _)| !placed.contains_key(n))
        .collect();
    if !extra.is_empty() {
        let row = "unplaced".to_string();
        inv.rows.push(row.clone());
        if !inv.halls.is_empty() {
            inv.halls.push(Hall {
                name: "unplaced".into(),
                power_feed_watts: None,
            });
        }
        inv.racks.push(Rack {
            name: "unplaced".into(),
            row,
            // Where the layout names halls, the unplaced are a hall of their own.
            hall: if inv.halls.is_empty() {
                String::new()
            } else {
                "unplaced".into()
            },
            pod: None,
            position: 0,
            power_limit_watts: 0.0,
            cooling: Cooling::Air,
            inlet_limit_celsius: 35.0,
            coolant_flow_min_lpm: None,
            coolant_delta_t_max_celsius: None,
            chassis_serial: None,
            power_shelves: None,
            power_shelves_redundant: 0,
            switch_trays: None,
        });
        for (i, (name, g)) in extra.into_iter().enumerate() {
            inv.nodes.push(Node {
                name: name.clone(),
                rack: "unplaced".into(),
                u_position: i as u32 + 1,
                u_height: 1,
                gpus: (0..*g)
                    .map(|k| Gpu {
                        index: k,
                        uuid: String::new(),
                        model: String::new(),
                        max_power_watts: 700.0,
                    })
                    .collect(),
                domains: Vec::new(),
            });
        }
    }
    inv
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYOUT: &str = r#"
[[rack]]
name = "A01"
row = "A"
power_limit_kw = 40
pdu = "pdu-a01"
nodes = "gpu[001-002]"
u_start = 2

[[rack]]
name = "A02"
row = "A"
power_limit_kw = 120
cooling = "liquid"
power_shelves = 8
power_shelves_redundant = 4
switch_trays = 9
nodes = "gpu003"

[[rack]]
name = "B01"
row = "B"
power_limit_kw = 17.5

[[nvlink_domain]]
name = "nvl-1"
nodes = "gpu[001-002]"
"#;

    const TOPO: &str = "SwitchName=leaf1 Nodes=gpu[001-002]\nSwitchName=leaf2 Nodes=gpu003\nSwitchName=spine Switches=leaf[1-2]\n";

    #[test]
    fn racks_nodes_and_domains() {
        let l = parse("c", LAYOUT, Some(("topology.conf", TOPO))).expect("layout");
        let inv = &l.inventory;
        assert_eq!(inv.rows, ["A", "B"]);
        assert_eq!(inv.racks.len(), 3);
        assert_eq!(inv.racks[1].position, 1);
        assert_eq!(inv.racks[1].cooling, Cooling::Liquid);
        assert_eq!(inv.racks[1].power_shelves, Some(8));
        assert_eq!(inv.racks[1].power_shelves_redundant, 4);
        assert_eq!(inv.racks[0].power_shelves, None);
        assert_eq!(inv.racks[1].switch_trays, Some(9));
        assert_eq!(inv.racks[0].switch_trays, None);
        assert_eq!(inv.racks[2].power_limit_watts, 17_500.0);
        assert_eq!(
            inv.nodes
                .iter()
                .map(|n| (n.name.as_str(), n.u_position))
                .collect::<Vec<_>>(),
            [("gpu001", 2), ("gpu002", 6), ("gpu003", 1)]
        );
        assert_eq!(inv.nodes[0].domains, ["nvl-1", "leaf1"]);
        let spine = inv
            .domains
            .iter()
            .find(|d| d.name == "spine")
            .expect("spine");
        assert_eq!(spine.kind, DomainKind::Spine);
        let leaf = inv
            .domains
            .iter()
            .find(|d| d.name == "leaf1")
            .expect("leaf");
        assert_eq!(leaf.parent.as_deref(), Some("spine"));
        assert_eq!(l.pdus.get("A01").map(String::as_str), Some("pdu-a01"));
    }

    #[test]
    fn slurm_nodes_are_placed_or_shown_unplaced() {
        let l = parse("c", LAYOUT, None).expect("layout");
        let inv = place(
            &l,
            &[
                ("gpu001".into(), 8),
                ("gpu003".into(), 4),
                ("gpu999".into(), 8),
            ],
        );
        assert_eq!(inv.nodes[0].gpus.len(), 8);
        assert_eq!(
            inv.nodes[1].gpus.len(),
            0,
            "gpu002 is not in Slurm: no GPUs"
        );
        let extra = inv
            .nodes
            .iter()
            .find(|n| n.name == "gpu999")
            .expect("unplaced node");
        assert_eq!(extra.rack, "unplaced");
        assert_eq!(inv.gpu_count(), 8 + 4 + 8);
    }

    #[test]
    fn bad_layouts_say_where() {
        for (text, want) in [
            ("[[rack]]\nname = \"X\"\nrow = \"A\"\npower_limit_kw = -1\n", "rack \"X\": power_limit_kw"),
            ("[[rack]]\nname = \"X\"\nrow = \"A\"\npower_limit_kw = 40\ncooling = \"oil\"\n", "cooling"),
            ("[[rack]]\nname = \"X\"\nrow = \"A\"\npower_limit_kw = 40\nnodes = \"a[1-2]\"\n[[rack]]\nname = \"Y\"\nrow = \"A\"\npower_limit_kw = 40\nnodes = \"a2\"\n", "placed twice"),
            ("[[rack]]\nname = \"X\"\nrow = \"A\"\npower_limit_kw = 40\nnodes = \"a[5-1]\"\n", "rack \"X\": nodes"),
            ("[[rack]]\nname = \"X\"\npower = 3\n", "layout"),
            ("[[rack]]\nname = \"X\"\nrow = \"A\"\npower_limit_kw = 40\nchassis_serial = \" \"\n", "rack \"X\": chassis_serial must be 1 to 64 characters"),
            ("[[rack]]\nname = \"X\"\nrow = \"A\"\npower_limit_kw = 40\npower_shelves = 0\n", "rack \"X\": power_shelves must be 1 to 64"),
            ("[[rack]]\nname = \"X\"\nrow = \"A\"\npower_limit_kw = 40\npower_shelves_redundant = 1\n", "rack \"X\": power_shelves_redundant needs power_shelves"),
            ("[[rack]]\nname = \"X\"\nrow = \"A\"\npower_limit_kw = 40\nswitch_trays = 0\n", "rack \"X\": switch_trays must be 1 to 64"),
            ("[[rack]]\nname = \"X\"\nrow = \"A\"\npower_limit_kw = 40\npower_shelves = 4\npower_shelves_redundant = 4\n", "rack \"X\": power_shelves_redundant must be fewer than power_shelves"),
        ] {
            let e = parse("c", text, None).expect_err(text);
            assert!(e.to_string().contains(want), "{e} lacks {want:?}");
        }
    }

    const HALLS: &str = r#"
[[hall]]
name = "H1"
power_feed_kw = 90

[[rack]]
name = "A01"
row = "A"
hall = "H1"
pod = "P1"
power_limit_kw = 40
nodes = "gpu[001-002]"

[[rack]]
name = "A02"
row = "A"
hall = "H1"
pod = "P1"
power_limit_kw = 40
nodes = "gpu003"

[[rack]]
name = "B01"
row = "B"
hall = "H2"
power_limit_kw = 40
nodes = "gpu004"
"#;

    #[test]
    fn halls_and_pods_from_the_racks_with_their_feeds() {
        let l = parse("c", HALLS, None).expect("layout");
        let inv = &l.inventory;
        assert_eq!(
            inv.halls,
            [
                Hall {
                    name: "H1".into(),
                    power_feed_watts: Some(90_000.0)
                },
                Hall {
                    name: "H2".into(),
                    power_feed_watts: None
                },
            ]
        );
        let place: Vec<_> = inv
            .racks
            .iter()
            .map(|r| (r.name.as_str(), r.hall.as_str(), r.pod.as_deref()))
            .collect();
        assert_eq!(
            place,
            [
                ("A01", "H1", Some("P1")),
                ("A02", "H1", Some("P1")),
                ("B01", "H2", None)
            ]
        );
        // A layout without halls keeps working: no halls, racks in none.
        let plain = parse("c", LAYOUT, None).expect("layout");
        assert!(plain.inventory.halls.is_empty());
        assert!(plain
            .inventory
            .racks
            .iter()
            .all(|r| r.hall.is_empty() && r.pod.is_none()));
        // Nodes Slurm has and the layout lacks are a hall of their own where there are halls.
        let inv = place_all(&l);
        assert_eq!(inv.halls.last().map(|h| h.name.as_str()), Some("unplaced"));
        assert_eq!(inv.racks.last().map(|r| r.hall.as_str()), Some("unplaced"));
        let plain = place_all(&plain);
        assert!(plain.halls.is_empty() && plain.racks.iter().all(|r| r.hall.is_empty()));
    }

    fn place_all(l: &Layout) -> Inventory {
        place(l, &[("gpu001".into(), 8), ("gpu999".into(), 8)])
    }

    #[test]
    fn bad_halls_say_where() {
        let rack = |name: &str, row: &str, more: &str| {
            format!("[[rack]]\nname = \"{name}\"\nrow = \"{row}\"\npower_limit_kw = 40\n{more}\n")
        };
        for (text, want) in [
            (
                rack("X", "A", "hall = \"H1\"") + &rack("Y", "B", ""),
                "rack \"Y\": hall is named on some racks and not on others",
            ),
            (
                rack("X", "A", "") + &rack("Y", "B", "hall = \"H1\""),
                "rack \"Y\": hall is named on some racks and not on others",
            ),
            (
                rack("X", "A", "hall = \"H1\"") + &rack("Y", "A", "hall = \"H2\""),
                "rack \"Y\": row \"A\" is in hall \"H1\" already",
            ),
            (
                rack("X", "A", "hall = \"H1\"\npod = \"P1\"")
                    + &rack("Y", "A", "hall = \"H1\"\npod = \"P2\""),
                "pod \"P1\"",
            ),
            (
                rack("X", "A", "pod = \"P1\""),
                "rack \"X\": a pod is within a hall",
            ),
            (
                rack("X", "A", "hall = \"H1\"\npod = \"\""),
                "hall and pod are 1 to 64 characters",
            ),
            (
                rack("X", "A", "hall = \"H1\"") + "[[hall]]\nname = \"H9\"\n",
                "hall \"H9\": no rack names this hall",
            ),
            (
                rack("X", "A", "hall = \"H1\"") + "[[hall]]\nname = \"H1\"\npower_feed_kw = 0\n",
                "hall \"H1\": power_feed_kw must be above 0",
            ),
            (
                rack("X", "A", "hall = \"H1\"")
                    + "[[hall]]\nname = \"H1\"\n[[hall]]\nname = \"H1\"\n",
                "hall \"H1\": defined twice",
            ),
            (
                rack("X", "A", "hall = \"H1\"") + "[[hall]]\nname = \"H1\"\nfeed = 3\n",
                "layout",
            ),
        ] {
            let e = parse("c", &text, None).expect_err(&text);
            assert!(e.to_string().contains(want), "{e} lacks {want:?}");
        }
    }
}
