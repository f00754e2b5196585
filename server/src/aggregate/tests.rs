use super::*;
use crate::sim::Sim;

const T0: i64 = 1_795_968_000_000; // 2026-11-29 16:00:00 UTC

#[test]
fn jobs_over_more_leaves_or_blocks_than_they_need_are_fragmented() {
    let sim = Sim::new(64, 42, "t", T0);
    let mut r = sim.readings();
    let job = |id: u64, nodes: &[u32]| app::model::Job {
        id,
        name: format!("job{id}"),
        user: "u".into(),
        account: "a".into(),
        partition: "p".into(),
        state: JobState::Running,
        nodes: nodes.iter().map(|n| format!("gpu{n:03}")).collect(),
        gpus: 8 * nodes.len() as u32,
        submit_ms: T0,
        start_ms: Some(T0),
        end_ms: None,
    };
    // Eight nodes over leaves 1, 2 and 3 and blocks 1 and 2 (one leaf and one block
    // would do); eight nodes filling leaf 2 exactly.
    r.jobs = vec![
        job(1, &[1, 2, 3, 4, 5, 6, 9, 17]),
        job(2, &[9, 10, 11, 12, 13, 14, 15, 16]),
    ];
    let ov = overview(sim.inventory(), &r, 1, 1000, T0);
    let got: Vec<(u64, DomainKind, u32, u32)> = ov
        .fragmented
        .iter()
        .map(|f| (f.id, f.kind, f.used, f.min))
        .collect();
    assert_eq!(
        got,
        vec![(1, DomainKind::Leaf, 3, 1), (1, DomainKind::Block, 2, 1)]
    );
}

#[test]
fn trays_cut_without_a_node_follow_the_nodes_in_tray_order() {
    use app::model::{NvlinkFabric, NvlinkPortDown, SwitchTrayLinks};
    let sim = Sim::new(64, 42, "t", T0);
    let mut inv = sim.inventory().clone();
    inv.racks[0].switch_trays = Some(9);
    let rack = inv.racks[0].name.clone();
    let mut in_rack: Vec<&app::model::Node> = inv.nodes.iter().filter(|n| n.rack == rack).collect();
    in_rack.sort_by_key(|n| n.u_position);
    let nodes: Vec<String> = in_rack.iter().map(|n| n.name.clone()).collect();
    let n = nodes.len() as u32;
    // Trays past the layout's nodes, given out of order, and the first node's.
    let down = |t: u32| NvlinkPortDown {
        tray_index: Some(t),
        device: Some(0),
        port_label: "GPUP0".into(),
        state: "DOWN".into(),
        ..NvlinkPortDown::default()
    };
    let mut r = sim.readings();
    r.racks.push(crate::telemetry::RackReadings {
        rack: rack.clone(),
        ..Default::default()
    });
    r.racks[0].fabric = Some(NvlinkFabric {
        switch_trays: vec![SwitchTrayLinks {
            tray: "sw01".into(),
            links: 144,
            active: 140,
            not_active: vec![down(n + 10), down(n), down(0), down(n + 2)],
            ..SwitchTrayLinks::default()
        }],
        ..NvlinkFabric::default()
    });
    let tiles = fabric_tiles(&inv, &r);
    let cut = &tiles[0].as_ref().expect("a tile").cut;
    assert_eq!(
        cut,
        &[
            nodes[0].clone(),
            format!("tray {n}"),
            format!("tray {}", n + 2),
            format!("tray {}", n + 10),
        ]
    );
}

#[test]
fn a_domains_infiniband_traffic_is_its_nodes_summed() {
    let sim = Sim::new(64, 42, "t", T0);
    let r = sim.readings();
    let ov = overview(sim.inventory(), &r, 1, 1000, T0);
    let rate: HashMap<&str, Option<f64>> = r
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.ib_bytes_per_second))
        .collect();
    let mut busy = 0;
    for d in sim
        .inventory()
        .domains
        .iter()
        .filter(|d| d.kind == DomainKind::Leaf)
    {
        let sum: f64 = d.nodes.iter().filter_map(|n| rate[n.as_str()]).sum();
        let tile = ov.domains.iter().find(|t| t.name == d.name).expect("tile");
        assert_eq!(
            tile.ib_bytes_per_second,
            Some(round_sig2(sum)),
            "{}",
            d.name
        );
        if sum > 1e9 {
            busy += 1;
        }
    }
    assert!(busy > 0);
    // Without node_exporter: nothing, not zero.
    let mut none = r.clone();
    for n in &mut none.nodes {
        n.ib_bytes_per_second = None;
    }
    let ov = overview(sim.inventory(), &none, 1, 1000, T0);
    assert!(ov.domains.iter().all(|d| d.ib_bytes_per_second.is_none()));
}

#[test]
fn overview_equals_the_simulators_truth() {
    let sim = Sim::new(64, 42, "t", T0);
    let ov = overview(sim.inventory(), &sim.readings(), 1, 1000, T0);
    let truth = sim.truth();
    assert_eq!(ov.summary.gpus, truth.gpus);
    assert_eq!(ov.summary.gpus_throttling, truth.gpus_throttling);
    assert_eq!(ov.summary.jobs_running, truth.jobs_running);
    assert_eq!(ov.summary.jobs_pending, truth.jobs_pending);
    assert!((ov.summary.power_watts - truth.power_watts).abs() < 1e-6);
    for (tile, tr) in ov.racks.iter().zip(&truth.racks) {
        assert_eq!(tile.name, tr.name);
        assert!((tile.power_watts.unwrap_or(-1.0) - tr.power_watts).abs() < 1e-6);
        assert_eq!(tile.gpus_throttling, tr.gpus_throttling);
    }
    let g = ov.summary.gpus;
    assert_eq!(g.allocated + g.idle + g.drained + g.down, g.total);
}

#[test]
fn domains_nodes_and_throttling_equal_the_truth() {
    // Warm hours: the weak rack throttles.
    let sim = Sim::new(64, 42, "t", T0 - 2 * 3_600_000 + 3_600_000 * 24);
    let r = sim.readings();
    let ov = overview(sim.inventory(), &r, 1, 1000, T0);
    let truth = sim.truth();
    assert_eq!(ov.domains.len(), truth.domains.len());
    for (d, t) in ov.domains.iter().zip(&truth.domains) {
        assert_eq!(
            (d.name.as_str(), d.gpus.allocated),
            (t.name.as_str(), t.gpus_allocated)
        );
    }
    let spine = ov
        .domains
        .iter()
        .find(|d| d.name == "spine01")
        .expect("spine");
    assert_eq!(spine.nodes, 32);
    // NVLink traffic of a leaf: its GPUs' readings summed, to 1 GB/s.
    let leaf = &sim
        .inventory()
        .domains
        .iter()
        .find(|d| d.name == "leaf01")
        .expect("leaf");
    let want: f64 = r
        .gpus
        .iter()
        .filter(|g| leaf.nodes.contains(&g.node))
        .filter_map(|g| g.nvlink_bytes_per_second)
        .sum();
    let tile = ov
        .domains
        .iter()
        .find(|d| d.name == "leaf01")
        .expect("leaf tile");
    assert_eq!(tile.nvlink_bytes_per_second, Some(round_sig2(want)));
    assert_eq!(round_sig2(6_437e9), 6_400e9);
    assert_eq!(round_sig2(0.4e9), 0.0);
    assert_eq!(round_sig2(0.0), 0.0);
    assert!(want > 0.0, "the simulator's busy GPUs use NVLink");
    assert_eq!(ov.nodes.len(), 64);
    let per_node: u32 = ov.nodes.iter().map(|n| n.gpus_throttling).sum();
    assert_eq!(per_node, truth.gpus_throttling);
    let by_job: u32 = ov.thermal.by_job.iter().map(|j| j.gpus_throttling).sum();
    assert!(by_job <= truth.gpus_throttling);
    // Every reason count is at most the throttled total, and some reason explains each.
    assert!(ov
        .thermal
        .by_reason
        .iter()
        .all(|c| c.gpus <= truth.gpus_throttling));
    if truth.gpus_throttling > 0 {
        assert!(ov.thermal.by_reason.iter().any(|c| c.gpus > 0));
    }
    // Node power is the BMC's, to the floor's display precision (0.1 kW).
    let p = ov.nodes[0].power_watts.expect("power");
    assert_eq!(p % 100.0, 0.0);
}

#[test]
fn hysteresis_holds_noise_and_passes_changes() {
    let sim = Sim::new(16, 42, "t", T0);
    let r = sim.readings();
    let prev = overview(sim.inventory(), &r, 1, 1000, T0);
    let mut next = prev.clone();
    next.nodes[0].power_watts = next.nodes[0].power_watts.map(|p| p + 100.0);
    next.nodes[1].power_watts = next.nodes[1].power_watts.map(|p| p + 300.0);
    next.racks[0].power_watts = next.racks[0].power_watts.map(|p| p + 150.0);
    // A whole-degree inlet sensor flipping to its neighbour, and one that really moved.
    next.racks[0].inlet_celsius = next.racks[0].inlet_celsius.map(|t| t + 1.0);
    next.racks[1].inlet_celsius = next.racks[1].inlet_celsius.map(|t| t + 2.0);
    steady(&prev, &mut next);
    assert_eq!(next.racks[0].inlet_celsius, prev.racks[0].inlet_celsius);
    assert_eq!(
        next.racks[1].inlet_celsius,
        prev.racks[1].inlet_celsius.map(|t| t + 2.0)
    );
    assert_eq!(
        next.nodes[0].power_watts, prev.nodes[0].power_watts,
        "one step of noise held"
    );
    assert_eq!(
        next.nodes[1].power_watts,
        prev.nodes[1].power_watts.map(|p| p + 300.0)
    );
    assert_eq!(next.racks[0].power_watts, prev.racks[0].power_watts);
    assert_eq!(prev.diff(&next).nodes.len(), 1);
    assert_eq!(prev.diff(&next).racks.len(), 1, "only the rack that moved");
}

#[test]
fn a_rack_with_a_silent_node_says_its_power_is_incomplete() {
    let sim = Sim::new(64, 42, "t", T0);
    let mut r = sim.readings();
    let ov = overview(sim.inventory(), &r, 1, 1000, T0);
    assert!(
        ov.racks.iter().all(|t| t.nodes_not_reporting == 0),
        "the down node is not 'not reporting'"
    );
    let i = r
        .nodes
        .iter()
        .position(|n| n.name == "gpu002")
        .expect("node");
    r.nodes[i].power_watts = None;
    let ov = overview(sim.inventory(), &r, 1, 1000, T0);
    assert_eq!(ov.racks[0].nodes_not_reporting, 1);
    assert_eq!(ov.racks[1].nodes_not_reporting, 0);
}

#[test]
fn missing_readings_stay_missing() {
    let sim = Sim::new(16, 1, "t", T0);
    let mut r = sim.readings();
    for g in &mut r.gpus {
        g.sm_active_ratio = None;
    }
    let rack0 = &sim.inventory().racks[0].name;
    let in_rack0: Vec<&str> = sim
        .inventory()
        .nodes
        .iter()
        .filter(|n| &n.rack == rack0)
        .map(|n| n.name.as_str())
        .collect();
    for n in r
        .nodes
        .iter_mut()
        .filter(|n| in_rack0.contains(&n.name.as_str()))
    {
        n.power_watts = None;
    }
    let ov = overview(sim.inventory(), &r, 1, 1000, T0);
    assert_eq!(ov.summary.sm_active_mean, None);
    // Without its nodes' BMC readings the rack falls back to the sum of its GPUs' power.
    let gpu_sum: f64 = r
        .gpus
        .iter()
        .filter(|g| in_rack0.contains(&g.node.as_str()))
        .filter_map(|g| g.power_watts)
        .sum();
    assert!((ov.racks[0].power_watts.unwrap_or(0.0) - gpu_sum).abs() < 1e-6);
}

fn shelf(name: &str, working: u32, warning: u32, cap: Option<f64>) -> app::model::ShelfReading {
    app::model::ShelfReading {
        shelf: name.into(),
        supplies: 6,
        working,
        warning,
        capacity_watts: cap,
        output_watts: None,
    }
}

#[test]
fn a_shelf_down_lowers_the_limit_by_the_reserve_rule() {
    let mut rack = crate::sim::layout_nvl72(18, "t").racks.remove(0);
    assert_eq!(
        (rack.power_shelves, rack.power_shelves_redundant),
        (Some(8), 4)
    );
    let full = |n: usize| (0..n).map(|i| shelf(&format!("S{i}"), 6, 0, Some(33_000.0)));
    // All eight: 8 x 33 kW less the four largest held back = the bus bar's 132 kW.
    let all: Vec<_> = full(8).collect();
    let t = shelves_tile(&rack, &all).expect("tile");
    assert_eq!((t.expected, t.reporting, t.missing), (8, 8, 0));
    assert_eq!(t.limit_watts, Some(132_000.0));
    assert!(!t.in_trouble() && !t.lowers_limit());
    // One down and one degraded (5 of 6 supplies): the reserve holds back the four
    // largest, so 6 x 33 + 27.5 - 4 x 33 kW.
    let mut some: Vec<_> = full(6).collect();
    some.push(shelf("S6", 0, 0, Some(0.0)));
    some.push(shelf("S7", 5, 1, Some(27_500.0)));
    let t = shelves_tile(&rack, &some).expect("tile");
    assert_eq!(t.down, ["S6"]);
    assert_eq!(t.degraded, ["S7"]);
    assert_eq!(
        t.limit_watts,
        Some(6.0 * 33_000.0 + 27_500.0 - 4.0 * 33_000.0)
    );
    assert!(t.lowers_limit() && t.in_trouble());
    // A shelf missing from a fresh reading delivers nothing.
    let seven: Vec<_> = full(7).collect();
    let t = shelves_tile(&rack, &seven).expect("tile");
    assert_eq!((t.missing, t.lost()), (1, 1));
    assert_eq!(t.limit_watts, Some(99_000.0));
    // A supply that does not give its capacity: the limit is unknown, the bus bar's stands.
    let mut unknown: Vec<_> = full(7).collect();
    unknown.push(shelf("S7", 6, 0, None));
    assert_eq!(
        shelves_tile(&rack, &unknown).expect("tile").limit_watts,
        None
    );
    // Not reporting: a tile saying so, and no limit of its own.
    let t = shelves_tile(&rack, &[]).expect("tile");
    assert!(!t.reporting() && t.in_trouble());
    assert_eq!(t.limit_watts, None);
    // A rack without shelves has no tile; without a reserve the limit is the sum.
    rack.power_shelves = None;
    assert_eq!(shelves_tile(&rack, &[]), None);
    rack.power_shelves = Some(2);
    rack.power_shelves_redundant = 0;
    let two: Vec<_> = full(2).collect();
    assert_eq!(
        shelves_tile(&rack, &two).expect("tile").limit_watts,
        Some(66_000.0)
    );
}

#[test]
fn the_racks_limit_is_the_lower_of_bus_bar_and_shelves_and_the_sim_truth_agrees() {
    let mut sim = crate::sim::Sim::with_profile(crate::sim::Profile::Nvl72, 144, 42, "t", T0);
    sim.advance_to(T0 + 9 * 60_000);
    let r = sim.readings();
    let truth = sim.truth_with(&r);
    let ov = overview(sim.inventory(), &r, 1, 1000, T0);
    let mut down = 0;
    for (tile, t) in ov.racks.iter().zip(&truth.racks) {
        let sh = tile.shelves.as_ref().expect("every NVL72 rack has shelves");
        assert_eq!(tile.power_limit_watts, t.power_limit_watts, "{}", tile.name);
        assert_eq!(sh.limit_watts, t.shelf_limit_watts, "{}", tile.name);
        assert_eq!(sh.down, t.shelves_down, "{}", tile.name);
        assert_eq!(sh.degraded, t.shelves_degraded, "{}", tile.name);
        down += sh.down.len();
    }
    assert_eq!(down, 1, "the scenario's one shelf down");
    assert_eq!(
        ov.racks[3].shelves.as_ref().map(|s| s.down.clone()),
        Some(vec!["PowerShelf_2".to_string()])
    );
    assert_eq!(ov.racks[3].power_limit_watts, 99_000.0);
    // A02's degraded shelf delivers 5 of 6 supplies: 7 x 33 + 27.5 - 4 x 33 kW.
    assert_eq!(ov.racks[1].power_limit_watts, 126_500.0);
    assert_eq!(
        ov.summary.power_capacity_watts,
        ov.racks.iter().map(|r| r.power_limit_watts).sum::<f64>()
    );
}
