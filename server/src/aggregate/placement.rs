//! Each rack's placement tile: DCGM's rack map (platform identity fields) against the layout.

use super::*;

/// Each rack's placement tile (by inventory index) from DCGM's identity fields: `None`
/// for every rack when no node reports them (no work for clusters whose exporters do not).
pub(super) fn placement_tiles(
    inv: &Inventory,
    r: &Readings,
    rack_idx: &HashMap<&str, usize>,
    rack_of: &[Option<usize>],
) -> Vec<Option<app::live::PlacementTile>> {
    let mut out: Vec<Option<app::live::PlacementTile>> = vec![None; inv.racks.len()];
    if r.nodes.iter().all(|n| n.places.is_empty()) {
        return out;
    }
    let places = r.places();
    let map = crate::cluster::placement::compare(inv, &places);
    let reporting: std::collections::HashSet<&str> = places.iter().map(|(n, _)| *n).collect();
    for (i, n) in inv.nodes.iter().enumerate() {
        if let (Some(ri), true) = (rack_of[i], reporting.contains(n.name.as_str())) {
            out[ri].get_or_insert_with(Default::default).trays_reporting += 1;
        }
    }
    for c in &map.chassis {
        if let Some(&ri) = c.rack.as_deref().and_then(|x| rack_idx.get(x)) {
            out[ri]
                .get_or_insert_with(Default::default)
                .chassis
                .push(c.serial.clone());
        }
    }
    for issue in map.issues {
        if let Some(&ri) = rack_idx.get(issue.rack.as_str()) {
            out[ri]
                .get_or_insert_with(Default::default)
                .issues
                .push(issue.words);
        }
    }
    out
}
