//! The fleet level of the overview: one tile per data hall, summed from its racks' tiles
//! and their nodes' GPUs, so a hall's figures are exactly the sum of what its racks show.

use app::live::{GpuCounts, HallTile, RackTile};
use app::model::Inventory;

/// What a rack adds to its hall beyond its tile: its GPUs by state and the SM activity of
/// its allocated GPUs with a reading.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RackSums {
    pub gpus: GpuCounts,
    pub nodes: u32,
    pub sm_sum: f64,
    pub sm_n: u32,
}

/// One tile per hall of `inv`, in its order, from `racks` (the overview's tiles, in the
/// inventory's rack order) and `sums` (the same order); none where the layout names no halls.
pub(super) fn halls(inv: &Inventory, racks: &[RackTile], sums: &[RackSums]) -> Vec<HallTile> {
    inv.halls
        .iter()
        .map(|h| {
            let mut t = HallTile {
                name: h.name.clone(),
                power_feed_watts: h.power_feed_watts,
                ..HallTile::default()
            };
            let (mut sm_sum, mut sm_n) = (0.0, 0u32);
            let mut rows: Vec<&str> = Vec::new();
            for ((rack, tile), s) in inv.racks.iter().zip(racks).zip(sums) {
                if rack.hall != h.name {
                    continue;
                }
                if !rows.contains(&rack.row.as_str()) {
                    rows.push(rack.row.as_str());
                }
                t.racks += 1;
                t.power_watts += tile.power_watts.unwrap_or(0.0);
                t.power_limit_watts += tile.power_limit_watts;
                t.gpus.add(s.gpus);
                t.nodes += s.nodes;
                t.gpus_throttling += tile.gpus_throttling;
                t.nodes_unavailable += tile.nodes_unavailable;
                t.nodes_not_reporting += tile.nodes_not_reporting;
                if tile
                    .power_watts
                    .is_some_and(|p| tile.power_limit_watts > 0.0 && p > tile.power_limit_watts)
                {
                    t.racks_over_limit += 1;
                }
                sm_sum += s.sm_sum;
                sm_n += s.sm_n;
            }
            t.rows = rows.len() as u32;
            t.sm_active_mean = (sm_n > 0).then(|| sm_sum / f64::from(sm_n));
            t
        })
        .collect()
}

/// Marks each hall with the worst open incident of its racks (critical, then warning,
/// then the rest; the first such rack in layout order), counting every one open in it.
pub(crate) fn stamp_incidents(halls: &mut [HallTile], racks: &[RackTile]) {
    fn rank(severity: &str) -> u8 {
        match severity {
            "critical" => 0,
            "warning" => 1,
            _ => 2,
        }
    }
    for h in halls.iter_mut() {
        let mut worst: Option<app::live::RackIncident> = None;
        let mut count = 0;
        for i in racks
            .iter()
            .filter(|r| r.hall == h.name)
            .filter_map(|r| r.incident.as_ref())
        {
            count += i.count;
            if worst
                .as_ref()
                .is_none_or(|w| rank(&i.severity) < rank(&w.severity))
            {
                worst = Some(i.clone());
            }
        }
        h.incident = worst.map(|mut w| {
            w.count = count;
            w
        });
    }
}
