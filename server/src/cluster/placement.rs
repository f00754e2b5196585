//! Where DCGM says each GPU sits, against the layout file. On rack-scale systems (GB200
//! NVL72) DCGM publishes a GPU's place in the rack: the chassis (rack) serial number
//! (field 572), the slot in the rack counting switch trays (573), the tray index among the
//! compute trays (574), the host within the tray (575) and the module within the host
//! (577). dcgm-exporter prints such fields as labels on every series of the GPU when its
//! counters file lists them with type `label` (as it does `DCGM_FI_DRIVER_VERSION`).
//!
//! From those labels this module builds the rack -> tray -> GPU map and says where the
//! layout file disagrees: a node whose GPUs name two chassis or two trays, two nodes that
//! claim one tray, a node the layout puts in another rack than the one whose chassis it
//! reports, and trays whose order by U position in the layout is not their order by
//! DCGM's tray index (compared as orders, so whether a site counts trays from 0 or 1, or
//! from the top, does not matter as long as it counts one way). Pure.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use app::model::Inventory;

/// One GPU's place as DCGM reports it; `chassis_serial` is what makes it a place at all.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct GpuPlace {
    pub gpu: u32,
    /// `DCGM_FI_DEV_PLATFORM_CHASSIS_SERIAL_NUMBER` (572): the rack.
    pub chassis_serial: String,
    /// `DCGM_FI_DEV_PLATFORM_CHASSIS_SLOT_NUMBER` (573): slot in the rack, switches included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<u32>,
    /// `DCGM_FI_DEV_PLATFORM_TRAY_INDEX` (574): among the compute trays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tray_index: Option<u32>,
    /// `DCGM_FI_DEV_PLATFORM_HOST_ID` (575): the node within the slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_id: Option<u32>,
    /// `DCGM_FI_DEV_PLATFORM_MODULE_ID` (577): the GPU within the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module_id: Option<u32>,
}

/// The label names of the identity fields (DCGM 4.5 and 4.6 name them alike).
pub const CHASSIS_SERIAL_LABEL: &str = "DCGM_FI_DEV_PLATFORM_CHASSIS_SERIAL_NUMBER";
pub const SLOT_LABEL: &str = "DCGM_FI_DEV_PLATFORM_CHASSIS_SLOT_NUMBER";
pub const TRAY_LABEL: &str = "DCGM_FI_DEV_PLATFORM_TRAY_INDEX";
pub const HOST_LABEL: &str = "DCGM_FI_DEV_PLATFORM_HOST_ID";
pub const MODULE_LABEL: &str = "DCGM_FI_DEV_PLATFORM_MODULE_ID";

/// A string field's value, or `None` for empty and DCGM's string sentinels
/// (`<<<NULL>>>`, `<<<NOT_FOUND>>>`, `<<<NOT_SUPPORTED>>>`, `<<<NOT_PERMISSIONED>>>`).
pub fn string_field(v: &str) -> Option<&str> {
    let v = v.trim();
    let sentinel = v.starts_with("<<<") && v.ends_with(">>>");
    (!v.is_empty() && !sentinel).then_some(v)
}

/// An integer field's value, or `None` for what is not one and DCGM's blank sentinels
/// (32-bit from 0x7ffffff0, and every 64-bit one, which is larger).
pub fn int_field(v: &str) -> Option<u32> {
    const INT32_BLANK: u64 = 0x7fff_fff0;
    v.trim()
        .parse::<u64>()
        .ok()
        .filter(|&x| x < INT32_BLANK)
        .and_then(|x| u32::try_from(x).ok())
}

/// One tray (node) of a chassis, as DCGM places it and as the layout does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Tray {
    pub node: String,
    pub tray_index: Option<u32>,
    pub slot: Option<u32>,
    pub host_id: Option<u32>,
    /// The rack and U position the layout gives the node.
    pub layout_rack: String,
    pub layout_u: u32,
    /// (GPU index, module id).
    pub gpus: Vec<(u32, Option<u32>)>,
}

/// One chassis (rack) DCGM names, and the layout rack most of its trays are in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Chassis {
    pub serial: String,
    pub rack: Option<String>,
    /// By tray index, then host id, then name.
    pub trays: Vec<Tray>,
}

/// Where the layout and DCGM disagree about one node (or a whole rack), in words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct PlacementIssue {
    /// `None`: the rack as a whole (its recorded chassis serial is not the one its trays
    /// report).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The rack the layout puts the node in.
    pub rack: String,
    pub words: String,
}

/// The map DCGM's identity fields give, and where the layout file disagrees with it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct PlacementMap {
    /// By layout rack (in inventory order, racks the layout does not place last), then serial.
    pub chassis: Vec<Chassis>,
    /// In inventory order of the nodes.
    pub issues: Vec<PlacementIssue>,
    /// Nodes that report a place.
    pub nodes_reporting: u32,
}

/// "1st", "2nd", "3rd", "4th", ...
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The map from `places` (each node's GPUs' places, by node name) against `inv`.
pub fn compare(inv: &Inventory, places: &[(&str, &[GpuPlace])]) -> PlacementMap {
    let mut out = PlacementMap::default();
    let inv_node: HashMap<&str, (usize, &app::model::Node)> = inv
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), (i, n)))
        .collect();
    let rack_order: HashMap<&str, usize> = inv
        .racks
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.as_str(), i))
        .collect();
    // (inventory index, issue), sorted at the end.
    let mut issues: Vec<(usize, PlacementIssue)> = Vec::new();
    let mut by_chassis: BTreeMap<&str, Vec<(usize, Tray)>> = BTreeMap::new();
    for &(node, gpus) in places {
        let Some(&(idx, n)) = inv_node.get(node) else {
            continue;
        };
        let Some(first) = gpus.first() else {
            continue;
        };
        out.nodes_reporting += 1;
        let issue = |words: String| {
            (
                idx,
                PlacementIssue {
                    node: Some(node.to_string()),
                    rack: n.rack.clone(),
                    words,
                },
            )
        };
        let mut serials: Vec<&str> = gpus.iter().map(|g| g.chassis_serial.as_str()).collect();
        serials.sort_unstable();
        serials.dedup();
        if serials.len() > 1 {
            issues.push(issue(format!(
                "{node}: its GPUs report chassis {}; one node sits in one chassis",
                serials.join(", ")
            )));
            continue;
        }
        let mut trays: Vec<(Option<u32>, Option<u32>)> =
            gpus.iter().map(|g| (g.tray_index, g.host_id)).collect();
        trays.sort_unstable();
        trays.dedup();
        if trays.len() > 1 {
            let words: Vec<String> = trays
                .iter()
                .map(|(t, _)| t.map_or("?".into(), |t| t.to_string()))
                .collect();
            issues.push(issue(format!(
                "{node}: its GPUs report trays {}; one node sits in one tray",
                words.join(", ")
            )));
            continue;
        }
        let mut gpu_list: Vec<(u32, Option<u32>)> =
            gpus.iter().map(|g| (g.gpu, g.module_id)).collect();
        gpu_list.sort_unstable();
        by_chassis
            .entry(first.chassis_serial.as_str())
            .or_default()
            .push((
                idx,
                Tray {
                    node: node.to_string(),
                    tray_index: first.tray_index,
                    slot: first.slot,
                    host_id: first.host_id,
                    layout_rack: n.rack.clone(),
                    layout_u: n.u_position,
                    gpus: gpu_list,
                },
            ));
    }
    for (serial, mut trays) in by_chassis {
        // The layout rack most of the chassis' trays are in (ties: the first rack).
        let mut votes: HashMap<&str, usize> = HashMap::new();
        for (_, t) in &trays {
            *votes.entry(t.layout_rack.as_str()).or_default() += 1;
        }
        let rack = votes
            .iter()
            .max_by(|a, b| {
                a.1.cmp(b.1).then_with(|| {
                    let order = |r: &str| rack_order.get(r).copied().unwrap_or(usize::MAX);
                    order(b.0).cmp(&order(a.0))
                })
            })
            .map(|(r, _)| r.to_string());
        // The serial the layout records for that rack, if any, must be this one.
        if let Some((ri, recorded)) = rack.as_deref().and_then(|r| {
            let ri = *rack_order.get(r)?;
            Some((ri, inv.racks[ri].chassis_serial.as_deref()?))
        }) {
            if recorded != serial {
                issues.push((
                    usize::MAX - inv.racks.len() + ri,
                    PlacementIssue {
                        node: None,
                        rack: inv.racks[ri].name.clone(),
                        words: format!(
                            "rack {}: the layout records chassis {recorded}; its trays report chassis {serial}",
                            inv.racks[ri].name
                        ),
                    },
                ));
            }
        }
        let tray_words = |t: &Tray| match t.tray_index {
            Some(i) => format!("tray {i}"),
            None => "no tray index".to_string(),
        };
        for (idx, t) in &trays {
            if let Some(r) = rack.as_deref().filter(|r| *r != t.layout_rack) {
                issues.push((
                    *idx,
                    PlacementIssue {
                        node: Some(t.node.clone()),
                        rack: t.layout_rack.clone(),
                        words: format!(
                            "{}: the layout puts it in rack {}; DCGM says chassis {serial}, {}, where rack {r}'s trays are",
                            t.node,
                            t.layout_rack,
                            tray_words(t)
                        ),
                    },
                ));
            }
        }
        // Two nodes in one tray (and host).
        let mut claimed: HashMap<(u32, Option<u32>), &str> = HashMap::new();
        let mut sorted: Vec<&(usize, Tray)> = trays.iter().collect();
        sorted.sort_by_key(|(idx, _)| *idx);
        for (idx, t) in sorted {
            let Some(i) = t.tray_index else { continue };
            if let Some(other) = claimed.insert((i, t.host_id), &t.node) {
                issues.push((
                    *idx,
                    PlacementIssue {
                        node: Some(t.node.clone()),
                        rack: t.layout_rack.clone(),
                        words: format!(
                            "{}: it and {other} both report chassis {serial}, tray {i}",
                            t.node
                        ),
                    },
                ));
            }
        }
        // The order of the trays in the layout's rack by U position against their order by
        // tray index: a tray whose place differs was swapped or mislabelled.
        if let Some(r) = rack.as_deref() {
            let mut mine: Vec<&Tray> = trays
                .iter()
                .map(|(_, t)| t)
                .filter(|t| t.layout_rack == r && t.tray_index.is_some())
                .collect();
            let dup = {
                let mut keys: Vec<_> = mine.iter().map(|t| (t.tray_index, t.host_id)).collect();
                keys.sort_unstable();
                keys.windows(2).any(|w| w[0] == w[1])
            };
            if !dup {
                mine.sort_by(|a, b| (a.layout_u, &a.node).cmp(&(b.layout_u, &b.node)));
                let by_u: Vec<&str> = mine.iter().map(|t| t.node.as_str()).collect();
                mine.sort_by(|a, b| {
                    (a.tray_index, a.host_id, &a.node).cmp(&(b.tray_index, b.host_id, &b.node))
                });
                for (k, t) in mine.iter().enumerate() {
                    let Some(u_rank) = by_u.iter().position(|n| *n == t.node) else {
                        continue;
                    };
                    if u_rank != k {
                        let idx = inv_node.get(t.node.as_str()).map_or(usize::MAX, |x| x.0);
                        issues.push((
                            idx,
                            PlacementIssue {
                                node: Some(t.node.clone()),
                                rack: t.layout_rack.clone(),
                                words: format!(
                                    "{}: the layout's U{} makes it the {} tray from the bottom of rack {r}; DCGM's {} makes it the {}",
                                    t.node,
                                    t.layout_u,
                                    ordinal(u_rank + 1),
                                    tray_words(t),
                                    ordinal(k + 1)
                                ),
                            },
                        ));
                    }
                }
            }
        }
        trays.sort_by(|a, b| {
            (a.1.tray_index, a.1.host_id, &a.1.node).cmp(&(b.1.tray_index, b.1.host_id, &b.1.node))
        });
        out.chassis.push(Chassis {
            serial: serial.to_string(),
            rack,
            trays: trays.into_iter().map(|(_, t)| t).collect(),
        });
    }
    out.chassis.sort_by(|a, b| {
        let order = |r: &Option<String>| {
            r.as_deref()
                .and_then(|r| rack_order.get(r).copied())
                .unwrap_or(usize::MAX)
        };
        (order(&a.rack), &a.serial).cmp(&(order(&b.rack), &b.serial))
    });
    issues.sort_by(|a, b| (a.0, &a.1.words).cmp(&(b.0, &b.1.words)));
    out.issues = issues.into_iter().map(|(_, i)| i).collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two NVL72-like racks of 4 trays (U2..U5), each tray's 2 GPUs placed as `place`
    /// says (node index -> (serial, tray index)).
    fn fixture(
        place: impl Fn(usize) -> (String, u32),
    ) -> (Inventory, Vec<(String, Vec<GpuPlace>)>) {
        let mut inv = crate::sim::layout(8, "t");
        for (i, n) in inv.nodes.iter_mut().enumerate() {
            n.rack = if i < 4 { "A01".into() } else { "A02".into() };
            n.u_position = 2 + (i % 4) as u32;
        }
        let rack = inv.racks[0].clone();
        inv.racks = ["A01", "A02"]
            .map(|name| app::model::Rack {
                name: name.into(),
                ..rack.clone()
            })
            .to_vec();
        let places = inv
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let (serial, tray) = place(i);
                let gpus = (0..2)
                    .map(|g| GpuPlace {
                        gpu: g,
                        chassis_serial: serial.clone(),
                        slot: Some(tray + 1),
                        tray_index: Some(tray),
                        host_id: Some(1),
                        module_id: Some(g + 1),
                    })
                    .collect();
                (n.name.clone(), gpus)
            })
            .collect();
        (inv, places)
    }

    fn run(inv: &Inventory, places: &[(String, Vec<GpuPlace>)]) -> PlacementMap {
        let refs: Vec<(&str, &[GpuPlace])> = places
            .iter()
            .map(|(n, g)| (n.as_str(), g.as_slice()))
            .collect();
        compare(inv, &refs)
    }

    fn serial(i: usize) -> String {
        format!("S{}", i / 4 + 1)
    }

    #[test]
    fn a_layout_that_agrees_maps_every_tray_and_says_nothing() {
        let (inv, places) = fixture(|i| (serial(i), (i % 4) as u32));
        let m = run(&inv, &places);
        assert_eq!(m.nodes_reporting, 8);
        assert!(m.issues.is_empty(), "{:?}", m.issues);
        assert_eq!(m.chassis.len(), 2);
        assert_eq!(m.chassis[0].serial, "S1");
        assert_eq!(m.chassis[0].rack.as_deref(), Some("A01"));
        let names: Vec<&str> = m.chassis[1].trays.iter().map(|t| t.node.as_str()).collect();
        let want: Vec<&str> = inv.nodes[4..].iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, want);
        assert_eq!(m.chassis[1].trays[0].gpus, vec![(0, Some(1)), (1, Some(2))]);
    }

    #[test]
    fn swapped_trays_and_a_tray_in_the_wrong_rack_are_named() {
        // Trays 1 and 2 of rack A01 report each other's index; node 4 (layout A02) reports
        // chassis S1.
        let (inv, places) = fixture(|i| match i {
            1 => ("S1".into(), 2),
            2 => ("S1".into(), 1),
            4 => ("S1".into(), 7),
            _ => (serial(i), (i % 4) as u32),
        });
        let m = run(&inv, &places);
        let n = |i: usize| inv.nodes[i].name.clone();
        let named: Vec<&str> = m.issues.iter().filter_map(|x| x.node.as_deref()).collect();
        assert_eq!(
            named,
            vec![n(1).as_str(), n(2).as_str(), n(4).as_str()],
            "{:?}",
            m.issues
        );
        assert_eq!(
            m.issues[0].words,
            format!(
                "{}: the layout's U3 makes it the 2nd tray from the bottom of rack A01; DCGM's tray 2 makes it the 3rd",
                n(1)
            )
        );
        assert_eq!(
            m.issues[2].words,
            format!(
                "{}: the layout puts it in rack A02; DCGM says chassis S1, tray 7, where rack A01's trays are",
                n(4)
            )
        );
        assert_eq!(m.issues[2].rack, "A02");
    }

    #[test]
    fn a_node_split_over_chassis_or_trays_and_a_tray_claimed_twice() {
        let (inv, mut places) = fixture(|i| (serial(i), (i % 4) as u32));
        places[0].1[1].chassis_serial = "S9".into();
        places[5].1[1].tray_index = Some(3);
        places[7].1.iter_mut().for_each(|g| g.tray_index = Some(2));
        let m = run(&inv, &places);
        let words: Vec<&str> = m.issues.iter().map(|x| x.words.as_str()).collect();
        let n = |i: usize| inv.nodes[i].name.clone();
        assert_eq!(
            words,
            vec![
                format!(
                    "{}: its GPUs report chassis S1, S9; one node sits in one chassis",
                    n(0)
                )
                .as_str(),
                format!(
                    "{}: its GPUs report trays 1, 3; one node sits in one tray",
                    n(5)
                )
                .as_str(),
                format!("{}: it and {} both report chassis S2, tray 2", n(7), n(6)).as_str(),
            ]
        );
    }

    #[test]
    fn a_recorded_chassis_serial_is_checked_against_the_trays() {
        let (mut inv, places) = fixture(|i| (serial(i), (i % 4) as u32));
        inv.racks[0].chassis_serial = Some("S1".into());
        inv.racks[1].chassis_serial = Some("S7".into());
        let m = run(&inv, &places);
        assert_eq!(
            m.issues,
            vec![PlacementIssue {
                node: None,
                rack: "A02".into(),
                words: "rack A02: the layout records chassis S7; its trays report chassis S2"
                    .into(),
            }]
        );
    }

    #[test]
    fn blank_and_sentinel_values_are_no_value() {
        assert_eq!(string_field("<<<NULL>>>"), None);
        assert_eq!(string_field("<<<NOT_SUPPORTED>>>"), None);
        assert_eq!(string_field(""), None);
        assert_eq!(string_field("1652524000102"), Some("1652524000102"));
        assert_eq!(int_field("7"), Some(7));
        assert_eq!(int_field("2147483632"), None);
        assert_eq!(int_field("9223372036854775794"), None);
        assert_eq!(int_field("-1"), None);
        assert_eq!(ordinal(1), "1st");
        assert_eq!(ordinal(12), "12th");
        assert_eq!(ordinal(22), "22nd");
    }
}
