//! A node's BMC or PDU exporter read through the [`PowerMapping`]: node power, inlet
//! temperature and, on liquid-cooled trays, the coolant loop.

use app::model::{CoolantReading, LeakState};

use super::PowerMapping;
use crate::telemetry::exposition;

/// What a BMC/PDU exporter's text says, through `mapping`.
#[derive(Debug)]
pub struct BmcReading {
    pub power_watts: Option<f64>,
    pub inlet_celsius: Option<f64>,
    pub coolant: CoolantReading,
    pub report: exposition::Report,
}

/// Puts one mapped sample (`which`: the index in [`PowerMapping::pickers`]) into `out`:
/// the last finite one of each reading, the worst leak state.
pub(super) fn bmc_sample(
    which: usize,
    v: f64,
    out: &mut (Option<f64>, Option<f64>, CoolantReading),
) {
    if !v.is_finite() {
        return;
    }
    match which {
        0 => out.0 = Some(v),
        1 => out.1 = Some(v),
        2 => out.2.supply_celsius = Some(v),
        3 => out.2.return_celsius = Some(v),
        4 if v >= 0.0 => out.2.flow_lpm = Some(v),
        5 => {
            if let Some(l) = LeakState::from_sensor(v) {
                out.2.leak = Some(out.2.leak.map_or(l, |o| o.max(l)));
            }
        }
        _ => {}
    }
}

/// Reads node power, inlet temperature and the coolant loop from a BMC or PDU exporter's
/// text: the last finite sample of each mapped metric whose label (if the mapping names
/// one) matches; of leak detectors, the worst state.
pub fn read_bmc(body: &[u8], m: &PowerMapping) -> BmcReading {
    let mut out = (None, None, CoolantReading::default());
    let pickers = m.pickers();
    let report = exposition::parse(body, |s| {
        for (i, (metric, label)) in pickers.iter().enumerate() {
            let picked = s.name == *metric
                && label
                    .as_ref()
                    .is_none_or(|(k, v)| s.label(k) == Some(v.as_str()));
            if picked {
                bmc_sample(i, s.value, &mut out);
            }
        }
    });
    BmcReading {
        power_watts: out.0,
        inlet_celsius: out.1,
        coolant: out.2,
        report,
    }
}
