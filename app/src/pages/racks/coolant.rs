//! Liquid racks' coolant loops: what a rack's head on the floor says of its leaks, the
//! coolant's rise and flow (the `/thermal` page's coolant table writes its values alike).

use crate::live::CoolantTile;
use crate::model::LeakState;
use crate::units;

/// A liquid rack's head line: a leak first (state and trays), then the coolant's rise
/// and flow, trays short of flow, and the inlet air last.
pub(crate) fn coolant_words(c: &CoolantTile, inlet: Option<f64>) -> String {
    let mut w = Vec::new();
    if c.leak != LeakState::Ok {
        w.push(format!(
            "LEAK ({}) at {}",
            c.leak.label(),
            if c.leaking.is_empty() {
                "-".to_string()
            } else {
                c.leaking.join(", ")
            }
        ));
    }
    w.push(format!(
        "coolant ΔT {}{} · flow {}",
        tenths(c.delta_t_celsius, "°C"),
        if c.delta_t_high() {
            " (over limit)"
        } else {
            ""
        },
        tenths(c.flow_lpm, "L/min")
    ));
    if !c.low_flow.is_empty() {
        w.push(format!("low flow at {}", c.low_flow.join(", ")));
    }
    w.push(format!("inlet {} · liquid", units::celsius(inlet)));
    w.join(" · ")
}

/// A value to 0.1 with its unit, or `-`.
pub(crate) fn tenths(v: Option<f64>, unit: &str) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.1} {unit}"),
        _ => "-".into(),
    }
}
