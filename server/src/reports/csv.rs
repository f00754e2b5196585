//! A report as CSV: one line per group, then the unallocated and total lines; keys a
//! spreadsheet would run as formulas defused. Pure.

use app::reports::ReportRow;

use super::answer::ReportData;

/// The report as CSV: one line per group, then the unallocated and total lines. Keys
/// that a spreadsheet would run as formulas are neutralised.
pub fn csv(r: &ReportData, currency: &str) -> String {
    let mut out = String::from(
        "group,capacity_gpu_h,allocated_gpu_h,busy_gpu_h,idle_gpu_h,free_gpu_h,drained_gpu_h,down_gpu_h,\
         throttle_lost_gpu_h,failure_lost_gpu_h,goodput_gpu_h,energy_kwh,",
    );
    let c = currency;
    out.push_str(&format!(
        "capex_{c},power_{c},overhead_{c},total_{c},idle_{c},throttle_{c},failures_{c},per_goodput_gpu_h_{c},cloud_same_hours_{c},\
         gpu_energy_kwh,energy_estimated_kwh,co2_kg,held_idle_gpu_h\n"
    ));
    let mut line = |r: &ReportRow| {
        let u = &r.usage;
        let k = &r.cost;
        out.push_str(&app::units::csv_field(&r.key));
        for v in [
            u.capacity_gh,
            u.allocated_gh,
            u.busy_gh,
            u.idle_gh,
            u.free_gh,
            u.drained_gh,
            u.down_gh,
            u.throttle_lost_gh,
            u.failure_lost_gh,
            u.goodput_gh,
            u.energy_kwh,
            k.capex,
            k.power,
            k.overhead,
            k.total,
            k.idle,
            k.throttle,
            k.failures,
        ] {
            out.push_str(&format!(",{v:.3}"));
        }
        match k.per_goodput_gh {
            Some(v) => out.push_str(&format!(",{v:.4}")),
            None => out.push(','),
        }
        out.push_str(&format!(",{:.3}", k.cloud_same_hours));
        out.push_str(&format!(
            ",{:.3},{:.3},",
            u.gpu_energy_kwh, u.energy_estimated_kwh
        ));
        if let Some(co2) = k.co2_kg {
            out.push_str(&format!("{co2:.3}"));
        }
        out.push_str(&format!(",{:.3}\n", u.held_idle_gh));
    };
    for row in &r.rows {
        line(row);
    }
    if let Some(u) = &r.unallocated {
        line(u);
    }
    let mut total = r.total.clone();
    total.key = "(total)".into();
    line(&total);
    out
}
