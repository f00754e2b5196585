use super::*;

/// 2026-11-29 16:00:00 UTC: afternoon, when the weak rack is at its warmest.
const T0: i64 = 1_795_968_000_000;

#[test]
fn same_seed_same_cluster_different_seed_different_cluster() {
    let a = Sim::new(64, 7, "c", T0);
    let b = Sim::new(64, 7, "c", T0);
    let c = Sim::new(64, 8, "c", T0);
    assert_eq!(a.truth(), b.truth());
    assert_ne!(a.truth(), c.truth());
}

#[test]
fn default_shape_is_64_nodes_in_8_racks_over_2_rows() {
    let s = Sim::new(64, 1, "c", T0);
    let inv = s.inventory();
    assert_eq!(inv.nodes.len(), 64);
    assert_eq!(inv.gpu_count(), 512);
    assert_eq!(inv.racks.len(), 8);
    assert_eq!(inv.rows, vec!["A", "B"]);
    let leaves = inv
        .domains
        .iter()
        .filter(|d| d.kind == app::model::DomainKind::Leaf)
        .count();
    let spines = inv
        .domains
        .iter()
        .filter(|d| d.kind == app::model::DomainKind::Spine)
        .count();
    assert_eq!((leaves, spines), (8, 2));
    assert!(inv
        .racks
        .iter()
        .all(|r| (40_000.0..=60_000.0).contains(&r.power_limit_watts)));
}

#[test]
fn time_is_a_parameter_days_run_fast_and_the_cluster_stays_busy() {
    let mut s = Sim::new(64, 3, "c", T0);
    let start = std::time::Instant::now();
    let mut busy = Vec::new();
    for h in 1..=72 {
        s.advance_to(T0 + h * HOUR_MS);
        let t = s.truth();
        busy.push(f64::from(t.gpus.allocated) / f64::from(t.gpus.total));
        assert!(
            t.jobs_pending < 60,
            "queue runs away: {} pending at hour {h}",
            t.jobs_pending
        );
    }
    assert!(start.elapsed().as_secs() < 30);
    let mean = busy.iter().sum::<f64>() / busy.len() as f64;
    assert!((0.5..=0.98).contains(&mean), "mean allocation {mean}");
}

#[test]
fn time_never_goes_backwards() {
    let mut s = Sim::new(16, 3, "c", T0);
    let before = s.truth();
    s.advance_to(T0 - HOUR_MS);
    assert_eq!(s.truth(), before);
}

#[test]
fn gpu_power_stays_within_the_h100_envelope_and_counts_add_up() {
    let mut s = Sim::new(64, 9, "c", T0);
    for m in 0..30 {
        s.advance_to(T0 + m * 7 * MIN_MS);
        let r = s.readings();
        for g in &r.gpus {
            if let Some(p) = g.power_watts {
                assert!((0.0..=GPU_MAX_POWER_WATTS).contains(&p), "{p} W");
            }
        }
        let t = s.truth();
        let c = t.gpus;
        assert_eq!(c.allocated + c.idle + c.drained + c.down, c.total);
        assert_eq!(c.drained, 8);
        assert_eq!(c.down, 8);
    }
}

#[test]
fn the_weak_rack_throttles_in_warm_hours_and_not_at_night() {
    // A seed whose queue has jobs on the weak rack this afternoon (on others it is left
    // free for a large job's reservation).
    let mut s = Sim::new(64, 6, "c", T0);
    let weak = weak_rack(8);
    let afternoon = s.truth();
    assert!(
        afternoon.racks[weak].inlet_celsius > 38.0,
        "{}",
        afternoon.racks[weak].inlet_celsius
    );
    assert!(afternoon.racks[weak].gpus_throttling > 0);
    // 04:00 UTC next day: cool.
    s.advance_to(T0 + 12 * HOUR_MS);
    let night = s.truth();
    assert!(night.racks[weak].inlet_celsius < 25.0);
    assert!(night.racks.iter().all(|r| r.inlet_celsius < 30.0));
}

#[test]
fn the_ecc_node_throws_xid_48_and_kills_jobs() {
    let mut s = Sim::new(64, 11, "c", T0);
    s.set_fault_mean_gpu_hours(None);
    s.drain_events();
    s.advance_to(T0 + 12 * HOUR_MS);
    let ev = s.drain_events();
    let xids: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            SimEvent::Xid { node, xid, .. } => Some((node.clone(), *xid)),
            _ => None,
        })
        .collect();
    assert!(!xids.is_empty(), "no XID in 10 h after onset");
    assert!(xids.iter().all(|(n, x)| n == "gpu038" && *x == 48));
    let failed = ev
        .iter()
        .filter(|e| matches!(e, SimEvent::JobEnded { job, .. } if job.state == JobState::Failed))
        .count();
    assert_eq!(failed, xids.len());
    let r = s.readings();
    let g = r
        .gpus
        .iter()
        .find(|g| g.node == "gpu038" && g.index == 3)
        .expect("gpu");
    assert_eq!(g.ecc_dbe_total, Some(xids.len() as u64));
    assert_eq!(g.last_xid, Some(48));
    // The truth names the GPU and its last XID (the browser test reads it there).
    let t = s.truth_with(&r);
    assert_eq!(
        t.xids,
        vec![crate::sim::truth::TruthXid {
            node: "gpu038".into(),
            gpu: 3,
            xid: 48
        }]
    );
}

#[test]
fn training_jobs_checkpoint_periodically() {
    let mut s = Sim::new(64, 13, "c", T0);
    s.drain_events();
    s.advance_to(T0 + 6 * HOUR_MS);
    let ck: Vec<_> = s
        .drain_events()
        .into_iter()
        .filter_map(|e| match e {
            SimEvent::Checkpoint { checkpoint } => Some(checkpoint),
            _ => None,
        })
        .collect();
    assert!(ck.len() >= 10, "{} checkpoints in 6 h", ck.len());
    for c in &ck {
        assert!(
            c.duration_ms >= 5_000 && c.duration_ms <= 64_000,
            "{}",
            c.duration_ms
        );
    }
}

#[test]
fn largest_cluster_builds_and_reads_quickly() {
    let start = std::time::Instant::now();
    let mut s = Sim::new(2048, 1, "big", T0);
    assert_eq!(s.inventory().gpu_count(), 16_384);
    s.advance_to(T0 + 1000);
    let r = s.readings();
    assert_eq!(r.gpus.len(), 16_384);
    assert!(start.elapsed().as_secs() < 60);
}

#[test]
fn the_fleet_layouts_are_four_halls_of_unique_racks() {
    use std::collections::{HashMap, HashSet};
    // HGX at its largest: 16,384 nodes, 131,072 GPUs, four halls of 4,096 nodes.
    let inv = super::model::layout(Profile::Hgx.max_nodes(), "fleet");
    assert_eq!(inv.nodes.len(), 16_384);
    assert_eq!(inv.gpu_count(), 131_072);
    let racks: HashSet<&str> = inv.racks.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(racks.len(), inv.racks.len(), "rack names are unique");
    let hall = inv.hall_of_rack();
    let mut per_hall: HashMap<&str, usize> = HashMap::new();
    for n in &inv.nodes {
        *per_hall.entry(hall[n.rack.as_str()]).or_default() += 1;
    }
    assert_eq!(per_hall.len(), 4);
    assert!(per_hall.values().all(|&n| n == 4096), "{per_hall:?}");
    // NVL72 at its largest: 2,304 racks of 18 trays, rack names unique past row Z.
    let inv = super::model::layout_nvl72(Profile::Nvl72.max_nodes(), "fleet");
    assert_eq!(inv.racks.len(), 2_304);
    assert_eq!(inv.nodes.len(), 41_472);
    let racks: HashSet<&str> = inv.racks.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(racks.len(), 2_304, "rack names are unique");
    let rows: HashSet<&str> = inv.racks.iter().map(|r| r.row.as_str()).collect();
    assert_eq!(rows.len(), 288);
}

#[test]
fn field_trouble_comes_once_a_stretch_of_4096_nodes() {
    // The default floor keeps its one of each where it always was (gpu038's GPU, ...).
    let t = field_trouble(64);
    assert_eq!(
        t,
        [Trouble {
            ecc: 37,
            drained: 50,
            down: 60,
            switch: 23
        }]
    );
    assert_eq!(Sim::new(64, 1, "c", T0).lemons(), ["gpu038"]);
    // A fleet of four halls has four of each, one a hall, none shared.
    let t = field_trouble(16_384);
    assert_eq!(t.len(), 4);
    for (h, t) in t.iter().enumerate() {
        for n in [t.ecc, t.drained, t.down, t.switch] {
            assert_eq!(n / 4096, h, "{t:?}");
        }
    }
    // A short last stretch has its own; one of under 4 nodes has none.
    assert_eq!(field_trouble(4096 + 100).len(), 2);
    assert_eq!(field_trouble(4096 + 3).len(), 1);
    assert_eq!(field_trouble(3).len(), 0);
}

#[test]
fn energy_counters_only_rise_and_rise_faster_under_load() {
    let mut sim = Sim::new(64, 42, "c", T0);
    let before = sim.readings();
    // Six hours: jobs end, start and fail in between, and the counters must carry over.
    sim.advance_to(T0 + 6 * HOUR_MS);
    let mid = sim.readings();
    let idle_floor = GPU_IDLE_POWER_WATTS * 6.0 * 3600.0;
    let mut compared = 0;
    for (a, b) in before.gpus.iter().zip(&mid.gpus) {
        if let (Some(x), Some(y)) = (a.energy_joules, b.energy_joules) {
            assert!(y - x >= idle_floor - 1e-3, "{} gpu {}", a.node, a.index);
            compared += 1;
        }
    }
    assert!(compared > 400, "{compared}");
    // Over the next minute a GPU in a running job gains more than an idle one's 70 W.
    sim.advance_to(T0 + 6 * HOUR_MS + MIN_MS);
    let after = sim.readings();
    let busy: Vec<&str> = after
        .jobs
        .iter()
        .filter(|j| j.state == JobState::Running)
        .flat_map(|j| j.nodes.iter().map(String::as_str))
        .collect();
    // Runs still starting up or hung draw idle power: left out.
    let (m0, m1) = (T0 + 6 * HOUR_MS, T0 + 6 * HOUR_MS + MIN_MS);
    let not_working: Vec<&str> = sim
        .active
        .iter()
        .filter(|j| j.startup_until_ms > m0 || j.hang_from_ms.is_some_and(|h| h < m1))
        .flat_map(|j| j.job.nodes.iter().map(String::as_str))
        .collect();
    let (mut busy_gain, mut idle_gain) = (Vec::new(), Vec::new());
    for (a, b) in mid.gpus.iter().zip(&after.gpus) {
        if let (Some(x), Some(y)) = (a.energy_joules, b.energy_joules) {
            if not_working.contains(&a.node.as_str()) {
                continue;
            }
            let in_job = busy.contains(&a.node.as_str())
                && mid
                    .jobs
                    .iter()
                    .any(|j| j.state == JobState::Running && j.nodes.contains(&a.node));
            if in_job {
                busy_gain.push(y - x);
            } else if !busy.contains(&a.node.as_str())
                && !mid
                    .jobs
                    .iter()
                    .any(|j| j.state == JobState::Running && j.nodes.contains(&a.node))
            {
                idle_gain.push(y - x);
            }
        }
    }
    assert!(!busy_gain.is_empty() && !idle_gain.is_empty());
    let idle_minute = GPU_IDLE_POWER_WATTS * 60.0;
    assert!(idle_gain.iter().all(|g| (g - idle_minute).abs() < 1e-2));
    assert!(busy_gain
        .iter()
        .all(|g| *g > idle_minute + 20.0 * 60.0 - 1e-2));
}

#[test]
fn faults_come_in_published_proportions_and_leave_their_evidence() {
    let mut s = Sim::new(64, 3, "c", T0);
    s.set_fault_mean_gpu_hours(Some(100.0));
    s.drain_events();
    s.advance_to(T0 + 20 * 24 * HOUR_MS);
    let all = s.interruptions().to_vec();
    // The random ones: the ECC node (gpu038) fails every job on it.
    let list: Vec<_> = all
        .iter()
        .filter(|i| i.node.as_deref() != Some("gpu038"))
        .cloned()
        .collect();
    assert!(list.len() > 300, "{} interruptions", list.len());
    let share = |c: app::reliability::Cause| {
        list.iter().filter(|i| i.cause == c).count() as f64 / list.len() as f64
    };
    use app::reliability::Cause;
    // GPU 30%, GPU memory 17%, software 13%, network 8%, host 8%.
    for (c, want) in [
        (Cause::Gpu, 0.30),
        (Cause::GpuMemory, 0.17),
        (Cause::Software, 0.13),
        (Cause::Network, 0.08),
        (Cause::Host, 0.08),
        (Cause::UserApplication, 0.12),
        (Cause::Unknown, 0.08),
    ] {
        let got = share(c);
        assert!((got - want).abs() < 0.06, "{c:?}: {got:.3} against {want}");
    }
    assert!(list
        .iter()
        .all(|i| i.evidence == (i.cause != Cause::Unknown)));
    // Every job that failed or lost its node is in the truth, at the time it ended.
    let ev = s.drain_events();
    let ended: Vec<(u64, i64)> = ev
        .iter()
        .filter_map(|e| match e {
            SimEvent::JobEnded { job, .. }
                if matches!(job.state, JobState::Failed | JobState::NodeFail) =>
            {
                Some((job.id, job.end_ms.unwrap_or(0)))
            }
            _ => None,
        })
        .collect();
    let truth: Vec<(u64, i64)> = all.iter().map(|i| (i.job, i.at_ms)).collect();
    assert_eq!(ended, truth);
}

#[test]
fn the_nvl72_profile_is_racks_of_18_trays_with_a_block_and_an_nvlink_domain_each() {
    let s = Sim::with_profile(Profile::Nvl72, 144, 1, "c", T0);
    let inv = s.inventory();
    assert_eq!(inv.nodes.len(), 144);
    assert_eq!(inv.gpu_count(), 576);
    assert_eq!(inv.racks.len(), 8);
    assert!(inv
        .racks
        .iter()
        .all(|r| r.cooling == app::model::Cooling::Liquid
            && r.power_limit_watts == 132_000.0
            && r.coolant_flow_min_lpm.is_some()));
    for kind in [
        app::model::DomainKind::Nvlink,
        app::model::DomainKind::Block,
    ] {
        let ds: Vec<_> = inv.domains.iter().filter(|d| d.kind == kind).collect();
        assert_eq!(ds.len(), 8, "{kind:?}");
        assert!(ds.iter().all(|d| d.nodes.len() == 18));
    }
    // Rounded up to whole racks; every tray of a rack in its rack's block.
    let r = Sim::with_profile(Profile::Nvl72, 20, 1, "c", T0);
    assert_eq!(r.inventory().nodes.len(), 36);
    // Multi-node jobs ask for segments that divide their size, and run inside blocks.
    let jobs = s.slurm_jobs();
    assert!(
        jobs.iter().any(|j| j.segment_size.is_some()),
        "no segment job"
    );
    let rack_of: std::collections::HashMap<&str, &str> = inv
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.rack.as_str()))
        .collect();
    for j in jobs.iter().filter(|j| j.job.state == JobState::Running) {
        let Some(seg) = j.segment_size else { continue };
        assert_eq!(j.node_count % seg, 0, "job {}", j.job.id);
        let mut per_rack: std::collections::HashMap<&str, u32> = Default::default();
        for n in &j.job.nodes {
            *per_rack.entry(rack_of[n.as_str()]).or_default() += 1;
        }
        assert!(
            per_rack.values().all(|k| k % seg == 0),
            "job {} of segment {seg} split {per_rack:?}",
            j.job.id
        );
    }
}

#[test]
fn the_nvl72_coolant_scenario_shows_in_readings_and_truth() {
    let mut s = Sim::with_profile(Profile::Nvl72, 144, 1, "c", T0);
    let sc = s.coolant_scenario().cloned().expect("scenario");
    let r = s.readings();
    let c: Vec<_> = r.nodes.iter().filter_map(|n| n.coolant).collect();
    let responding = r
        .nodes
        .iter()
        .filter(|n| !matches!(n.state, NodeState::Down | NodeState::NotResponding))
        .count();
    assert_eq!(
        c.len(),
        responding,
        "every responding tray reports its coolant"
    );
    assert!(c.iter().all(|c| c.leak == Some(app::model::LeakState::Ok)));
    assert!(c.iter().all(|c| c.flow_lpm.is_some_and(|f| f > 5.0)));
    s.advance_to(sc.flow_from_ms + 1000);
    let r = s.readings();
    let rack_nodes = |rack: usize| rack * 18..(rack + 1) * 18;
    for i in rack_nodes(sc.flow_rack) {
        if let Some(c) = r.nodes[i].coolant {
            assert!(c.flow_lpm.is_some_and(|f| f < 3.0), "{c:?}");
        }
    }
    s.advance_to(sc.leak_critical_ms + 1000);
    let r = s.readings();
    let t = s.truth();
    let leaking: Vec<&str> = t.racks[sc.leak_rack]
        .leaking
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    let names: Vec<&str> = sc
        .leak_trays
        .iter()
        .map(|&i| s.inventory().nodes[i].name.as_str())
        .collect();
    assert_eq!(leaking, names);
    for &i in &sc.leak_trays {
        assert_eq!(
            r.nodes[i].coolant.and_then(|c| c.leak),
            Some(app::model::LeakState::Critical)
        );
    }
    // The truth's free segments: per size, the blocks' idle nodes divided down.
    let seg = &t.segments[0];
    assert_eq!(seg.base, 18);
    let idle: u32 = t
        .nodes
        .iter()
        .filter(|(_, st)| *st == NodeState::Idle)
        .count() as u32;
    assert!(seg.idle_nodes <= idle);
    assert_eq!(seg.sizes[0], (1, seg.idle_nodes));
}

#[test]
fn a_large_floor_stands_in_four_halls_each_summing_its_racks_truth() {
    // The default cluster has no halls; from 512 nodes the rows split over four.
    assert!(Sim::new(64, 1, "c", T0).inventory().halls.is_empty());
    let mut sim = Sim::new(1024, 5, "c", T0);
    let inv = sim.inventory().clone();
    let names: Vec<&str> = inv.halls.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["H1", "H2", "H3", "H4"]);
    for h in &inv.halls {
        let racks: Vec<&app::model::Rack> = inv.racks.iter().filter(|r| r.hall == h.name).collect();
        assert_eq!(racks.len(), 32, "{}", h.name);
        // Its feed: 85% of its racks' limits; a row in one hall only.
        let limits: f64 = racks.iter().map(|r| r.power_limit_watts).sum();
        assert!((h.power_feed_watts.expect("a feed") - 0.85 * limits).abs() < 1e-6);
        for r in &racks {
            assert!(inv
                .racks
                .iter()
                .filter(|o| o.row == r.row)
                .all(|o| o.hall == h.name));
        }
    }
    sim.advance_to(T0 + 10 * MIN_MS);
    let r = sim.readings();
    let ov = crate::aggregate::overview(&inv, &r, 1, 1000, T0);
    let truth = sim.truth_with(&r);
    assert_eq!(ov.halls.len(), 4);
    let mut gpus = app::live::GpuCounts::default();
    for (h, tile) in inv.halls.iter().zip(&ov.halls) {
        let in_hall: Vec<&str> = inv
            .racks
            .iter()
            .filter(|r| r.hall == h.name)
            .map(|r| r.name.as_str())
            .collect();
        let of = |t: &&TruthRack| in_hall.contains(&t.name.as_str());
        let power: f64 = truth.racks.iter().filter(of).map(|t| t.power_watts).sum();
        let throttling: u32 = truth
            .racks
            .iter()
            .filter(of)
            .map(|t| t.gpus_throttling)
            .sum();
        assert!(
            (tile.power_watts - power).abs() < 1e-6,
            "{}: {} against {power}",
            h.name,
            tile.power_watts
        );
        assert_eq!(tile.gpus_throttling, throttling, "{}", h.name);
        assert_eq!(
            (tile.racks, tile.rows, tile.nodes),
            (32, 2, 256),
            "{}",
            h.name
        );
        assert_eq!(tile.gpus.total, 2048);
        assert_eq!(tile.power_feed_watts, h.power_feed_watts);
        assert!(tile.feed_share().is_some_and(|s| s > 0.0 && s < 2.0));
        gpus.add(tile.gpus);
    }
    // Every GPU is in one hall, in the state the truth gives it.
    assert_eq!(gpus, truth.gpus);
}
