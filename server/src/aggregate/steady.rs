//! Display hysteresis: what the floor shows holds until it moves by about a display step.

use super::*;

/// Display hysteresis for the floor, against the previous published overview: a node's
/// power, hottest GPU and SM activity, and a rack's power and temperatures, keep their
/// shown value until they move by more than about one display step (0.1 kW for a node,
/// 0.2 kW for a rack, 1 °C for GPUs and inlets, 5%). Sensor noise then no longer rewrites a 2,048-node floor every
/// second; a real change still shows within the tick. Counts and states are never held.
pub fn steady(prev: &Overview, next: &mut Overview) {
    let hold = |old: Option<f64>, new: &mut Option<f64>, step: f64| {
        if let (Some(o), Some(n)) = (old, *new) {
            if (n - o).abs() <= step {
                *new = Some(o);
            }
        }
    };
    if prev.nodes.len() == next.nodes.len() {
        for (o, n) in prev.nodes.iter().zip(next.nodes.iter_mut()) {
            if o.name != n.name {
                continue;
            }
            hold(o.power_watts, &mut n.power_watts, 100.0);
            hold(o.gpu_temp_max_celsius, &mut n.gpu_temp_max_celsius, 1.0);
            hold(o.sm_active_mean, &mut n.sm_active_mean, 0.05);
        }
    }
    if prev.racks.len() == next.racks.len() {
        for (o, n) in prev.racks.iter().zip(next.racks.iter_mut()) {
            if o.name != n.name {
                continue;
            }
            hold(o.power_watts, &mut n.power_watts, 200.0);
            // Inlet sensors report whole degrees (BMCs, and the simulator as they do): a
            // reading that flips between two neighbours is noise, not news.
            hold(o.inlet_celsius, &mut n.inlet_celsius, 1.0);
            hold(o.gpu_temp_max_celsius, &mut n.gpu_temp_max_celsius, 1.0);
            if let (Some(oc), Some(nc)) = (&o.coolant, n.coolant.as_mut()) {
                // Coolant moves slowly: within 0.3 °C and 2% of flow is sensor noise.
                hold(oc.supply_celsius, &mut nc.supply_celsius, 0.3);
                hold(oc.return_celsius, &mut nc.return_celsius, 0.3);
                let step = oc.flow_lpm.unwrap_or(0.0) * 0.02;
                hold(oc.flow_lpm, &mut nc.flow_lpm, step);
                nc.delta_t_celsius = nc
                    .supply_celsius
                    .zip(nc.return_celsius)
                    .map(|(s, r)| ((r - s) * 10.0).round() / 10.0);
            }
        }
    }
    if prev.domains.len() == next.domains.len() {
        for (o, n) in prev.domains.iter().zip(next.domains.iter_mut()) {
            if o.name != n.name {
                continue;
            }
            // Traffic moves with every step of every job: hold it within 10%.
            let step = o.nvlink_bytes_per_second.unwrap_or(0.0) * 0.1;
            hold(
                o.nvlink_bytes_per_second,
                &mut n.nvlink_bytes_per_second,
                step,
            );
            let step = o.ib_bytes_per_second.unwrap_or(0.0) * 0.1;
            hold(o.ib_bytes_per_second, &mut n.ib_bytes_per_second, step);
            hold(o.sm_active_mean, &mut n.sm_active_mean, 0.05);
        }
    }
}
