//! An NVL72 rack's NVLink switch trays as NVIDIA NMX-T (NMX Telemetry, on the rack's
//! switch trays; Prometheus text at `:9352/xcset/nvlink_domain_telemetry` from NMX-T
//! 1.2, `/metrics` before) reports the domain's ports: one series per port and counter,
//! every series carrying the port's identity as labels (`Node_GUID`, `Port_Number`,
//! `Device_ID`, `port_label`, `chassis_id`, `chassis_slot_index`, `tray_index`,
//! `device_num_on_tray`), its state (`logical_state`, `down_blame`) and its link partner
//! (`link_partner_description` = `<board>;<tray>:<model>/<asic>`, e.g.
//! `MF0;sw06:N5400_LD/U1`, and `link_partner_node_guid`).
//!
//! A GPU port's partner names the switch tray and ASIC it is cabled to, so each switch
//! tray's health is read from the compute side: how many GPU links reach it, how many are
//! active (`ACT`), which are not (by compute tray, GPU and port), and the link-down events
//! counted on them (`Link_Down`). A switch tray that died leaves its links not active or
//! missing, and every GPU of the domain loses the bandwidth of that tray's links.
//!
//! A link down whose partner the reading does not name (should NMX-T drop the partner of a
//! port that lost its link) still names its compute tray and GPU (`unpartnered_down`),
//! and a switch tray absent from a reading is counted against the layout's
//! `switch_trays`.
//!
//! Pure: text (or a PromQL store's series) in, [`Fabric`] out; bounded ([`MAX_PORTS`],
//! [`MAX_LISTED`]). The scrape path (`ingest`), the PromQL path and
//! `gantry inspect metrics` read through it.

use std::collections::BTreeMap;

use super::exposition;
use super::shelves::natural_cmp;

/// The series carrying each port's identity and state (its value is the port's LID).
pub const PORT_METRIC: &str = "lid";
/// Link-down events counted on a port.
pub const LINK_DOWN_METRIC: &str = "Link_Down";
/// A GPU's own ports: NMX-T's `Device_ID` of a Blackwell GPU (`GB100` in NVIDIA's live
/// GB200 capture). Ports of other devices (the switch ASICs' own) are counted, not mapped.
pub const GPU_DEVICE_PREFIX: &str = "GB";
/// The port state NMX-T gives an active link.
pub const ACTIVE: &str = "ACT";

/// At most this many ports are read from one reading (an NVL72 domain has 72 GPUs x 18
/// links = 1,296 GPU ports and as many switch ports); more are dropped and counted.
pub const MAX_PORTS: usize = 8192;
/// At most this many links not active are listed per switch tray (all are counted): every
/// link of an NVL72 switch tray (72 GPUs x its 2 ASICs).
pub const MAX_LISTED: usize = 144;

pub use app::model::{NvlinkFabric as Fabric, NvlinkPortDown as PortDown, SwitchTrayLinks};

/// One GPU port whose link is down, where a source knows the domain port by port (the
/// simulator, whose NMX-T text is written from it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct LinkDown {
    /// The compute tray's index, the GPU on it, the port (1-18).
    pub tray: u32,
    pub gpu: u32,
    pub port: u32,
    /// The far end (the switch) is blamed, not the GPU's.
    pub remote: bool,
}

/// One rack's NVLink ports port by port: its place (rack index), GPUs per compute tray,
/// the links down (sorted).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RackLinks {
    pub rack: usize,
    pub gpus_per_tray: u32,
    pub down: Vec<LinkDown>,
}

/// `<board>;<tray>:<model>/<asic>` -> (tray, asic).
pub fn partner_tray(desc: &str) -> Option<(&str, &str)> {
    let after = desc.split_once(';').map_or(desc, |(_, r)| r);
    let (tray, rest) = after.split_once(':')?;
    let asic = rest.rsplit_once('/').map_or("", |(_, a)| a);
    let tray = tray.trim();
    (!tray.is_empty()).then_some((tray, asic.trim()))
}

#[derive(Default)]
struct Port {
    gpu: bool,
    partner: Option<(String, String)>,
    /// Its `lid` line was read (a `Link_Down` alone places no link).
    seen: bool,
    down: Option<PortDown>,
    link_down: Option<f64>,
}

fn num(v: Option<&str>) -> Option<u32> {
    v.and_then(|s| s.trim().parse().ok())
}

/// Builds a [`Fabric`] from series pushed one at a time: the lines of an NMX-T text, or
/// what a PromQL store answers (its ports not active one by one, its active links counted
/// per switch ASIC).
#[derive(Default)]
pub struct FabricReader {
    ports: BTreeMap<(String, String), Port>,
    chassis: Vec<String>,
    /// Active GPU links counted without their ports, per partner (tray, asic); `None`:
    /// no partner this reader understands.
    counted: Vec<(Option<(String, String)>, u32)>,
    /// Link-down events summed per partner (tray, asic) without their ports.
    counted_events: Vec<((String, String), f64)>,
    /// Series past [`MAX_PORTS`], dropped.
    pub dropped: usize,
}

impl FabricReader {
    fn chassis(&mut self, c: Option<&str>) {
        if let Some(c) = c.filter(|c| !c.is_empty()) {
            if !self.chassis.iter().any(|x| x == c) && self.chassis.len() < 16 {
                self.chassis.push(c.to_string());
            }
        }
    }

    /// One series: a port's `lid` (`is_port`) or its `Link_Down` counter, its labels by
    /// name. A port's last `lid` decides its state.
    pub fn push<'a>(&mut self, is_port: bool, label: impl Fn(&str) -> Option<&'a str>, v: f64) {
        let (Some(guid), Some(port)) = (label("Node_GUID"), label("Port_Number")) else {
            return;
        };
        let key = (guid.to_string(), port.to_string());
        if !self.ports.contains_key(&key) && self.ports.len() >= MAX_PORTS {
            self.dropped += 1;
            return;
        }
        if is_port {
            self.chassis(label("chassis_id"));
        }
        let p = self.ports.entry(key).or_default();
        if !is_port {
            if v.is_finite() && v >= 0.0 {
                p.link_down = Some(v);
            }
            return;
        }
        p.gpu = label("Device_ID").is_some_and(|d| d.starts_with(GPU_DEVICE_PREFIX));
        p.partner = label("link_partner_description")
            .and_then(partner_tray)
            .map(|(t, a)| (t.to_string(), a.to_string()));
        let state = label("logical_state").unwrap_or("");
        p.down = (state != ACTIVE).then(|| PortDown {
            chassis_slot: num(label("chassis_slot_index")),
            tray_index: num(label("tray_index")),
            device: num(label("device_num_on_tray")),
            port_label: label("port_label").unwrap_or("").to_string(),
            state: if state.is_empty() { "not given" } else { state }.to_string(),
            down_blame: label("down_blame").map(str::to_string),
        });
        p.seen = true;
    }

    /// `n` active GPU links whose partner description is `partner` (a PromQL count of
    /// `lid` by `link_partner_description`), on chassis `chassis`.
    pub fn add_active(&mut self, partner: Option<&str>, chassis: Option<&str>, n: u32) {
        self.chassis(chassis);
        let p = partner
            .and_then(partner_tray)
            .map(|(t, a)| (t.to_string(), a.to_string()));
        self.counted.push((p, n));
    }

    /// `v` link-down events on the GPU links whose partner description is `partner` (a
    /// PromQL sum of `Link_Down` by `link_partner_description`).
    pub fn add_events(&mut self, partner: Option<&str>, v: f64) {
        if let Some((t, a)) = partner.and_then(partner_tray) {
            if v.is_finite() && v >= 0.0 {
                self.counted_events
                    .push(((t.to_string(), a.to_string()), v));
            }
        }
    }

    pub fn finish(self) -> Fabric {
        let mut f = Fabric {
            chassis_ids: self.chassis,
            ..Fabric::default()
        };
        let mut trays: BTreeMap<String, SwitchTrayLinks> = BTreeMap::new();
        fn tray<'m>(
            trays: &'m mut BTreeMap<String, SwitchTrayLinks>,
            name: &str,
            asic: &str,
        ) -> &'m mut SwitchTrayLinks {
            let t = trays
                .entry(name.to_string())
                .or_insert_with(|| SwitchTrayLinks {
                    tray: name.to_string(),
                    ..SwitchTrayLinks::default()
                });
            if !asic.is_empty() && !t.asics.iter().any(|a| a == asic) {
                t.asics.push(asic.to_string());
            }
            t
        }
        for (partner, n) in self.counted {
            f.gpu_ports += n;
            match partner {
                Some((name, asic)) => {
                    let t = tray(&mut trays, &name, &asic);
                    t.links += n;
                    t.active += n;
                }
                None => f.unpartnered_gpu_ports += n,
            }
        }
        for ((name, asic), v) in self.counted_events {
            let t = tray(&mut trays, &name, &asic);
            *t.link_down_events.get_or_insert(0.0) += v;
        }
        for p in self.ports.into_values() {
            if !p.seen {
                continue;
            }
            if !p.gpu {
                f.other_ports += 1;
                continue;
            }
            f.gpu_ports += 1;
            let Some((name, asic)) = p.partner else {
                f.unpartnered_gpu_ports += 1;
                if let Some(d) = p.down {
                    if f.unpartnered_down.len() < MAX_LISTED {
                        f.unpartnered_down.push(d);
                    }
                }
                continue;
            };
            let t = tray(&mut trays, &name, &asic);
            t.links += 1;
            if let Some(n) = p.link_down {
                *t.link_down_events.get_or_insert(0.0) += n;
            }
            match p.down {
                None => t.active += 1,
                Some(d) if t.not_active.len() < MAX_LISTED => t.not_active.push(d),
                Some(_) => {}
            }
        }
        f.switch_trays = trays.into_values().collect();
        let order = |d: &PortDown| (d.tray_index, d.device, d.port_label.clone());
        for t in &mut f.switch_trays {
            t.asics.sort_by(|a, b| natural_cmp(a, b));
            t.not_active.sort_by_key(order);
        }
        f.unpartnered_down.sort_by_key(order);
        f.switch_trays.sort_by(|a, b| natural_cmp(&a.tray, &b.tray));
        f
    }
}

/// Reads an NMX-T reading's ports into switch trays.
pub fn read(body: &[u8]) -> (Fabric, exposition::Report) {
    let mut r = FabricReader::default();
    let mut report = exposition::parse_classified(
        body,
        |name| match name {
            PORT_METRIC => Some(true),
            LINK_DOWN_METRIC => Some(false),
            _ => None,
        },
        |is_port, s| r.push(is_port, |k| s.label(k), s.value),
    );
    report.error_count += r.dropped;
    (r.finish(), report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVIDIA's live NMX-T `lid` line from a GB200 rack (published in
    /// NVIDIA/bare-metal-manager-core, `crates/health/src/collectors/nmxt.rs`), exactly as
    /// printed there: labels separated by ", ", two spaces before the value, a timestamp.
    const LIVE_LINE: &str = r#"lid{Device_ID="GB100", port_label="GPUP10", logical_state="ACT", device_num_on_tray="2", board_type="3", chassis_slot_index="27", tray_index="17", topology_id="128", chassis_id="1820325172739", Active_FEC="Int_KP4_FEC_PLR", link_partner_description="MF0;sw06:N5400_LD/U1", link_partner_node_guid="0x2c5eab0300b6a900", link_partner_port_num="71", cable_vendor="Other", down_blame="Unknown", local_reason_opcode="No_link_down_indication", Node_GUID="0xe1d04a69816f16bc", node_description="GB100 Nvidia Technologies", Port_Number="11", FW_Version="36.2014.1866", Cable_PN="NA", Cable_SN="NA", cable_type="850 nm VCSEL", cable_length="NA", cable_identifier="Backplane", vendor_rev="NA", cable_fw_version="N/A", Module_Temperature="0C", Status_Message="No issue was observed", port_guid="0xe1d04a69816f16c6", sw_serial_number="MT123", sw_revision="A1", remote_reason_opcode="4"}  3093 1781993954087"#;

    /// A port line in the live line's shape, with its own identity, state and partner.
    fn port(
        guid: &str,
        num: u32,
        dev: &str,
        state: &str,
        partner: &str,
        tray: u32,
        gpu: u32,
    ) -> String {
        format!(
            "lid{{Device_ID=\"{dev}\", port_label=\"GPUP{num}\", logical_state=\"{state}\", device_num_on_tray=\"{gpu}\", chassis_slot_index=\"{}\", tray_index=\"{tray}\", chassis_id=\"1820325172739\", link_partner_description=\"{partner}\", down_blame=\"Remote_phy\", Node_GUID=\"{guid}\", Port_Number=\"{num}\"}}  {} 1781993954087\n",
            tray + 10,
            3000 + num
        )
    }

    #[test]
    fn nvidias_live_line_reads_as_one_active_link_to_switch_tray_sw06() {
        let (f, report) = read(LIVE_LINE.as_bytes());
        assert_eq!(report.error_count, 0, "{report:?}");
        assert_eq!(report.samples, 1);
        assert_eq!(f.chassis_ids, ["1820325172739"]);
        assert_eq!(
            (f.gpu_ports, f.other_ports, f.unpartnered_gpu_ports),
            (1, 0, 0)
        );
        assert_eq!(f.switch_trays.len(), 1);
        let t = &f.switch_trays[0];
        assert_eq!(t.tray, "sw06");
        assert_eq!(t.asics, ["U1"]);
        assert_eq!((t.links, t.active, t.links_down()), (1, 1, 0));
        assert_eq!(t.link_down_events, None);
        assert!(f.trays_degraded().next().is_none());
    }

    #[test]
    fn links_not_active_are_counted_per_switch_tray_and_named_by_compute_tray_and_gpu() {
        let mut text = String::from("# HELP lid Port LID\n# TYPE lid gauge\n");
        // sw2 (both ASICs): four links, one down; sw10: two links, both up.
        text += &port("0xa", 1, "GB100", "ACT", "MF0;sw2:N5400_LD/U1", 0, 0);
        text += &port("0xa", 2, "GB100", "DOWN", "MF0;sw2:N5400_LD/U2", 0, 0);
        text += &port("0xb", 1, "GB100", "ACT", "MF0;sw2:N5400_LD/U1", 3, 1);
        text += &port("0xb", 2, "GB100", "ACT", "MF0;sw2:N5400_LD/U2", 3, 1);
        text += &port("0xa", 3, "GB100", "ACT", "MF0;sw10:N5400_LD/U1", 0, 0);
        text += &port("0xb", 3, "GB100", "ACT", "MF0;sw10:N5400_LD/U1", 3, 1);
        // A switch ASIC's own port: counted, not mapped.
        text += &port("0xs", 7, "N5400", "ACT", "MF0;tray3:GB100/GPU1", 0, 0);
        // A GPU port without a partner this reader understands.
        text += &port("0xc", 1, "GB100", "ACT", "unknown", 1, 0);
        text += "# TYPE Link_Down counter\n";
        text += "Link_Down{Node_GUID=\"0xa\", Port_Number=\"2\"} 3\n";
        text += "Link_Down{Node_GUID=\"0xa\", Port_Number=\"1\"} 1\n";
        // A counter for a port with no `lid` line: not a link anyone can place.
        text += "Link_Down{Node_GUID=\"0xz\", Port_Number=\"9\"} 5\n";
        let (f, report) = read(text.as_bytes());
        assert_eq!(report.error_count, 0, "{report:?}");
        assert_eq!(
            (f.gpu_ports, f.other_ports, f.unpartnered_gpu_ports),
            (7, 1, 1)
        );
        let names: Vec<&str> = f.switch_trays.iter().map(|t| t.tray.as_str()).collect();
        assert_eq!(names, ["sw2", "sw10"], "natural order");
        let sw2 = &f.switch_trays[0];
        assert_eq!(sw2.asics, ["U1", "U2"]);
        assert_eq!((sw2.links, sw2.active, sw2.links_down()), (4, 3, 1));
        assert_eq!(sw2.link_down_events, Some(4.0));
        assert_eq!(
            sw2.not_active,
            [PortDown {
                chassis_slot: Some(10),
                tray_index: Some(0),
                device: Some(0),
                port_label: "GPUP2".into(),
                state: "DOWN".into(),
                down_blame: Some("Remote_phy".into()),
            }]
        );
        let sw10 = &f.switch_trays[1];
        assert_eq!(
            (sw10.links, sw10.active, sw10.link_down_events),
            (2, 2, None)
        );
        let degraded: Vec<&str> = f.trays_degraded().map(|t| t.tray.as_str()).collect();
        assert_eq!(degraded, ["sw2"]);
    }

    #[test]
    fn the_partner_description_gives_tray_and_asic() {
        assert_eq!(partner_tray("MF0;sw06:N5400_LD/U1"), Some(("sw06", "U1")));
        assert_eq!(partner_tray("sw06:N5400_LD"), Some(("sw06", "")));
        assert_eq!(partner_tray("MF0;:N5400_LD/U1"), None);
        assert_eq!(partner_tray("no partner"), None);
    }

    #[test]
    fn ports_past_the_bound_are_dropped_and_counted_and_listing_is_bounded() {
        let mut text = String::new();
        for i in 0..(MAX_PORTS + 5) {
            text += &port(
                &format!("0x{i:x}"),
                1,
                "GB100",
                "DOWN",
                "MF0;sw1:N5400_LD/U1",
                0,
                0,
            );
        }
        let (f, report) = read(text.as_bytes());
        assert_eq!(report.error_count, 5);
        let t = &f.switch_trays[0];
        assert_eq!((t.links, t.active), (MAX_PORTS as u32, 0));
        assert_eq!(t.not_active.len(), MAX_LISTED);
    }
    #[test]
    fn a_link_down_without_a_partner_still_names_its_compute_tray_and_gpu() {
        let mut text = port("0xa", 1, "GB100", "ACT", "MF0;sw1:N5400_LD/U1", 2, 0);
        text += &port("0xa", 2, "GB100", "DOWN", "", 2, 0);
        let (f, report) = read(text.as_bytes());
        assert_eq!(report.error_count, 0, "{report:?}");
        assert_eq!((f.gpu_ports, f.unpartnered_gpu_ports), (2, 1));
        assert_eq!(f.unpartnered_down.len(), 1);
        let d = &f.unpartnered_down[0];
        assert_eq!(
            (d.tray_index, d.device, d.port_label.as_str()),
            (Some(2), Some(0), "GPUP2")
        );
        assert_eq!(f.switch_trays.len(), 1);
        assert_eq!((f.switch_trays[0].links, f.switch_trays[0].active), (1, 1));
    }

    #[test]
    fn a_promql_stores_counts_and_ports_down_read_as_the_text_does() {
        // The text: sw1 with three links (one down, with two link-down events), sw2 with one.
        let mut text = port("0xa", 1, "GB100", "ACT", "MF0;sw1:N5400_LD/U1", 0, 0);
        text += &port("0xa", 2, "GB100", "DOWN", "MF0;sw1:N5400_LD/U2", 0, 0);
        text += &port("0xb", 1, "GB100", "ACT", "MF0;sw1:N5400_LD/U1", 1, 0);
        text += &port("0xb", 3, "GB100", "ACT", "MF0;sw2:N5400_LD/U1", 1, 0);
        text += "Link_Down{Node_GUID=\"0xa\", Port_Number=\"2\"} 2\n";
        text += "Link_Down{Node_GUID=\"0xb\", Port_Number=\"1\"} 0\n";
        text += "Link_Down{Node_GUID=\"0xa\", Port_Number=\"1\"} 0\n";
        text += "Link_Down{Node_GUID=\"0xb\", Port_Number=\"3\"} 0\n";
        let (from_text, _) = read(text.as_bytes());
        // The store's answers: active links counted per ASIC, the port down as a series,
        // the events summed per ASIC.
        let mut r = FabricReader::default();
        r.add_active(Some("MF0;sw1:N5400_LD/U1"), Some("1820325172739"), 2);
        r.add_active(Some("MF0;sw2:N5400_LD/U1"), Some("1820325172739"), 1);
        let line = port("0xa", 2, "GB100", "DOWN", "MF0;sw1:N5400_LD/U2", 0, 0);
        exposition::parse_classified(
            line.as_bytes(),
            |n| (n == PORT_METRIC).then_some(()),
            |_, s| r.push(true, |k| s.label(k), s.value),
        );
        r.add_events(Some("MF0;sw1:N5400_LD/U1"), 0.0);
        r.add_events(Some("MF0;sw1:N5400_LD/U2"), 2.0);
        r.add_events(Some("MF0;sw2:N5400_LD/U1"), 0.0);
        assert_eq!(r.finish(), from_text);
    }
}
