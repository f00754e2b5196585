//! The NVL72 profile's NVLink fabric as NVIDIA NMX-T reports it (see
//! [`crate::telemetry::nvlink_fabric`]): every GPU's 18 NVLink ports, each cabled through the rack's
//! backplane to one ASIC of one of the nine switch trays (port `p` to tray `ceil(p/2)`,
//! ASIC U1 for odd `p` and U2 for even, which fits NVIDIA's one published live line: port
//! 11 to `sw06`, `U1`).
//!
//! Two faults: from the start, one GPU link of one rack is down with its own end blamed;
//! some minutes in, a whole switch tray of another rack goes down, and with it every link
//! cabled to it (72 GPUs x 2 ASICs). The exporter's text and the direct reading come from
//! the same [`RackLinks`], and a test reads the text back to the direct reading.

use std::fmt::Write as _;

use app::model::UnixMs;

use super::model::{nvl72_chassis_serial, nvl72_u, NVL72_TRAYS};
use super::Sim;
use crate::telemetry::nvlink_fabric::{Fabric, PortDown, SwitchTrayLinks, ACTIVE, MAX_LISTED};

/// NVLink ports per Blackwell GPU, and switch ASICs per switch tray.
pub const PORTS_PER_GPU: u32 = 18;
pub const ASICS_PER_TRAY: u32 = 2;
/// The state NMX-T gives a port whose link is down, as the simulator prints it.
pub const DOWN: &str = "DOWN";

/// The NVL72 profile's fabric faults, by rack index (where the rack physically is: its
/// chassis serial) and tray index among the compute trays.
#[derive(Clone, Debug)]
pub struct FabricScenario {
    /// One GPU link down from the start: (rack, tray, GPU, port 1-18).
    pub link: (usize, u32, u32, u32),
    /// A whole switch tray (1-9) of a rack down from `tray_down_from_ms`.
    pub tray_rack: usize,
    pub switch_tray: u32,
    pub tray_down_from_ms: UnixMs,
}

/// Port `p`'s switch tray (1-9) and ASIC (1-2).
pub fn port_partner(p: u32) -> (u32, u32) {
    (p.div_ceil(2), 2 - p % 2)
}

/// A switch tray's name, as a partner description gives it.
pub fn switch_tray_name(t: u32) -> String {
    format!("sw{t:02}")
}

pub use crate::telemetry::nvlink_fabric::{LinkDown, RackLinks};

fn down_at(l: &RackLinks, tray: u32, gpu: u32, port: u32) -> Option<&LinkDown> {
    l.down
        .binary_search_by(|d| (d.tray, d.gpu, d.port).cmp(&(tray, gpu, port)))
        .ok()
        .map(|i| &l.down[i])
}

fn port_down(d: &LinkDown) -> PortDown {
    PortDown {
        chassis_slot: Some(nvl72_u(d.tray as usize) - 1),
        tray_index: Some(d.tray),
        device: Some(d.gpu),
        port_label: format!("GPUP{}", d.port - 1),
        state: DOWN.into(),
        down_blame: Some(if d.remote { "Remote_phy" } else { "Local_phy" }.into()),
    }
}

/// The fabric as a reading of [`render_nmxt`]'s text gives it.
pub fn fabric_of(l: &RackLinks) -> Fabric {
    let per_asic = NVL72_TRAYS as u32 * l.gpus_per_tray;
    let switch_trays = (1..=super::model::NVL72_SWITCH_TRAYS)
        .map(|s| {
            let mut not_active: Vec<PortDown> = l
                .down
                .iter()
                .filter(|d| port_partner(d.port).0 == s)
                .map(port_down)
                .collect();
            let down = not_active.len() as u32;
            not_active.sort_by_key(|d| (d.tray_index, d.device, d.port_label.clone()));
            not_active.truncate(MAX_LISTED);
            let links = per_asic * ASICS_PER_TRAY;
            SwitchTrayLinks {
                tray: switch_tray_name(s),
                asics: vec!["U1".into(), "U2".into()],
                links,
                active: links - down,
                link_down_events: Some(f64::from(down)),
                not_active,
            }
        })
        .collect();
    Fabric {
        chassis_ids: vec![nvl72_chassis_serial(l.rack)],
        gpu_ports: per_asic * ASICS_PER_TRAY * super::model::NVL72_SWITCH_TRAYS,
        other_ports: 0,
        unpartnered_gpu_ports: 0,
        unpartnered_down: Vec::new(),
        switch_trays,
    }
}

/// A GPU's NVLink node GUID.
fn guid(rack: usize, tray: u32, gpu: u32) -> String {
    format!(
        "0xe1d04a69{:08x}",
        (rack as u64 * NVL72_TRAYS as u64 + u64::from(tray)) * 8 + u64::from(gpu)
    )
}

/// NMX-T's text for one rack's domain: a `lid` series per GPU port, with the labels NVIDIA's
/// live line carries that say where the port is, its state and its partner (separated by
/// ", " as in that line), then each port's `Link_Down` counter (one event per link down).
/// Switch ASICs' own ports are not printed.
pub fn render_nmxt(l: &RackLinks) -> String {
    let serial = nvl72_chassis_serial(l.rack);
    let ports = NVL72_TRAYS * l.gpus_per_tray as usize * PORTS_PER_GPU as usize;
    let mut out = String::with_capacity(ports * 330);
    out.push_str("# HELP lid Port LID\n# TYPE lid gauge\n");
    let mut lid = 3000u32;
    for t in 0..NVL72_TRAYS as u32 {
        let slot = nvl72_u(t as usize) - 1;
        for g in 0..l.gpus_per_tray {
            let id = guid(l.rack, t, g);
            for p in 1..=PORTS_PER_GPU {
                let (sw, asic) = port_partner(p);
                let down = down_at(l, t, g, p);
                let (state, blame) = match down {
                    None => (ACTIVE, "Unknown"),
                    Some(d) if d.remote => (DOWN, "Remote_phy"),
                    Some(_) => (DOWN, "Local_phy"),
                };
                lid += 1;
                let _ = writeln!(
                    out,
                    "lid{{Device_ID=\"GB100\", port_label=\"GPUP{}\", logical_state=\"{state}\", device_num_on_tray=\"{g}\", chassis_slot_index=\"{slot}\", tray_index=\"{t}\", chassis_id=\"{serial}\", link_partner_description=\"MF0;{}:N5400_LD/U{asic}\", down_blame=\"{blame}\", Node_GUID=\"{id}\", Port_Number=\"{p}\"}}  {lid}",
                    p - 1,
                    switch_tray_name(sw),
                );
            }
        }
    }
    out.push_str("# HELP Link_Down Link down events\n# TYPE Link_Down counter\n");
    for t in 0..NVL72_TRAYS as u32 {
        for g in 0..l.gpus_per_tray {
            let id = guid(l.rack, t, g);
            for p in 1..=PORTS_PER_GPU {
                let n = u32::from(down_at(l, t, g, p).is_some());
                let _ = writeln!(
                    out,
                    "Link_Down{{Node_GUID=\"{id}\", Port_Number=\"{p}\"}} {n}"
                );
            }
        }
    }
    out
}

impl Sim {
    /// Rack `rack`'s NVLink ports at `t` (`None`: no NVLink switch trays watched there).
    pub(super) fn rack_links(&self, rack: usize, t: UnixMs) -> Option<RackLinks> {
        let sc = self.fabric.as_ref()?;
        self.inv.racks.get(rack)?.switch_trays?;
        let gpus = self.gpn as u32;
        let mut down = Vec::new();
        let (lr, lt, lg, lp) = sc.link;
        if lr == rack {
            down.push(LinkDown {
                tray: lt,
                gpu: lg,
                port: lp,
                remote: false,
            });
        }
        if sc.tray_rack == rack && t >= sc.tray_down_from_ms {
            for tray in 0..NVL72_TRAYS as u32 {
                for gpu in 0..gpus {
                    for port in 1..=PORTS_PER_GPU {
                        if port_partner(port).0 == sc.switch_tray {
                            down.push(LinkDown {
                                tray,
                                gpu,
                                port,
                                remote: true,
                            });
                        }
                    }
                }
            }
        }
        down.sort();
        down.dedup_by(|a, b| (a.tray, a.gpu, a.port) == (b.tray, b.gpu, b.port));
        Some(RackLinks {
            rack,
            gpus_per_tray: gpus,
            down,
        })
    }

    /// The NVL72 profile's fabric faults, if any.
    pub fn fabric_scenario(&self) -> Option<&FabricScenario> {
        self.fabric.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_pair_up_on_the_nine_switch_trays_as_the_live_line_shows() {
        assert_eq!(
            port_partner(11),
            (6, 1),
            "NVIDIA's live line: port 11 to sw06/U1"
        );
        assert_eq!(port_partner(1), (1, 1));
        assert_eq!(port_partner(2), (1, 2));
        assert_eq!(port_partner(18), (9, 2));
    }

    #[test]
    fn the_nmxt_text_reads_back_to_the_direct_reading() {
        let mut down = vec![LinkDown {
            tray: 3,
            gpu: 1,
            port: 7,
            remote: false,
        }];
        for tray in 0..NVL72_TRAYS as u32 {
            for gpu in 0..4 {
                down.extend([9, 10].map(|port| LinkDown {
                    tray,
                    gpu,
                    port,
                    remote: true,
                }));
            }
        }
        down.sort();
        let l = RackLinks {
            rack: 2,
            gpus_per_tray: 4,
            down,
        };
        let text = render_nmxt(&l);
        let (read, report) = crate::telemetry::nvlink_fabric::read(text.as_bytes());
        assert_eq!(report.error_count, 0, "{report:?}");
        assert_eq!(read, fabric_of(&l));
        let sw5 = &read.switch_trays[4];
        assert_eq!((sw5.tray.as_str(), sw5.links, sw5.active), ("sw05", 144, 0));
        assert!(sw5.is_down());
        assert_eq!(
            sw5.not_active.len(),
            144,
            "every link of a dead tray listed"
        );
        let sw4 = &read.switch_trays[3];
        assert_eq!((sw4.links, sw4.active), (144, 143));
        assert_eq!(sw4.not_active[0].tray_index, Some(3));
        assert_eq!(sw4.not_active[0].down_blame.as_deref(), Some("Local_phy"));
        // A rack of 72 GPUs prints 1,296 ports in about half a megabyte.
        assert!(text.len() < 600_000, "{}", text.len());
    }
}
