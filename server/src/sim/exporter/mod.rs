//! The simulated cluster's exporters: each node's readings rendered exactly as
//! dcgm-exporter 4.x (per GPU) and ipmi_exporter (node power, inlet temperature) write
//! them, so Gantry's scrape path reads the simulator like a real cluster. Pure: readings
//! in, text out.

use std::fmt::Write;

use app::model::{Inventory, Node};

use crate::telemetry::Readings;

const DRIVER_VERSION: &str = "580.105.08";

/// The inventory's node `node`: found at its place in the readings' nodes (the simulator
/// lists them in the inventory's order), else searched.
pub fn inventory_node<'a>(inv: &'a Inventory, r: &Readings, node: &str) -> Option<&'a Node> {
    r.node_position(node)
        .and_then(|i| inv.nodes.get(i))
        .filter(|n| n.name == node)
        .or_else(|| inv.nodes.iter().find(|n| n.name == node))
}

/// dcgm-exporter's text for `node`, or `None` for a node the cluster does not have. A node
/// that is down answers nothing (its exporter is unreachable), which is also `None`.
pub fn render_dcgm(inv: &Inventory, r: &Readings, node: &str) -> Option<String> {
    let n = inventory_node(inv, r, node)?;
    let gpus: Vec<_> = r.gpus_of(node).collect();
    if gpus.iter().all(|g| g.power_watts.is_none()) {
        return None;
    }
    let job = r.running_job_on(node);
    let mut out = String::with_capacity(gpus.len() * 7000);
    // Rack-scale systems: DCGM's platform identity fields, listed in the counters file
    // with type `label`, ride on every series of the GPU after the driver version.
    let places = r.node(node).map(|x| &x.places);
    let labels: Vec<String> = gpus
        .iter()
        .map(|g| {
            let inv_gpu = n.gpus.iter().find(|x| x.index == g.index);
            let mut l = format!(
                "gpu=\"{i}\",UUID=\"{uuid}\",pci_bus_id=\"00000000:{bus:02X}:00.0\",device=\"nvidia{i}\",modelName=\"{model}\",Hostname=\"{node}\",DCGM_FI_DRIVER_VERSION=\"{DRIVER_VERSION}\"",
                i = g.index,
                uuid = inv_gpu.map(|x| x.uuid.as_str()).unwrap_or(""),
                bus = 0x18 + 0x11 * g.index,
                model = inv_gpu.map(|x| x.model.as_str()).unwrap_or(""),
            );
            if let Some(p) = places.and_then(|p| p.iter().find(|p| p.gpu == g.index)) {
                use crate::cluster::placement::*;
                let num = |v: Option<u32>| v.map_or(String::new(), |v| v.to_string());
                let _ = write!(
                    l,
                    ",{CHASSIS_SERIAL_LABEL}=\"{}\",{SLOT_LABEL}=\"{}\",{TRAY_LABEL}=\"{}\",{HOST_LABEL}=\"{}\",{MODULE_LABEL}=\"{}\"",
                    p.chassis_serial,
                    num(p.slot),
                    num(p.tray_index),
                    num(p.host_id),
                    num(p.module_id)
                );
            }
            l
        })
        .collect();
    let job_label = job
        .map(|j| format!(",hpc_job=\"{}\"", j.id))
        .unwrap_or_default();
    // One family: HELP, TYPE, then a line per GPU that has a value (with extra labels).
    let mut family =
        |name: &str, kind: &str, help: &str, value: &dyn Fn(usize) -> Option<(String, String)>| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (i, l) in labels.iter().enumerate() {
                if let Some((extra, v)) = value(i) {
                    let _ = writeln!(out, "{name}{{{l}{extra}}} {v}");
                }
            }
        };
    let plain = |v: Option<String>| v.map(|v| (String::new(), v));
    let with_job = |v: Option<String>| v.map(|v| (job_label.clone(), v));
    let int = |v: Option<f64>| v.map(|x| format!("{}", x.round() as i64));
    let whole = |v: Option<u64>| v.map(|x| x.to_string());
    let float = |v: Option<f64>| v.map(|x| format!("{x:.6}"));
    let zero = |_: usize| plain(Some("0".to_string()));
    // Traffic as dcgm-exporter's profiling fields: bytes per second each way (the
    // simulator splits its total evenly).
    let half = |v: Option<f64>| v.map(|x| format!("{}", (x / 2.0).round() as u64));
    // Framebuffer of an H100 80GB in MiB: what the driver reserves, and what a training
    // job's model, optimizer state and activations hold.
    const FB_TOTAL_MIB: u64 = 81_559;
    const FB_RESERVED_MIB: u64 = 579;
    let fb_used = |i: usize| gpus[i].fb_used_mib.unwrap_or(0.0) as u64;
    // dcgm-exporter's default counters (etc/default-counters.csv) and its profiling (DCP)
    // fields, in that file's order, plus the enforced power limit: 32 fields per GPU, as a
    // site scraping the default set sees. Gantry reads 24 of them.
    family(
        "DCGM_FI_DEV_SM_CLOCK",
        "gauge",
        "SM clock frequency (in MHz).",
        &|i| plain(int(gpus[i].sm_clock_mhz)),
    );
    family(
        "DCGM_FI_DEV_MEM_CLOCK",
        "gauge",
        "Memory clock frequency (in MHz).",
        &|_| plain(Some("2619".into())),
    );
    family(
        "DCGM_FI_DEV_MEMORY_TEMP",
        "gauge",
        "Memory temperature (in C).",
        &|i| plain(int(gpus[i].memory_temp_celsius)),
    );
    family(
        "DCGM_FI_DEV_GPU_TEMP",
        "gauge",
        "GPU temperature (in C).",
        &|i| plain(int(gpus[i].temp_celsius)),
    );
    family(
        "DCGM_FI_DEV_POWER_USAGE",
        "gauge",
        "Power draw (in W).",
        &|i| with_job(float(gpus[i].power_watts)),
    );
    family(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
        &|i| plain(int(gpus[i].energy_joules.map(|j| j * 1000.0))),
    );
    family(
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "counter",
        "Total number of PCIe retries.",
        &|i| plain(whole(gpus[i].pcie_replay_total)),
    );
    family(
        "DCGM_FI_DEV_GPU_UTIL",
        "gauge",
        "GPU utilization (in %).",
        &|i| plain(int(gpus[i].gpu_util_percent)),
    );
    family(
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "gauge",
        "Memory utilization (in %).",
        &|i| plain(int(gpus[i].dram_active_ratio.map(|r| r * 100.0))),
    );
    family(
        "DCGM_FI_DEV_ENC_UTIL",
        "gauge",
        "Encoder utilization (in %).",
        &zero,
    );
    family(
        "DCGM_FI_DEV_DEC_UTIL",
        "gauge",
        "Decoder utilization (in %).",
        &zero,
    );
    // The last XID, with the exporter's err_code/err_msg labels; 0 when there was none.
    family(
        "DCGM_FI_DEV_XID_ERRORS",
        "gauge",
        "Value of the last XID error encountered.",
        &|i| {
            Some(match gpus[i].last_xid {
                Some(x) => {
                    let msg = if x == 48 {
                        "DBE (Double Bit Error) ECC Error"
                    } else {
                        ""
                    };
                    (
                        format!(",err_code=\"{x}\",err_msg=\"{msg}\""),
                        x.to_string(),
                    )
                }
                None => (String::new(), "0".into()),
            })
        },
    );
    family(
        "DCGM_FI_DEV_FB_FREE",
        "gauge",
        "Framebuffer memory free (in MiB).",
        &|i| plain(whole(Some(FB_TOTAL_MIB - FB_RESERVED_MIB - fb_used(i)))),
    );
    family(
        "DCGM_FI_DEV_FB_USED",
        "gauge",
        "Framebuffer memory used (in MiB).",
        &|i| plain(whole(Some(fb_used(i)))),
    );
    family(
        "DCGM_FI_DEV_FB_RESERVED",
        "gauge",
        "Framebuffer memory reserved (in MiB).",
        &|_| plain(whole(Some(FB_RESERVED_MIB))),
    );
    family(
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "counter",
        "Total number of NVLink bandwidth counters for all lanes.",
        &zero,
    );
    family(
        "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
        "gauge",
        "vGPU License status",
        &zero,
    );
    family(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
        &|i| plain(whole(gpus[i].remapped_rows_uncorrectable)),
    );
    family(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for correctable errors",
        &zero,
    );
    family(
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "gauge",
        "Whether remapping of rows has failed",
        &zero,
    );
    family(
        "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
        "gauge",
        "Effective power limit that the driver enforces after taking into account all limiters (in W).",
        &|i| plain(float(gpus[i].power_limit_watts)),
    );
    family(
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "gauge",
        "Current clock throttle reasons.",
        &|i| plain(gpus[i].throttle.map(|t| t.0.to_string())),
    );
    family(
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "counter",
        "Total number of single-bit persistent ECC errors.",
        &|i| plain(whole(gpus[i].ecc_sbe_total)),
    );
    family(
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "counter",
        "Total number of double-bit persistent ECC errors.",
        &|i| plain(whole(gpus[i].ecc_dbe_total)),
    );
    family(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "gauge",
        "Ratio of time the graphics engine is active.",
        &|i| with_job(float(gpus[i].gr_engine_active_ratio)),
    );
    family(
        "DCGM_FI_PROF_SM_ACTIVE",
        "gauge",
        "The ratio of cycles an SM has at least 1 warp assigned (in %).",
        &|i| with_job(float(gpus[i].sm_active_ratio)),
    );
    family(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        &|i| with_job(float(gpus[i].tensor_active_ratio)),
    );
    family(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        &|i| with_job(float(gpus[i].dram_active_ratio)),
    );
    family(
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
        &|i| plain(half(gpus[i].pcie_bytes_per_second)),
    );
    family(
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
        &|i| plain(half(gpus[i].pcie_bytes_per_second)),
    );
    family(
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "gauge",
        "The rate of data transmitted over NVLink, not including protocol headers, in bytes per second.",
        &|i| plain(half(gpus[i].nvlink_bytes_per_second)),
    );
    family(
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "gauge",
        "The rate of data received over NVLink, not including protocol headers, in bytes per second.",
        &|i| plain(half(gpus[i].nvlink_bytes_per_second)),
    );
    // The node's NVSwitches (HGX baseboards), as dcgm-exporter up to 4.5 writes switch
    // entities when the site's counters file lists their fields: `nvswitch="N"` and
    // `Hostname`, whole numbers; field 856 is the SXid (0: none).
    let switches = r.node(node).map(|x| &x.switches).filter(|s| !s.is_empty());
    if let Some(switches) = switches {
        type Value = fn(&app::model::SwitchReading) -> Option<f64>;
        let families: [(&str, &str, Value); 6] = [
            (
                "DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT",
                "NVSwitch current temperature.",
                |s| s.temp_celsius,
            ),
            (
                "DCGM_FI_DEV_NVSWITCH_TEMPERATURE_LIMIT_SLOWDOWN",
                "NVSwitch limit slowdown temperature.",
                |s| s.slowdown_celsius,
            ),
            (
                "DCGM_FI_DEV_NVSWITCH_TEMPERATURE_LIMIT_SHUTDOWN",
                "NVSwitch limit shutdown temperature.",
                |s| s.shutdown_celsius,
            ),
            (
                "DCGM_FI_DEV_NVSWITCH_FATAL_ERRORS",
                "NVSwitch fatal error information.",
                |s| Some(s.fatal_sxid.map_or(0.0, f64::from)),
            ),
            (
                "DCGM_FI_DEV_NVSWITCH_NON_FATAL_ERRORS",
                "NVSwitch non fatal error information.",
                |s| Some(s.non_fatal_sxid.map_or(0.0, f64::from)),
            ),
            (
                "DCGM_FI_DEV_NVSWITCH_RESET_REQUIRED",
                "NVSwitch reset required.",
                |s| s.reset_required.map(|b| if b { 1.0 } else { 0.0 }),
            ),
        ];
        for (name, help, value) in families {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for sw in switches {
                if let Some(v) = value(sw) {
                    let _ = writeln!(
                        out,
                        "{name}{{nvswitch=\"{}\",Hostname=\"{node}\"}} {}",
                        sw.switch,
                        v.round() as i64
                    );
                }
            }
        }
    }
    Some(out)
}

/// NMX-T's text for `rack`'s NVLink domain (see [`super::fabric`]); `None` for a rack
/// without NVLink switch trays.
pub fn render_nmxt(r: &Readings, rack: &str) -> Option<String> {
    let l = r.rack(rack)?.links.as_ref()?;
    Some(super::fabric::render_nmxt(l))
}

/// redfish_exporter's text for `rack`'s power controller: per power supply of each shelf
/// (a Redfish chassis), its health, capacity, output and state, families in name order
/// and labels sorted as client_golang writes them. `None` for a rack without shelves.
pub fn render_redfish(r: &Readings, rack: &str) -> Option<String> {
    let supplies = &r.rack(rack).filter(|x| !x.supplies.is_empty())?.supplies;
    let mut out = String::with_capacity(supplies.len() * 700);
    type Value = fn(&crate::telemetry::shelves::SupplyLine) -> Option<f64>;
    let families: [(&str, &str, Value); 4] = [
        (
            "redfish_chassis_power_powersupply_health",
            "powersupply health of chassis component,1(OK),2(Warning),3(Critical)",
            |s| s.health.map(f64::from),
        ),
        (
            "redfish_chassis_power_powersupply_power_capacity_watts",
            "power_capacity_watts of powersupply on this chassis",
            |s| Some(s.capacity_watts),
        ),
        (
            "redfish_chassis_power_powersupply_power_output_watts",
            "measured output power, in Watts, of powersupply on this chassis",
            |s| Some(s.output_watts),
        ),
        (
            "redfish_chassis_power_powersupply_state",
            "powersupply state of chassis component,1(Enabled),2(Disabled),3(StandbyOffinline),4(StandbySpare),5(InTest),6(Starting),7(Absent),8(UnavailableOffline),9(Deferring),10(Quiesced),11(Updating)",
            |s| Some(f64::from(s.state)),
        ),
    ];
    for (name, help, value) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for s in supplies {
            if let Some(v) = value(s) {
                let _ = writeln!(
                    out,
                    "{name}{{chassis_id=\"{}\",power_supply=\"PSU {}\",power_supply_id=\"{}\",resource=\"power_supply\"}} {v}",
                    s.shelf, s.supply, s.supply
                );
            }
        }
    }
    Some(out)
}

/// ipmi_exporter's text for `node`: DCMI power and the inlet temperature sensor. Node power
/// is its GPUs plus the host; inlet is its rack's.
pub fn render_ipmi(inv: &Inventory, r: &Readings, node: &str) -> Option<String> {
    inventory_node(inv, r, node)?;
    let reading = r.node(node)?;
    let watts = reading.power_watts?;
    let inlet = reading.inlet_celsius?;
    // A liquid-cooled tray's BMC adds its coolant sensors (names as the default
    // `[power_mapping]` reads them) and its leak detector's state.
    let coolant = reading.coolant;
    let mut out = String::with_capacity(1024);
    let mut family = |name: &str, help: &str, samples: &[(&str, String)]| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    family(
        "ipmi_dcmi_power_consumption_watts",
        "Current power consumption in Watts.",
        &[("", (watts.round() as i64).to_string())],
    );
    let mut temps = vec![(
        "{id=\"1\",name=\"Inlet Temp\"}",
        (inlet.round() as i64).to_string(),
    )];
    if let Some(c) = coolant {
        if let Some(v) = c.supply_celsius {
            temps.push(("{id=\"41\",name=\"Coolant Supply Temp\"}", go_float(v)));
        }
        if let Some(v) = c.return_celsius {
            temps.push(("{id=\"42\",name=\"Coolant Return Temp\"}", go_float(v)));
        }
    }
    family(
        "ipmi_temperature_celsius",
        "Temperature reading in degree Celsius.",
        &temps,
    );
    if let Some(c) = coolant {
        if let Some(v) = c.flow_lpm {
            family(
                "ipmi_sensor_value",
                "Generic data read from an IPMI sensor of unknown type, relying on labels for context.",
                &[("{id=\"43\",name=\"Coolant Flow\",type=\"Cooling Device\"}", go_float(v))],
            );
        }
        if let Some(l) = c.leak {
            let state = match l {
                app::model::LeakState::Ok => 0,
                app::model::LeakState::Warning => 1,
                app::model::LeakState::Critical => 2,
            };
            family(
                "ipmi_sensor_state",
                "Indicates the severity of the state reported by an IPMI sensor (0=nominal, 1=warning, 2=critical).",
                &[("{id=\"44\",name=\"Leak Detector\",type=\"Cooling Device\"}", state.to_string())],
            );
        }
    }
    family(
        "ipmi_up",
        "'1' if a scrape of the IPMI device was successful, '0' otherwise.",
        &[("{collector=\"dcmi\"}", "1".into())],
    );
    Some(out)
}

/// node_exporter's InfiniBand collector for `node`: per HCA port, data bytes received and
/// sent since boot (the simulator's counter split over 4 ports each way), printed as Go
/// prints floats.
pub fn render_node(inv: &Inventory, r: &Readings, node: &str) -> Option<String> {
    inventory_node(inv, r, node)?;
    let reading = r.node(node)?;
    let total = reading.ib_bytes_total?;
    // Eight whole shares that add up to the total (as exactly as f64 holds it).
    let share = (total / 8.0).floor();
    let extra = (total - 8.0 * share).max(0.0) as usize;
    let mut out = String::with_capacity(1024);
    for (k, (name, help)) in [
        (
            "node_infiniband_port_data_received_bytes_total",
            "Number of data octets received on all links",
        ),
        (
            "node_infiniband_port_data_transmitted_bytes_total",
            "Number of data octets transmitted on all links",
        ),
    ]
    .iter()
    .enumerate()
    {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for p in 0..4 {
            let v = share + if k * 4 + p < extra { 1.0 } else { 0.0 };
            let _ = writeln!(
                out,
                "{name}{{device=\"mlx5_{p}\",port=\"1\"}} {}",
                go_float(v)
            );
        }
    }
    // The simulator's flaky links are each node's first HCA port.
    let downs = reading.ib_link_downed_total.unwrap_or(0);
    let name = crate::telemetry::ingest::IB_LINK_DOWNED;
    let _ = writeln!(
        out,
        "# HELP {name} Number of times the link failed to recover from an error state and went down\n# TYPE {name} counter"
    );
    for p in 0..4 {
        let v = if p == 0 { downs } else { 0 };
        let _ = writeln!(out, "{name}{{device=\"mlx5_{p}\",port=\"1\"}} {v}");
    }
    Some(out)
}

/// A float as Go's `strconv.FormatFloat(v, 'g', -1, 64)` writes it, as Prometheus client
/// libraries in Go do: the shortest exact digits, in exponent form when the exponent is
/// under -4 or 6 and over (so large counters read `1.2345678e+12`).
fn go_float(v: f64) -> String {
    let e = format!("{v:e}");
    let Some((mantissa, exp)) = e.split_once('e') else {
        return e;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{v}")
    }
}

/// A node's total power as its BMC reports it; `None` when the node is down.
pub fn node_power_watts(r: &Readings, node: &str) -> Option<f64> {
    r.node(node)?.power_watts
}

#[cfg(test)]
mod tests;
