use super::*;
use crate::sim::Sim;
use crate::telemetry::dcgm::decode;
use app::model::JobState;
use std::collections::HashMap;

const T0: i64 = 1_795_968_000_000;

#[test]
fn scraped_text_round_trips_to_the_simulators_readings() {
    let sim = Sim::new(64, 42, "t", T0);
    let r = sim.readings();
    let mut checked = 0;
    for node in &sim.inventory().nodes {
        let Some(text) = render_dcgm(sim.inventory(), &r, &node.name) else {
            continue;
        };
        let scrape = decode(text.as_bytes(), "unused");
        assert_eq!(scrape.line_errors, 0, "{:?}", scrape.errors);
        // The default set's fields Gantry has no use for, and nothing else.
        assert_eq!(
            scrape.ignored_metrics,
            [
                "DCGM_FI_DEV_DEC_UTIL",
                "DCGM_FI_DEV_ENC_UTIL",
                "DCGM_FI_DEV_FB_FREE",
                "DCGM_FI_DEV_FB_RESERVED",
                "DCGM_FI_DEV_MEM_CLOCK",
                "DCGM_FI_DEV_MEM_COPY_UTIL",
                "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
            ]
        );
        // 32 fields of 8 GPUs, and 6 of each of the node's 4 NVSwitches.
        assert_eq!(scrape.samples, 8 * 32 + 4 * 6);
        assert_eq!(scrape.gpus.len(), 8);
        for g in &scrape.gpus {
            let want = r
                .gpus
                .iter()
                .find(|x| x.node == node.name && x.index == g.gpu)
                .expect("gpu");
            let got = g.to_reading();
            assert_eq!(got.node, want.node);
            assert!(
                (got.power_watts.unwrap_or(-1.0) - want.power_watts.unwrap_or(0.0)).abs() < 1e-5
            );
            assert!(
                (got.sm_active_ratio.unwrap_or(-1.0) - want.sm_active_ratio.unwrap_or(0.0)).abs()
                    < 1e-5
            );
            assert_eq!(got.throttle, want.throttle);
            assert_eq!(got.ecc_dbe_total, want.ecc_dbe_total);
            assert_eq!(got.last_xid, want.last_xid);
            assert_eq!(got.nvlink_bytes_per_second, want.nvlink_bytes_per_second);
            assert_eq!(got.pcie_bytes_per_second, want.pcie_bytes_per_second);
            assert_eq!(got.temp_celsius, want.temp_celsius.map(f64::round));
            // Read as the simulator holds them (percent, ratios to 6 decimals, whole
            // millijoules and watts-as-printed): exactly.
            assert_eq!(got.memory_temp_celsius, want.memory_temp_celsius);
            assert_eq!(got.power_limit_watts, want.power_limit_watts);
            assert_eq!(got.gpu_util_percent, want.gpu_util_percent);
            assert_eq!(got.gr_engine_active_ratio, want.gr_engine_active_ratio);
            assert_eq!(got.tensor_active_ratio, want.tensor_active_ratio);
            assert_eq!(got.dram_active_ratio, want.dram_active_ratio);
            assert_eq!(got.energy_joules, want.energy_joules);
            assert_eq!(got.fb_used_mib, want.fb_used_mib);
            assert_eq!(got.ecc_sbe_total, Some(0));
            assert_eq!(got.pcie_replay_total, Some(0));
            assert!(g.no_data.is_empty(), "{:?}", g.no_data);
            assert_eq!(
                g.uuid.as_deref(),
                node.gpus.get(g.gpu as usize).map(|x| x.uuid.as_str())
            );
            checked += 1;
        }
    }
    // Every node answers but the down one (the drained one is up, just not scheduled).
    assert_eq!(checked, 63 * 8);
}

#[test]
fn running_jobs_label_their_gpus_and_unknown_nodes_are_none() {
    let sim = Sim::new(64, 42, "t", T0);
    let r = sim.readings();
    let job = r
        .jobs
        .iter()
        .find(|j| j.state == JobState::Running)
        .expect("a running job");
    let text = render_dcgm(sim.inventory(), &r, &job.nodes[0]).expect("text");
    let scrape = decode(text.as_bytes(), "x");
    assert!(scrape
        .gpus
        .iter()
        .all(|g| g.hpc_jobs == vec![job.id.to_string()]));
    assert_eq!(render_dcgm(sim.inventory(), &r, "nope"), None);
    assert_eq!(render_ipmi(sim.inventory(), &r, "nope"), None);
}

#[test]
fn infiniband_counters_are_served_as_node_exporter_writes_them() {
    let mut sim = Sim::new(64, 42, "t", T0);
    let r0 = sim.readings();
    sim.advance_to(T0 + 10_000);
    let r1 = sim.readings();
    let read = |r: &Readings, node: &str| -> Option<f64> {
        let text = render_node(sim.inventory(), r, node)?;
        let (ib, report) = crate::telemetry::ingest::read_ib(text.as_bytes());
        // Bytes each way on 4 ports, and each port's link-down count.
        assert_eq!((report.samples, report.error_count), (12, 0));
        assert_eq!(ib.link_downed_total, Some(0), "{node}");
        ib.bytes_total
    };
    let mut busy = 0;
    for n in &r1.nodes {
        let node = &n.name;
        let (Some(a), Some(b)) = (read(&r0, node), read(&r1, node)) else {
            // Only the node that is off has no exporter.
            assert_eq!(n.ib_bytes_total, None, "{node}");
            continue;
        };
        // The eight counters add up to the simulator's (to f64's precision), and over
        // 10 s they rose at the rate it reports.
        let total = n.ib_bytes_total.unwrap_or(-1.0);
        assert!((b - total).abs() <= total * 1e-12, "{node}: {b} vs {total}");
        let rate = n.ib_bytes_per_second.unwrap_or(-1.0);
        assert!(((b - a) / 10.0 - rate).abs() <= rate * 1e-3 + 1.0, "{node}");
        if rate > 1e9 {
            busy += 1;
        }
    }
    assert!(busy > 0, "multi-node jobs move data over InfiniBand");
    assert_eq!(render_node(sim.inventory(), &r1, "nope"), None);
}

#[test]
fn floats_print_as_go_prints_them() {
    assert_eq!(go_float(1_234_567.0), "1.234567e+06");
    assert_eq!(go_float(5.4e15), "5.4e+15");
    assert_eq!(go_float(123_456.0), "123456");
    assert_eq!(go_float(0.5), "0.5");
    assert_eq!(go_float(0.00001), "1e-05");
    assert_eq!(go_float(0.0), "0");
}

#[test]
fn node_power_over_bmc_sums_to_the_rack_truth() {
    let sim = Sim::new(64, 42, "t", T0);
    let r = sim.readings();
    let truth = sim.truth();
    let racks: HashMap<&str, &str> = sim
        .inventory()
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.rack.as_str()))
        .collect();
    let mut per_rack: HashMap<&str, f64> = HashMap::new();
    for n in &sim.inventory().nodes {
        if let Some(text) = render_ipmi(sim.inventory(), &r, &n.name) {
            let mut watts = None;
            crate::telemetry::exposition::parse(text.as_bytes(), |s| {
                if s.name == "ipmi_dcmi_power_consumption_watts" {
                    watts = Some(s.value);
                }
            });
            *per_rack.entry(racks[n.name.as_str()]).or_default() += watts.expect("power");
        }
    }
    for tr in &truth.racks {
        // BMCs report whole watts: within half a watt per node.
        assert!(
            (per_rack[tr.name.as_str()] - tr.power_watts).abs() <= 4.0,
            "{}",
            tr.name
        );
    }
}

#[test]
fn a_liquid_trays_coolant_and_leak_round_trip_through_the_bmc_mapping() {
    let mut sim = Sim::with_profile(crate::sim::Profile::Nvl72, 144, 42, "t", T0);
    let sc = sim.coolant_scenario().cloned().expect("scenario");
    sim.advance_to(sc.leak_critical_ms + 1_000);
    let r = sim.readings();
    let mapping = crate::telemetry::ingest::PowerMapping::default();
    let mut seen = 0;
    for (i, n) in sim.inventory().nodes.iter().enumerate() {
        let Some(text) = render_ipmi(sim.inventory(), &r, &n.name) else {
            continue;
        };
        let b = crate::telemetry::ingest::read_bmc(text.as_bytes(), &mapping);
        assert_eq!(b.report.error_count, 0, "{text}");
        assert_eq!(Some(b.coolant), r.nodes[i].coolant, "{}", n.name);
        seen += 1;
    }
    assert!(seen > 100);
    let leak = &sim.inventory().nodes[sc.leak_trays[0]].name;
    let b = crate::telemetry::ingest::read_bmc(
        render_ipmi(sim.inventory(), &r, leak)
            .expect("text")
            .as_bytes(),
        &mapping,
    );
    assert_eq!(b.coolant.leak, Some(app::model::LeakState::Critical));
}

#[test]
fn dcgm_identity_labels_map_the_racks_and_name_exactly_the_misplaced_trays() {
    // 8 NVL72 racks: the profile plants a swap inside rack A04 and one between A07 and
    // A08. Scraped text -> places -> the map, against the simulator's truth.
    let sim = Sim::with_profile(crate::sim::Profile::Nvl72, 144, 42, "t", T0);
    let r = sim.readings();
    let inv = sim.inventory();
    let mut scraped = Vec::new();
    for n in &inv.nodes {
        let Some(text) = render_dcgm(inv, &r, &n.name) else {
            continue;
        };
        let s = decode(text.as_bytes(), "unused");
        assert_eq!(s.line_errors, 0, "{:?}", s.errors);
        let places: Vec<_> = s.gpus.iter().filter_map(|g| g.place.clone()).collect();
        assert_eq!(places.len(), 4, "{}", n.name);
        scraped.push((n.name.clone(), places));
    }
    assert!(scraped.len() > 130, "{}", scraped.len());
    let refs: Vec<(&str, &[crate::cluster::placement::GpuPlace])> = scraped
        .iter()
        .map(|(n, p)| (n.as_str(), p.as_slice()))
        .collect();
    let map = crate::cluster::placement::compare(inv, &refs);
    let truth = sim.truth();
    assert_eq!(truth.misplaced.len(), 4);
    let named: Vec<&str> = map
        .issues
        .iter()
        .filter_map(|i| i.node.as_deref())
        .collect();
    let reporting: Vec<&str> = truth
        .misplaced
        .iter()
        .map(String::as_str)
        .filter(|m| scraped.iter().any(|(n, _)| n == m))
        .collect();
    assert_eq!(named, reporting, "{:#?}", map.issues);
    // Every chassis maps to its own rack, and the rack's serial is the profile's.
    assert_eq!(map.chassis.len(), 8);
    for (i, c) in map.chassis.iter().enumerate() {
        assert_eq!(c.rack.as_deref(), Some(inv.racks[i].name.as_str()));
        assert_eq!(c.serial, crate::sim::model::nvl72_chassis_serial(i));
    }
    // The HGX profile's exporters print no identity: no map, no issue.
    let hgx = Sim::new(16, 42, "t", T0);
    let r = hgx.readings();
    let text = render_dcgm(hgx.inventory(), &r, &hgx.inventory().nodes[0].name).expect("text");
    assert!(!text.contains("DCGM_FI_DEV_PLATFORM"));
    assert!(hgx.truth().misplaced.is_empty());
}

#[test]
fn power_shelves_are_served_as_redfish_exporter_writes_them_and_read_back_the_same() {
    let mut sim = Sim::with_profile(crate::sim::Profile::Nvl72, 144, 42, "t", T0);
    sim.advance_to(T0 + 9 * 60_000);
    let r = sim.readings();
    let names = crate::telemetry::shelves::ShelfNames::default();
    let draw = crate::aggregate::rack_nodes(sim.inventory(), &r);
    assert!(r.racks.iter().all(|x| !x.supplies.is_empty()));
    assert_eq!(r.racks.len(), sim.inventory().racks.len());
    for (rr, draw) in r.racks.iter().zip(&draw) {
        let text = render_redfish(&r, &rr.rack).expect("every NVL72 rack has shelves");
        let (shelves, report) = crate::telemetry::shelves::read(text.as_bytes(), &names);
        assert_eq!(report.error_count, 0, "{}", rr.rack);
        // Every supply's four readings, but for the absent one's health.
        assert_eq!(report.samples, 4 * 48 - usize::from(rr.rack == "A02"));
        assert_eq!(shelves, rr.shelves, "{}", rr.rack);
        // The shelves deliver what the rack's nodes draw.
        let out: f64 = shelves.iter().filter_map(|s| s.output_watts).sum();
        let draw = draw.power_watts.unwrap_or(0.0);
        assert!((out - draw).abs() <= 48.0, "{}: {out} vs {draw}", rr.rack);
    }
    assert_eq!(render_redfish(&r, "nope"), None);
    let hgx = Sim::new(16, 42, "t", T0);
    assert_eq!(render_redfish(&hgx.readings(), "A01"), None);
}

#[test]
fn nvswitches_are_served_as_dcgm_exporter_writes_them_and_read_back_the_same() {
    let mut sim = Sim::new(64, 42, "t", T0);
    sim.advance_to(T0 + 3 * 3_600_000 + 1000);
    let r = sim.readings();
    let mut fatal = Vec::new();
    for n in &r.nodes {
        let node = &n.name;
        let Some(text) = render_dcgm(sim.inventory(), &r, node) else {
            assert!(n.switches.is_empty(), "{node} is off");
            continue;
        };
        let scrape = crate::telemetry::dcgm::decode(text.as_bytes(), "target");
        assert_eq!(scrape.line_errors, 0);
        let read: Vec<app::model::SwitchReading> =
            scrape.switches.iter().map(|s| s.to_reading()).collect();
        assert_eq!(read, n.switches, "{node}");
        assert!(scrape.switches.iter().all(|s| &s.host == node));
        fatal.extend(
            read.iter()
                .filter_map(|s| s.fatal_sxid.map(|x| (node.clone(), s.switch, x))),
        );
    }
    assert_eq!(fatal, sim.truth_with(&r).nvswitch_fatal);
    assert_eq!(fatal.len(), 1);
}
