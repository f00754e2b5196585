use super::*;
use crate::sim::Sim;
use app::model::JobState;

const T0: i64 = 1_795_968_000_000;

fn base() -> (Sim, Readings, Overview) {
    let sim = Sim::new(64, 42, "t", T0);
    let r = sim.readings();
    let ov = crate::aggregate::overview(sim.inventory(), &r, 1, 1000, T0);
    (sim, r, ov)
}

/// The conditions of `ov` with the default configuration, a fresh state and `r` as the
/// only fact.
fn evaluate_with(ov: &Overview, r: &Readings) -> Vec<Condition> {
    evaluate(
        &AlertConfig::default(),
        ov,
        &Facts {
            readings: Some(r),
            ..Default::default()
        },
        &mut RuleState::default(),
    )
}

fn rules(c: &[Condition]) -> Vec<(&'static str, String)> {
    c.iter().map(|c| (c.rule, c.subject.clone())).collect()
}

#[test]
fn the_simulated_cluster_fires_what_is_wrong_with_it() {
    let (_, r, ov) = base();
    let mut st = RuleState::default();
    let c = evaluate(
        &AlertConfig::default(),
        &ov,
        &Facts {
            readings: Some(&r),
            ..Default::default()
        },
        &mut st,
    );
    // The down node is not responding.
    assert!(
        rules(&c).contains(&("node_not_responding", "node:gpu061".into())),
        "{c:?}"
    );
}

#[test]
fn each_rule_fires_and_resolves() {
    let (_, mut r, mut ov) = base();
    let cfg = AlertConfig::default();
    let mut st = RuleState::default();
    // Double-bit ECC and a drain-class XID on gpu002.
    let g = r.gpus.iter_mut().find(|g| g.node == "gpu002").expect("gpu");
    g.ecc_dbe_total = Some(1);
    g.last_xid = Some(79);
    // Rack A01 over its power limit, B01 inlet over its limit.
    ov.racks[0].power_watts = Some(ov.racks[0].power_limit_watts * 1.05);
    let i = ov.racks.iter().position(|t| t.name == "B01").expect("B01");
    ov.racks[i].inlet_celsius = Some(45.0);
    let c = evaluate(
        &cfg,
        &ov,
        &Facts {
            readings: Some(&r),
            ..Default::default()
        },
        &mut st,
    );
    let got = rules(&c);
    for want in [
        ("ecc_double_bit", "node:gpu002".to_string()),
        ("xid", "node:gpu002:gpu0".to_string()),
        ("rack_power_over_limit", "rack:A01".to_string()),
        ("inlet_over_limit", "rack:B01".to_string()),
    ] {
        assert!(got.contains(&want), "{want:?} in {got:?}");
    }
    assert_eq!(
        c.iter()
            .find(|c| c.rule == "xid")
            .and_then(|c| c.drain_node.clone()),
        Some("gpu002".into())
    );
    // Drained: the hardware alerts stop (the action was taken).
    let n = ov
        .nodes
        .iter_mut()
        .find(|n| n.name == "gpu002")
        .expect("node");
    n.state = NodeState::Drained;
    let c = evaluate(
        &cfg,
        &ov,
        &Facts {
            readings: Some(&r),
            ..Default::default()
        },
        &mut st,
    );
    assert!(!rules(&c)
        .iter()
        .any(|(r, s)| s.starts_with("node:gpu002") && (*r == "xid" || *r == "ecc_double_bit")));
}

#[test]
fn remapped_rows_replays_targets_thermal_and_checkpoints() {
    let (_, mut r, mut ov) = base();
    let cfg = AlertConfig::default();
    let mut st = RuleState::default();
    let g = r.gpus.iter_mut().find(|g| g.node == "gpu003").expect("gpu");
    g.remapped_rows_uncorrectable = Some(2);
    g.pcie_replay_total = Some(10);
    let targets = vec![TargetHealth {
        url: "http://gpu009:9400/metrics".into(),
        consecutive_failures: 3,
        last_error: Some("connection refused".into()),
        ..TargetHealth::default()
    }];
    let jobs: Vec<SchedJob> = r
        .jobs
        .iter()
        .filter(|j| j.state == JobState::Running)
        .take(1)
        .map(|j| SchedJob {
            node_count: 1,
            ..SchedJob::of(j.clone())
        })
        .collect();
    let id = jobs[0].job.id;
    let mut last = HashMap::new();
    last.insert(id, ov.at_ms - 3 * 3_600_000);
    let eval = |r: &Readings, ov: &Overview, st: &mut RuleState, last: &HashMap<u64, i64>| {
        let f = Facts {
            readings: Some(r),
            jobs: &jobs,
            targets: &targets,
            last_checkpoint_ms: last.clone(),
            ..Default::default()
        };
        rules(&evaluate(&cfg, ov, &f, st))
    };
    let c = eval(&r, &ov, &mut st, &last);
    assert!(
        c.contains(&("remapped_rows", "node:gpu003".into())),
        "{c:?}"
    );
    assert!(c.contains(&("target_down", "target:http://gpu009:9400/metrics".into())));
    assert!(c.contains(&("checkpoint_overdue", format!("job:{id}"))));
    assert!(!c.iter().any(|(r, _)| *r == "gpus_idle"));
    // The pipeline found the job holding GPUs idle: a warning naming its owner.
    {
        let mut ov = ov.clone();
        ov.idle = vec![app::queue::IdleHeld {
            job: id,
            gpus: 4,
            of: 8,
            since_ms: ov.at_ms - 45 * 60_000,
            gpu_hours: 3.0,
        }];
        let f = Facts {
            readings: Some(&r),
            jobs: &jobs,
            targets: &targets,
            ..Default::default()
        };
        let conds = evaluate(&cfg, &ov, &f, &mut RuleState::default());
        let idle = conds
            .iter()
            .find(|c| c.rule == "gpus_idle")
            .expect("gpus_idle");
        assert_eq!(idle.subject, format!("job:{id}"));
        assert!(
            idle.summary.contains(&format!("user {}", jobs[0].job.user))
                && idle
                    .summary
                    .contains("4 of 8 GPUs idle for 45 min: 3.0 GPU-hours so far"),
            "{}",
            idle.summary
        );
    }
    assert!(
        !c.iter().any(|(r, _)| *r == "pcie_replays"),
        "the first count is a baseline, not a rise"
    );
    // The replay counter rises: fires; 6 minutes without a rise: resolves.
    r.gpus
        .iter_mut()
        .find(|g| g.node == "gpu003")
        .expect("gpu")
        .pcie_replay_total = Some(15);
    ov.at_ms += 10_000;
    assert!(eval(&r, &ov, &mut st, &last).contains(&("pcie_replays", "node:gpu003:gpu0".into())));
    ov.at_ms += 6 * 60_000;
    assert!(!eval(&r, &ov, &mut st, &last)
        .iter()
        .any(|(r, _)| *r == "pcie_replays"));
    // A checkpoint arrives: the job is no longer overdue.
    last.insert(id, ov.at_ms - 60_000);
    assert!(!eval(&r, &ov, &mut st, &last)
        .iter()
        .any(|(r, _)| *r == "checkpoint_overdue"));
    // Thermal throttling held for 5 minutes.
    for g in r.gpus.iter_mut().filter(|g| g.node == "gpu004") {
        g.throttle = Some(app::model::ThrottleReasons(
            app::model::ThrottleReasons::SW_THERMAL,
        ));
    }
    assert!(!eval(&r, &ov, &mut st, &last)
        .iter()
        .any(|(r, s)| *r == "thermal_throttling" && s == "node:gpu004"));
    ov.at_ms += 5 * 60_000;
    assert!(eval(&r, &ov, &mut st, &last).contains(&("thermal_throttling", "node:gpu004".into())));
}

#[test]
fn durations_are_respected() {
    let (_, r, mut ov) = base();
    let cfg = AlertConfig::default();
    let mut st = RuleState::default();
    ov.racks[0].power_watts = Some(ov.racks[0].power_limit_watts * 0.95);
    let fire = |ov: &Overview, st: &mut RuleState| {
        rules(&evaluate(
            &cfg,
            ov,
            &Facts {
                readings: Some(&r),
                ..Default::default()
            },
            st,
        ))
        .contains(&("rack_power_high", "rack:A01".into()))
    };
    assert!(!fire(&ov, &mut st), "not yet: 0 of 5 minutes");
    ov.at_ms += 4 * 60_000;
    assert!(!fire(&ov, &mut st));
    ov.at_ms += 60_000;
    assert!(fire(&ov, &mut st), "5 minutes over 90%");
    // Drops below: forgotten, so it must hold 5 minutes again.
    ov.racks[0].power_watts = Some(1000.0);
    assert!(!fire(&ov, &mut st));
    ov.racks[0].power_watts = Some(ov.racks[0].power_limit_watts * 0.95);
    ov.at_ms += 60_000;
    assert!(!fire(&ov, &mut st));
}

#[test]
fn nccl_latency_against_a_threshold_and_a_baseline() {
    let (_, r, ov) = base();
    let jobs: Vec<SchedJob> = r
        .jobs
        .iter()
        .filter(|j| j.state == JobState::Running)
        .take(1)
        .map(|j| SchedJob {
            node_count: 1,
            ..SchedJob::of(j.clone())
        })
        .collect();
    let id = jobs[0].job.id;
    let cfg = AlertConfig::default();
    let run = |samples: Vec<f64>| {
        let mut st = RuleState::default();
        let mut nccl = HashMap::new();
        nccl.insert(
            id,
            samples
                .into_iter()
                .enumerate()
                .map(|(i, l)| (i as u64, l))
                .collect(),
        );
        let f = Facts {
            jobs: &jobs,
            nccl,
            ..Default::default()
        };
        rules(&evaluate(&cfg, &ov, &f, &mut st)).contains(&("nccl_latency", format!("job:{id}")))
    };
    assert!(run(vec![40.0, 120.0, 130.0, 140.0]), "3 steps over 100 us");
    assert!(!run(vec![120.0, 130.0, 40.0]), "not 3 in a row");
    // A job whose all-reduce is naturally slow (EFA, 70 us) is judged by its baseline.
    let mut slow = vec![70.0; 20];
    slow.extend([80.0, 85.0, 88.0]);
    assert!(!run(slow.clone()), "within 1.3 x its own median");
    slow.extend([95.0, 96.0, 97.0]);
    assert!(run(slow), "over 1.3 x 70 us for 3 steps");
}

#[test]
fn a_leak_names_its_rack_trays_jobs_and_segments_and_low_flow_its_trays() {
    let mut sim = Sim::with_profile(crate::sim::Profile::Nvl72, 144, 42, "t", T0);
    let sc = sim.coolant_scenario().cloned().expect("scenario");
    sim.advance_to(sc.leak_warning_ms + 1_000);
    let eval = |sim: &Sim| {
        let r = sim.readings();
        let ov = crate::aggregate::overview(sim.inventory(), &r, 1, 1000, sim.now_ms());
        let (nodes, jobs) = (sim.slurm_nodes(), sim.slurm_jobs());
        let c = evaluate(
            &AlertConfig::default(),
            &ov,
            &Facts {
                readings: Some(&r),
                jobs: &jobs,
                inventory: Some(sim.inventory()),
                nodes: &nodes,
                ..Default::default()
            },
            &mut RuleState::default(),
        );
        (c, ov, nodes, jobs)
    };
    let rack = sim.inventory().racks[sc.leak_rack].name.clone();
    let (c, ..) = eval(&sim);
    assert!(
        rules(&c).contains(&("coolant_leak_warning", format!("rack:{rack}"))),
        "{c:?}"
    );
    assert!(!rules(&c).iter().any(|(r, _)| *r == "coolant_leak"));
    sim.advance_to(sc.leak_critical_ms + 1_000);
    let (c, ov, nodes, jobs) = eval(&sim);
    let leak = c
        .iter()
        .find(|c| c.rule == "coolant_leak" && c.subject == format!("rack:{rack}"))
        .expect("a critical leak alert");
    assert_eq!(leak.severity, "critical");
    for &i in &sc.leak_trays {
        assert!(
            leak.summary.contains(&sim.inventory().nodes[i].name),
            "{}",
            leak.summary
        );
    }
    // Every job running in the rack, by the scheduler's own node lists.
    let rack_nodes: Vec<String> = sim
        .inventory()
        .nodes
        .iter()
        .filter(|n| n.rack == rack)
        .map(|n| n.name.clone())
        .collect();
    for j in jobs.iter().filter(|j| j.job.state == JobState::Running) {
        if j.job.nodes.iter().any(|n| rack_nodes.contains(n)) {
            assert!(
                leak.summary.contains(&j.job.id.to_string()),
                "{} not in {}",
                j.job.id,
                leak.summary
            );
        }
    }
    for line in crate::cluster::segments::drain_impact(sim.inventory(), &nodes, &jobs, &rack_nodes)
    {
        assert!(
            leak.summary.contains(&line),
            "{line:?} not in {}",
            leak.summary
        );
    }
    // The rack short of flow: every tray that reports is under the limit, by name.
    let flow_rack = &sim.inventory().racks[sc.flow_rack].name;
    let low = c
        .iter()
        .find(|c| c.rule == "coolant_flow_low" && c.subject == format!("rack:{flow_rack}"))
        .expect("a low-flow alert");
    let tile = ov
        .racks
        .iter()
        .find(|r| &r.name == flow_rack)
        .expect("tile");
    let coolant = tile.coolant.as_ref().expect("coolant");
    assert_eq!(coolant.low_flow.len() as u32, coolant.trays_reporting);
    assert!(low.summary.contains(&coolant.low_flow[0]));
    assert_eq!(tile.severity(), app::live::Severity::Warning);
    // Racks with neither trouble fire none of the coolant rules.
    assert!(c
        .iter()
        .filter(|c| c.rule.starts_with("coolant"))
        .all(|c| c.subject == format!("rack:{rack}") || c.subject == format!("rack:{flow_rack}")));
}

#[test]
fn trays_dcgm_places_elsewhere_than_the_layout_warn_per_rack_naming_them() {
    // The NVL72 profile's planted mistakes: a swap inside A04, one between A07 and A08.
    let sim = Sim::with_profile(crate::sim::Profile::Nvl72, 144, 42, "t", T0);
    let r = sim.readings();
    let ov = crate::aggregate::overview(sim.inventory(), &r, 1, 1000, sim.now_ms());
    let c = evaluate_with(&ov, &r);
    let fired: Vec<&Condition> = c.iter().filter(|c| c.rule == "layout_disagrees").collect();
    let subjects: Vec<&str> = fired.iter().map(|c| c.subject.as_str()).collect();
    assert_eq!(subjects, ["rack:A04", "rack:A07", "rack:A08"], "{fired:?}");
    let truth = sim.truth();
    for m in &truth.misplaced {
        assert!(fired.iter().any(|c| c.summary.contains(m.as_str())), "{m}");
    }
    assert!(fired.iter().all(|c| c.severity == "warning"));
    assert!(fired[0]
        .summary
        .starts_with("rack A04: the layout file disagrees with DCGM about 2 tray(s): "));
    // The HGX profile's exporters place nothing: no such alert.
    let hgx = Sim::new(16, 42, "t", T0);
    let r = hgx.readings();
    let ov = crate::aggregate::overview(hgx.inventory(), &r, 1, 1000, hgx.now_ms());
    let c = evaluate(
        &AlertConfig::default(),
        &ov,
        &Facts::default(),
        &mut RuleState::default(),
    );
    assert!(!c.iter().any(|c| c.rule == "layout_disagrees"));
}

#[test]
fn delta_t_over_its_limit_is_a_warning() {
    let (_, r, mut ov) = base();
    ov.racks[0].coolant = Some(app::live::CoolantTile {
        supply_celsius: Some(30.0),
        return_celsius: Some(42.5),
        delta_t_celsius: Some(12.5),
        delta_t_max_celsius: Some(10.0),
        trays_reporting: 8,
        ..Default::default()
    });
    let c = evaluate_with(&ov, &r);
    let name = ov.racks[0].name.clone();
    assert!(
        rules(&c).contains(&("coolant_delta_t_high", format!("rack:{name}"))),
        "{c:?}"
    );
    ov.racks[0].coolant.as_mut().expect("tile").delta_t_celsius = Some(9.9);
    let c = evaluate_with(&ov, &r);
    assert!(!rules(&c).iter().any(|(r, _)| *r == "coolant_delta_t_high"));
}

#[test]
fn a_power_shelf_down_names_the_shelf_the_lowered_limit_and_who_draws_the_rack() {
    let mut sim = Sim::with_profile(crate::sim::Profile::Nvl72, 144, 42, "t", T0);
    // The scenario's shelf goes down 8 minutes in; the degraded one is there from the start.
    sim.advance_to(T0 + 9 * 60_000);
    let r = sim.readings();
    let ov = crate::aggregate::overview(sim.inventory(), &r, 1, 1000, sim.now_ms());
    let truth = sim.truth_with(&r);
    let c = evaluate_with(&ov, &r);
    let fired: Vec<(&str, &str)> = c
        .iter()
        .filter(|c| c.rule.starts_with("power_shelf"))
        .map(|c| (c.rule, c.subject.as_str()))
        .collect();
    assert_eq!(
        fired,
        [
            ("power_shelf_degraded", "rack:A02"),
            ("power_shelf_down", "rack:A04")
        ]
    );
    let down = c
        .iter()
        .find(|c| c.rule == "power_shelf_down")
        .expect("down");
    let t = &truth.racks[3];
    assert_eq!(t.shelves_down, ["PowerShelf_2"]);
    assert_eq!(down.severity, "warning", "{}", down.summary);
    assert!(
        down.summary.starts_with(&format!(
            "rack A04: power shelf down: PowerShelf_2 (7 of 8 shelves delivering); its limit is {:.1} kW against the bus bar's 132.0 kW; it draws ",
            t.power_limit_watts / 1000.0
        )),
        "{}",
        down.summary
    );
    // Every running job the truth has in the rack is named with its draw there.
    for j in &t.jobs {
        assert!(
            down.summary.contains(&format!("job {j} (")),
            "{j}: {}",
            down.summary
        );
    }
    let degraded = c
        .iter()
        .find(|c| c.rule == "power_shelf_degraded")
        .expect("degraded");
    assert!(
        degraded.summary.contains("PowerShelf_5"),
        "{}",
        degraded.summary
    );
    assert_eq!(truth.racks[1].shelves_degraded, ["PowerShelf_5"]);

    // Drawing more than the lowered limit makes it critical, alongside the over-limit rule.
    let mut hot = ov.clone();
    hot.racks[3].power_watts = Some(hot.racks[3].power_limit_watts + 1000.0);
    let c = evaluate_with(&hot, &r);
    let down = c
        .iter()
        .find(|c| c.rule == "power_shelf_down")
        .expect("down");
    assert_eq!(down.severity, "critical");
    assert!(down.summary.contains(", over it;"), "{}", down.summary);
    assert!(rules(&c).contains(&("rack_power_over_limit", "rack:A04".into())));
    // Before the failure: no shelf down anywhere.
    let sim0 = Sim::with_profile(crate::sim::Profile::Nvl72, 144, 42, "t", T0);
    let r0 = sim0.readings();
    let ov0 = crate::aggregate::overview(sim0.inventory(), &r0, 1, 1000, sim0.now_ms());
    assert!(!evaluate_with(&ov0, &r0)
        .iter()
        .any(|c| c.rule == "power_shelf_down"));
}

#[test]
fn a_fatal_nvswitch_error_is_critical_and_drain_class_and_a_hot_switch_warns() {
    let mut sim = Sim::new(64, 42, "t", T0);
    // Before the fault: switches reported on every answering node, none in trouble.
    let r = sim.readings();
    assert_eq!(r.nodes.len(), 64);
    assert!(r.nodes[0].switches.len() == 4);
    let ov = crate::aggregate::overview(sim.inventory(), &r, 1, 1000, sim.now_ms());
    assert!(!evaluate_with(&ov, &r)
        .iter()
        .any(|c| c.rule.starts_with("nvswitch")));
    // Three hours in, gpu024's switch 2 reports a fatal SXid.
    sim.advance_to(T0 + 3 * 3_600_000 + 1000);
    let r = sim.readings();
    let truth = sim.truth_with(&r);
    assert_eq!(truth.nvswitch_fatal, [("gpu024".to_string(), 2, 12028)]);
    let ov = crate::aggregate::overview(sim.inventory(), &r, 1, 1000, sim.now_ms());
    let c = evaluate_with(&ov, &r);
    let fatal: Vec<&Condition> = c.iter().filter(|c| c.rule == "nvswitch_fatal").collect();
    assert_eq!(fatal.len(), 1, "{c:?}");
    assert_eq!(fatal[0].subject, "node:gpu024");
    assert_eq!(fatal[0].severity, "critical");
    assert_eq!(fatal[0].drain_node.as_deref(), Some("gpu024"));
    assert!(
        fatal[0]
            .summary
            .starts_with("gpu024: fatal NVSwitch error (NVSwitch 2 SXid 12028), reset required; "),
        "{}",
        fatal[0].summary
    );
    let jobs: Vec<String> = ov
        .nodes
        .iter()
        .find(|n| n.name == "gpu024")
        .map(|n| n.jobs.iter().map(u64::to_string).collect())
        .unwrap_or_default();
    let want = if jobs.is_empty() {
        "none".to_string()
    } else {
        jobs.join(", ")
    };
    assert!(
        fatal[0].summary.ends_with(&format!("running jobs: {want}")),
        "{}",
        fatal[0].summary
    );
    // A drained node's switch is not alerted on again.
    let mut drained = ov.clone();
    if let Some(n) = drained.nodes.iter_mut().find(|n| n.name == "gpu024") {
        n.state = NodeState::Drained;
    }
    assert!(!evaluate_with(&drained, &r)
        .iter()
        .any(|c| c.rule == "nvswitch_fatal"));
    // A switch at its slowdown temperature warns, naming it.
    let mut hot = r.clone();
    hot.nodes[0].switches[1].temp_celsius = Some(96.0);
    let c = evaluate_with(&ov, &hot);
    let w = c.iter().find(|c| c.rule == "nvswitch_hot").expect("hot");
    assert_eq!(w.subject, "node:gpu001");
    assert_eq!(
        w.summary,
        "gpu001: NVSwitch 1 at 96 °C (slows down at 95 °C)"
    );
    // NVL72 compute trays report no switches: no rule looks at them.
    let nvl = Sim::with_profile(crate::sim::Profile::Nvl72, 144, 42, "t", T0);
    assert!(nvl.readings().nodes.iter().all(|n| n.switches.is_empty()));
}

#[test]
fn an_nvlink_switch_tray_down_is_critical_and_names_the_trays_cut_and_their_jobs() {
    let mut sim = Sim::with_profile(crate::sim::Profile::Nvl72, 144, 42, "t", T0);
    let fired = |sim: &Sim| {
        let r = sim.readings();
        let ov = crate::aggregate::overview(sim.inventory(), &r, 1, 1000, sim.now_ms());
        let truth = sim.truth_with(&r);
        (evaluate_with(&ov, &r), truth, ov)
    };
    // From the start: one GPU link of rack A07 down, on the tray the layout puts in A08
    // (DCGM places it in A07, and so does NMX-T's chassis).
    let (c, truth, ov) = fired(&sim);
    let nv: Vec<(&str, &str)> = c
        .iter()
        .filter(|c| c.rule.starts_with("nvlink"))
        .map(|c| (c.rule, c.subject.as_str()))
        .collect();
    assert_eq!(nv, [("nvlink_links_down", "rack:A07")]);
    assert_eq!(truth.racks[6].nvlink_cut, ["gb0127"]);
    assert_eq!(truth.racks[6].nvlink_links_down, 1);
    let links = c
        .iter()
        .find(|c| c.rule == "nvlink_links_down")
        .expect("links");
    assert_eq!(links.severity, "warning");
    assert!(
        links.summary.starts_with(
            "rack A07: 1 NVLink link(s) not active, on switch tray sw02: gb0127 GPU 1 GPUP2 to sw02 (Local_phy); compute trays cut: gb0127; "
        ),
        "{}",
        links.summary
    );
    let tile = ov.racks[6].fabric.as_ref().expect("tile");
    assert_eq!(
        (tile.expected, tile.reporting, tile.links, tile.active),
        (9, 9, 1296, 1295)
    );
    assert_eq!(ov.racks[6].severity(), app::live::Severity::Warning);

    // Six minutes in, switch tray sw04 of rack A05 goes down: every tray of the rack cut.
    sim.advance_to(T0 + 7 * 60_000);
    let (c, truth, ov) = fired(&sim);
    let t = &truth.racks[4];
    assert_eq!(t.nvlink_down, ["sw04"]);
    assert_eq!(t.nvlink_links_down, 144);
    assert_eq!(t.nvlink_cut.len(), 18);
    let down = c
        .iter()
        .find(|c| c.rule == "nvlink_switch_tray_down")
        .expect("down");
    assert_eq!(
        (down.severity, down.subject.as_str()),
        ("critical", "rack:A05")
    );
    assert!(
        down.summary.starts_with(&format!(
            "rack A05: NVLink switch tray down: sw04 (8 of 9 switch trays up; 1152 of 1296 GPU links active); compute trays cut: {}; ",
            t.nvlink_cut.join(", ")
        )),
        "{}",
        down.summary
    );
    for j in &t.nvlink_jobs {
        assert!(
            down.summary.contains(&j.to_string()),
            "{j}: {}",
            down.summary
        );
    }
    if t.nvlink_jobs.is_empty() {
        assert!(
            down.summary.ends_with("no running job on them"),
            "{}",
            down.summary
        );
    }
    assert_eq!(ov.racks[4].severity(), app::live::Severity::Critical);

    // A switch tray missing from the reading is down too.
    let mut r = sim.readings();
    if let Some(f) = r.racks[2].fabric.as_mut() {
        f.switch_trays.remove(0);
    }
    let ov = crate::aggregate::overview(sim.inventory(), &r, 1, 1000, sim.now_ms());
    let c = evaluate_with(&ov, &r);
    let missing = c
        .iter()
        .find(|c| c.rule == "nvlink_switch_tray_down" && c.subject == "rack:A03")
        .expect("missing");
    assert!(
        missing
            .summary
            .contains("down: 1 not in the reading (8 of 9 switch trays up"),
        "{}",
        missing.summary
    );
}

#[test]
fn slurmctlds_slow_backfill_and_long_agent_queue_are_warnings() {
    let (_, r, mut ov) = base();
    let mut health = app::queue::SchedHealth::default();
    health.backfill.last_us = Some(25_000_000);
    health.backfill.depth = Some(812);
    health.agent_queue = Some(150);
    let cfg = AlertConfig::default();
    let mut st = RuleState::default();
    let run = |ov: &Overview, st: &mut RuleState, h: &app::queue::SchedHealth| {
        evaluate(
            &cfg,
            ov,
            &Facts {
                readings: Some(&r),
                health: Some(h),
                ..Default::default()
            },
            st,
        )
        .into_iter()
        .filter(|c| c.subject == "scheduler:slurmctld")
        .map(|c| (c.rule, c.summary))
        .collect::<Vec<_>>()
    };
    // The backfill at once; the agent queue only once it has held five minutes.
    assert_eq!(
        run(&ov, &mut st, &health),
        vec![(
            "backfill_slow",
            "slurmctld's backfill cycle took 25.0 s (over 20 s), 812 jobs deep".to_string()
        )]
    );
    ov.at_ms += 5 * 60_000;
    let later = run(&ov, &mut st, &health);
    assert!(
        later.iter().any(|(r, _)| *r == "agent_queue_high"),
        "{later:?}"
    );
    // Under the limits: nothing; and without a fresh read, no data (not clear).
    health.backfill.last_us = Some(900_000);
    health.agent_queue = Some(3);
    assert!(run(&ov, &mut st, &health).is_empty());
    let f = Facts::default();
    assert!(!has_data("backfill_slow", "scheduler:slurmctld", &f));
}
