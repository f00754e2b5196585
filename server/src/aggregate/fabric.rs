//! Each NVL72 rack's NVLink fabric tile from its switch trays' ports (NMX-T).

use super::*;

/// Each rack's NVLink switch trays (by inventory index; `None` for a rack the layout gives
/// none and that reports none). A compute tray NMX-T names by its chassis and tray index
/// is the node DCGM's identity fields place there (this tick's readings), else the
/// rack's node at that index in the layout's order by U position (NMX-T and DCGM count
/// compute trays from 0), else `tray N`.
pub fn fabric_tiles(inv: &Inventory, r: &Readings) -> Vec<Option<app::live::FabricTile>> {
    let readings: HashMap<&str, &app::model::NvlinkFabric> = r
        .racks
        .iter()
        .filter_map(|x| x.fabric.as_ref().map(|f| (x.rack.as_str(), f)))
        .collect();
    if readings.is_empty() && inv.racks.iter().all(|x| x.switch_trays.is_none()) {
        return vec![None; inv.racks.len()];
    }
    let mut placed: HashMap<(&str, u32), &str> = HashMap::new();
    for n in &r.nodes {
        for p in &n.places {
            if let Some(t) = p.tray_index {
                placed
                    .entry((p.chassis_serial.as_str(), t))
                    .or_insert(n.name.as_str());
            }
        }
    }
    let inv_idx: HashMap<&str, usize> = inv
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    inv.racks
        .iter()
        .map(|rack| {
            let f = readings.get(rack.name.as_str()).copied();
            if rack.switch_trays.is_none() && f.is_none() {
                return None;
            }
            let Some(f) = f else {
                return Some(app::live::FabricTile {
                    expected: rack.switch_trays.unwrap_or(0),
                    ..Default::default()
                });
            };
            let reporting = f.switch_trays.len() as u32;
            let expected = rack.switch_trays.unwrap_or(reporting);
            let chassis = f
                .chassis_ids
                .first()
                .or(rack.chassis_serial.as_ref())
                .map(String::as_str);
            let mut by_u: Vec<&app::model::Node> =
                inv.nodes.iter().filter(|n| n.rack == rack.name).collect();
            by_u.sort_by_key(|n| n.u_position);
            let name_of = |d: &app::model::NvlinkPortDown| -> String {
                let Some(t) = d.tray_index else {
                    return match d.chassis_slot {
                        Some(s) => format!("slot {s}"),
                        None => "a tray not named".into(),
                    };
                };
                chassis
                    .and_then(|c| placed.get(&(c, t)).copied())
                    .or_else(|| by_u.get(t as usize).map(|n| n.name.as_str()))
                    .map_or_else(|| format!("tray {t}"), str::to_string)
            };
            let mut cut: Vec<String> = Vec::new();
            let mut words: Vec<String> = Vec::new();
            for (tray, d) in f
                .switch_trays
                .iter()
                .flat_map(|t| t.not_active.iter().map(move |d| (Some(t), d)))
                .chain(f.unpartnered_down.iter().map(|d| (None, d)))
            {
                let name = name_of(d);
                if tray.is_none_or(|t| !t.is_down()) && words.len() < 8 {
                    words.push(format!(
                        "{name} GPU {} {} to {}{}",
                        d.device.map_or("?".to_string(), |g| g.to_string()),
                        d.port_label,
                        tray.map_or("a switch tray not named", |t| t.tray.as_str()),
                        d.down_blame
                            .as_deref()
                            .map(|b| format!(" ({b})"))
                            .unwrap_or_default()
                    ));
                }
                if !cut.contains(&name) {
                    cut.push(name);
                }
            }
            // Nodes in inventory order, then trays with no node by their index ("tray 8"
            // before "tray 10"), then the rest by name.
            cut.sort_by_key(|n| {
                (
                    inv_idx.get(n.as_str()).copied().unwrap_or(usize::MAX),
                    n.strip_prefix("tray ")
                        .and_then(|t| t.parse::<u32>().ok())
                        .unwrap_or(u32::MAX),
                    n.clone(),
                )
            });
            let down: Vec<String> = f
                .switch_trays
                .iter()
                .filter(|t| t.is_down())
                .map(|t| t.tray.clone())
                .collect();
            Some(app::live::FabricTile {
                expected,
                reporting,
                links: f.switch_trays.iter().map(|t| t.links).sum(),
                active: f.switch_trays.iter().map(|t| t.active).sum(),
                missing: if reporting > 0 {
                    expected.saturating_sub(reporting)
                } else {
                    0
                },
                degraded: f
                    .trays_degraded()
                    .filter(|t| !t.is_down())
                    .map(|t| t.tray.clone())
                    .collect(),
                down,
                cut,
                links_down: words,
            })
        })
        .collect()
}
