//! The pure arithmetic of a report: GPU-hours and energy from the sums, what they cost at
//! the rates, hours per chart bucket, and the check of the `[reports]` rates.

use app::model::UnixMs;
use app::reports::{Cost, Rates, Usage};

use super::HOUR_MS;
use crate::store::ReportSums;

/// GPU-seconds and energy as the report shows them.
pub fn usage(s: &ReportSums) -> Usage {
    let gh = |x: f64| x / 3600.0;
    let allocated = gh(s.allocated_gs);
    let idle = gh((s.allocated_gs - s.busy_gs).max(0.0));
    let throttle = gh(s.throttle_lost_gs);
    let failure = gh(s.failure_lost_gs);
    Usage {
        capacity_gh: gh(s.capacity_gs),
        allocated_gh: allocated,
        busy_gh: gh(s.busy_gs),
        idle_gh: idle,
        free_gh: gh((s.capacity_gs - s.allocated_gs - s.drained_gs - s.down_gs).max(0.0)),
        drained_gh: gh(s.drained_gs),
        down_gh: gh(s.down_gs),
        throttle_lost_gh: throttle,
        failure_lost_gh: failure,
        goodput_gh: (allocated - idle - throttle - failure).max(0.0),
        energy_kwh: s.energy_wh / 1000.0,
        gpu_energy_kwh: s.gpu_energy_wh / 1000.0,
        energy_estimated_kwh: s.gpu_energy_est_wh / 1000.0,
        held_idle_gh: gh(s.held_idle_gs),
    }
}

/// What `u` cost at `rates`; `rack_share_s` is the group's rack-seconds.
pub fn cost(u: &Usage, rack_share_s: f64, rates: &Rates) -> Cost {
    let capex_per_gh = rates.gpu_capex / (rates.amortization_years * 8760.0);
    let capex = u.capacity_gh * capex_per_gh;
    let power = u.energy_kwh * rates.power_price_per_kwh * rates.pue;
    let overhead = rack_share_s / 3600.0 * rates.rack_overhead_per_month * 12.0 / 8760.0;
    let total = capex + power + overhead;
    let rate = if u.capacity_gh > 0.0 {
        total / u.capacity_gh
    } else {
        0.0
    };
    Cost {
        capex,
        power,
        overhead,
        total,
        idle: u.idle_gh * rate,
        throttle: u.throttle_lost_gh * rate,
        failures: u.failure_lost_gh * rate,
        per_goodput_gh: (u.goodput_gh > 0.0).then(|| total / u.goodput_gh),
        cloud_same_hours: u.allocated_gh * rates.cloud_gpu_hour,
        co2_kg: (rates.grid_kg_co2_per_kwh > 0.0)
            .then_some(u.energy_kwh * rates.pue * rates.grid_kg_co2_per_kwh),
    }
}

/// Hours per chart bucket: at most about 170 points whatever the period.
pub fn bucket_hours(from_ms: UnixMs, to_ms: UnixMs) -> i64 {
    let hours = ((to_ms - from_ms) / HOUR_MS).max(1);
    [1, 2, 3, 6, 12, 24]
        .into_iter()
        .find(|b| hours / b <= 170)
        .unwrap_or(24)
}

/// The rates from `[reports]`, checked.
pub fn validate(r: &Rates) -> Result<(), String> {
    let pos = [("amortization_years", r.amortization_years), ("pue", r.pue)];
    for (k, v) in pos {
        if !(v.is_finite() && v > 0.0) {
            return Err(format!("reports.{k} must be a positive number, got {v}"));
        }
    }
    let nonneg = [
        ("gpu_capex", r.gpu_capex),
        ("power_price_per_kwh", r.power_price_per_kwh),
        ("rack_overhead_per_month", r.rack_overhead_per_month),
        ("cloud_gpu_hour", r.cloud_gpu_hour),
        ("idle_below_sm", r.idle_below_sm),
        ("grid_kg_co2_per_kwh", r.grid_kg_co2_per_kwh),
    ];
    for (k, v) in nonneg {
        if !(v.is_finite() && v >= 0.0) {
            return Err(format!("reports.{k} must be zero or more, got {v}"));
        }
    }
    if r.grid_kg_co2_per_kwh > 2.0 {
        return Err("reports.grid_kg_co2_per_kwh is kg of CO2 per kWh, at most 2".into());
    }
    if r.idle_below_sm > 1.0 {
        return Err("reports.idle_below_sm is a ratio, 0 to 1".into());
    }
    if r.currency.trim().is_empty() || r.currency.len() > 8 {
        return Err("reports.currency must be a short code like USD or EUR".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_follows_the_rates_and_bad_rates_are_refused() {
        let rates = Rates {
            gpu_capex: 8760.0,
            amortization_years: 1.0,
            power_price_per_kwh: 0.1,
            pue: 1.5,
            rack_overhead_per_month: 730.0,
            cloud_gpu_hour: 3.0,
            ..Rates::default()
        };
        let u = usage(&ReportSums {
            capacity_gs: 36_000.0,
            allocated_gs: 36_000.0,
            busy_gs: 18_000.0,
            energy_wh: 10_000.0,
            ..ReportSums::default()
        });
        assert_eq!((u.capacity_gh, u.idle_gh, u.goodput_gh), (10.0, 5.0, 5.0));
        let c = cost(&u, 7200.0, &rates);
        assert!((c.capex - 10.0).abs() < 1e-9);
        assert!((c.power - 10.0 * 0.1 * 1.5).abs() < 1e-9);
        assert!((c.overhead - 2.0).abs() < 1e-9);
        assert!((c.idle - 5.0 * c.total / 10.0).abs() < 1e-9);
        assert_eq!(c.cloud_same_hours, 30.0);
        assert!(validate(&rates).is_ok());
        for bad in [
            Rates {
                pue: 0.0,
                ..Rates::default()
            },
            Rates {
                amortization_years: -1.0,
                ..Rates::default()
            },
            Rates {
                gpu_capex: f64::NAN,
                ..Rates::default()
            },
            Rates {
                idle_below_sm: 5.0,
                ..Rates::default()
            },
            Rates {
                currency: String::new(),
                ..Rates::default()
            },
        ] {
            assert!(validate(&bad).is_err(), "{bad:?}");
        }
        assert_eq!(bucket_hours(0, 86_400_000), 1);
        assert_eq!(bucket_hours(0, 31 * 86_400_000), 6);
        assert_eq!(bucket_hours(0, 90 * 86_400_000), 24);
    }
}
