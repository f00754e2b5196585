//! A rack's power shelves against its bus bar: what the working supplies deliver, less the reserve.

/// A rack's power shelves against its bus bar (`None` for a rack the layout gives no
/// shelves and that reports none). Shelves in the layout but absent from a fresh reading
/// deliver nothing; the limit is what the working shelves deliver less the largest
/// `power_shelves_redundant` of them (the reserve), known only if every working supply
/// gives its capacity.
pub fn shelves_tile(
    rack: &app::model::Rack,
    shelves: &[app::model::ShelfReading],
) -> Option<app::live::ShelvesTile> {
    if rack.power_shelves.is_none() && shelves.is_empty() {
        return None;
    }
    let reporting = shelves.len() as u32;
    let expected = rack.power_shelves.unwrap_or(reporting);
    let missing = if reporting > 0 {
        expected.saturating_sub(reporting)
    } else {
        0
    };
    let names = |f: fn(&app::model::ShelfReading) -> bool| -> Vec<String> {
        shelves
            .iter()
            .filter(|s| f(s))
            .map(|s| s.shelf.clone())
            .collect()
    };
    let limit_watts = if reporting == 0 {
        None
    } else {
        shelves
            .iter()
            .map(|s| s.capacity_watts)
            .collect::<Option<Vec<f64>>>()
            .map(|mut caps| {
                caps.extend(std::iter::repeat_n(0.0, missing as usize));
                caps.sort_by(|a, b| b.total_cmp(a));
                let reserve: f64 = caps
                    .iter()
                    .take(rack.power_shelves_redundant as usize)
                    .sum();
                (caps.iter().sum::<f64>() - reserve).max(0.0).round()
            })
    };
    Some(app::live::ShelvesTile {
        expected,
        reporting,
        down: names(app::model::ShelfReading::is_down),
        missing,
        degraded: names(app::model::ShelfReading::is_degraded),
        busbar_watts: rack.power_limit_watts,
        limit_watts,
    })
}
