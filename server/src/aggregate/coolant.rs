//! Each liquid rack's coolant loop from its trays' readings.

use super::*;

/// Each liquid rack's coolant loop from its trays' readings (`None` for air racks):
/// supply and return as means over the trays that report them, flow summed, the worst
/// leak detector, and the trays leaking or under the rack's flow limit, in inventory
/// order. Rounded to the display's 0.1.
pub(super) fn coolant_tiles(
    inv: &Inventory,
    r: &Readings,
    ix: &HashMap<&str, usize>,
    rack_of: &[Option<usize>],
) -> Vec<Option<app::live::CoolantTile>> {
    let mut tiles: Vec<Option<app::live::CoolantTile>> = inv
        .racks
        .iter()
        .map(|rack| {
            (rack.cooling == app::model::Cooling::Liquid).then(|| app::live::CoolantTile {
                flow_min_lpm: rack.coolant_flow_min_lpm,
                delta_t_max_celsius: rack.coolant_delta_t_max_celsius,
                ..Default::default()
            })
        })
        .collect();
    if tiles.iter().all(Option::is_none) {
        return tiles;
    }
    // Per rack: sums and counts of supply, return and flow; trays in trouble by index.
    let mut acc = vec![[(0.0f64, 0u32); 3]; inv.racks.len()];
    let mut leaking: Vec<Vec<usize>> = vec![Vec::new(); inv.racks.len()];
    let mut low: Vec<Vec<usize>> = vec![Vec::new(); inv.racks.len()];
    for n in &r.nodes {
        let (Some(c), Some(&ni)) = (n.coolant, ix.get(n.name.as_str())) else {
            continue;
        };
        let Some(ri) = rack_of[ni] else { continue };
        let Some(t) = tiles[ri].as_mut() else {
            continue;
        };
        t.trays_reporting += 1;
        for (k, v) in [c.supply_celsius, c.return_celsius, c.flow_lpm]
            .into_iter()
            .enumerate()
        {
            if let Some(v) = v {
                acc[ri][k].0 += v;
                acc[ri][k].1 += 1;
            }
        }
        if let Some(l) = c.leak {
            t.leak = t.leak.max(l);
            if l != app::model::LeakState::Ok {
                leaking[ri].push(ni);
            }
        }
        if let (Some(f), Some(min)) = (c.flow_lpm, t.flow_min_lpm) {
            if f < min {
                low[ri].push(ni);
            }
        }
    }
    let round = |x: f64| (x * 10.0).round() / 10.0;
    let names = |mut v: Vec<usize>| {
        v.sort_unstable();
        v.into_iter().map(|i| inv.nodes[i].name.clone()).collect()
    };
    for (ri, t) in tiles.iter_mut().enumerate() {
        let Some(t) = t.as_mut() else { continue };
        let mean = |(sum, n): (f64, u32)| (n > 0).then(|| sum / f64::from(n));
        t.supply_celsius = mean(acc[ri][0]).map(round);
        t.return_celsius = mean(acc[ri][1]).map(round);
        t.delta_t_celsius = t
            .supply_celsius
            .zip(t.return_celsius)
            .map(|(s, r)| round(r - s));
        t.flow_lpm = (acc[ri][2].1 > 0).then(|| round(acc[ri][2].0));
        t.leaking = names(std::mem::take(&mut leaking[ri]));
        t.low_flow = names(std::mem::take(&mut low[ri]));
    }
    tiles
}
