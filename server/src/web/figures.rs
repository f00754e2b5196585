//! Gantry's derived figures as Prometheus text (`GET /metrics/cluster`): what Gantry
//! computes and no exporter gives, for a site's own Prometheus and Grafana. Gantry's
//! process metrics stay on `/metrics`.
//!
//! Names follow Prometheus's conventions: a `gantry_` prefix, the base unit as a suffix
//! (`_watts`, `_celsius`, `_ratio`, `_seconds`), `_total` only for counters, labels for
//! what varies (`rack`, `row`, `domain`, `kind`, `reason`, `state`). A value that is
//! missing (a rack whose nodes do not report) is left out, never written as 0. Pure: the
//! overview and the throttling per reason in, text out.

use std::fmt::Write;

use app::live::Overview;
use app::model::{DomainKind, UnixMs};

use crate::aggregate::REASONS;

/// A label value as the text format escapes it: backslash, double quote and line feed.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn kind(k: DomainKind) -> &'static str {
    match k {
        DomainKind::Nvlink => "nvlink",
        DomainKind::Leaf => "leaf",
        DomainKind::Spine => "spine",
        DomainKind::Block => "block",
    }
}

struct Out(String);

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: f64) {
        if !v.is_finite() {
            return;
        }
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"{}\"", escape(val));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {v}");
    }
}

/// The figures of `ov`, with each scope's GPUs throttling per reason (`by_reason`: scope
/// `cluster` or `rack:NAME`, counts in the order of [`REASONS`]), as of `now_ms`.
pub fn render(ov: &Overview, by_reason: &[(String, [u32; 5])], now_ms: UnixMs) -> String {
    let mut o = Out(String::with_capacity(
        256 + 512 * (ov.racks.len() + ov.domains.len()),
    ));
    o.family(
        "gantry_data_age_seconds",
        "gauge",
        "Seconds since the figures below were published (stale past two live intervals).",
    );
    o.sample(
        "gantry_data_age_seconds",
        &[],
        (now_ms - ov.published_ms).max(0) as f64 / 1000.0,
    );
    o.family(
        "gantry_live_interval_seconds",
        "gauge",
        "How often the figures are published.",
    );
    o.sample(
        "gantry_live_interval_seconds",
        &[],
        ov.interval_ms as f64 / 1000.0,
    );

    let g = &ov.summary.gpus;
    o.family(
        "gantry_cluster_gpus",
        "gauge",
        "The cluster's GPUs by state: allocated, idle, drained (on drained or draining nodes, not allocated), down.",
    );
    for (state, n) in [
        ("allocated", g.allocated),
        ("idle", g.idle),
        ("drained", g.drained),
        ("down", g.down),
    ] {
        o.sample("gantry_cluster_gpus", &[("state", state)], f64::from(n));
    }
    o.family(
        "gantry_job_gpus_held_idle",
        "gauge",
        "A running job's GPUs idle past alerts.idle_gpu_minutes (SM activity under the threshold, no memory in use); only jobs holding some.",
    );
    for h in &ov.idle {
        let job = h.job.to_string();
        o.sample(
            "gantry_job_gpus_held_idle",
            &[("job", &job)],
            f64::from(h.gpus),
        );
    }
    o.family(
        "gantry_job_gpu_hours_held_idle",
        "gauge",
        "GPU-hours those GPUs sat idle so far.",
    );
    for h in &ov.idle {
        let job = h.job.to_string();
        o.sample(
            "gantry_job_gpu_hours_held_idle",
            &[("job", &job)],
            h.gpu_hours,
        );
    }
    o.family(
        "gantry_cluster_power_watts",
        "gauge",
        "The cluster's power now, the sum of its racks'.",
    );
    o.sample("gantry_cluster_power_watts", &[], ov.summary.power_watts);
    o.family(
        "gantry_cluster_power_limit_watts",
        "gauge",
        "The sum of the racks' power limits.",
    );
    o.sample(
        "gantry_cluster_power_limit_watts",
        &[],
        ov.summary.power_capacity_watts,
    );
    o.family(
        "gantry_cluster_sm_active_ratio",
        "gauge",
        "Mean SM activity of the cluster's reporting GPUs, 0 to 1.",
    );
    if let Some(sm) = ov.summary.sm_active_mean {
        o.sample("gantry_cluster_sm_active_ratio", &[], sm);
    }
    o.family(
        "gantry_alerts_firing",
        "gauge",
        "Alerts firing and not silenced.",
    );
    o.sample(
        "gantry_alerts_firing",
        &[],
        f64::from(ov.summary.alerts_firing),
    );
    o.family(
        "gantry_throttle_lost_gpu_hours_total",
        "counter",
        "GPU-hours lost to throttling (clock deficit times time) since this server started leading.",
    );
    o.sample(
        "gantry_throttle_lost_gpu_hours_total",
        &[],
        ov.thermal.lost_gpu_hours,
    );

    type RackValue = fn(&app::live::RackTile) -> Option<f64>;
    let rack_families: [(&str, &str, RackValue); 4] = [
        (
            "gantry_rack_power_watts",
            "A rack's power now; left out when none of its nodes report.",
            |r| r.power_watts,
        ),
        (
            "gantry_rack_power_limit_watts",
            "A rack's power budget (the layout's limit).",
            |r| Some(r.power_limit_watts),
        ),
        (
            "gantry_rack_nodes_not_reporting",
            "A rack's nodes up in the scheduler without a fresh power reading: its power is then a lower bound.",
            |r| Some(f64::from(r.nodes_not_reporting)),
        ),
        (
            "gantry_rack_inlet_celsius",
            "A rack's inlet air temperature; left out when not reported.",
            |r| r.inlet_celsius,
        ),
    ];
    for (name, help, value) in rack_families {
        o.family(name, "gauge", help);
        for r in &ov.racks {
            if let Some(v) = value(r) {
                // Where the layout names halls, each rack says its hall too (for `sum by (hall)`).
                if r.hall.is_empty() {
                    o.sample(name, &[("rack", &r.name), ("row", &r.row)], v);
                } else {
                    o.sample(
                        name,
                        &[("rack", &r.name), ("row", &r.row), ("hall", &r.hall)],
                        v,
                    );
                }
            }
        }
    }
    halls(&mut o, &ov.halls);
    o.family(
        "gantry_gpus_throttling",
        "gauge",
        "GPUs throttling now per reason (DCGM's throttle reasons; a GPU counts under each of its reasons), for the cluster (rack=\"\") and each rack.",
    );
    for (scope, counts) in by_reason {
        let rack = scope.strip_prefix("rack:").unwrap_or("");
        for ((_, reason), n) in REASONS.iter().zip(counts) {
            o.sample(
                "gantry_gpus_throttling",
                &[("rack", rack), ("reason", reason)],
                f64::from(*n),
            );
        }
    }

    type DomainValue = fn(&app::live::DomainTile) -> Option<f64>;
    let domain_families: [(&str, &str, DomainValue); 4] = [
        (
            "gantry_domain_gpus",
            "A switch domain's GPUs (NVLink domains of several nodes, leaves, spines, blocks).",
            |d| Some(f64::from(d.gpus.total)),
        ),
        (
            "gantry_domain_gpus_allocated",
            "A switch domain's GPUs allocated to jobs.",
            |d| Some(f64::from(d.gpus.allocated)),
        ),
        (
            "gantry_domain_sm_active_ratio",
            "Mean SM activity of a switch domain's reporting GPUs, 0 to 1.",
            |d| d.sm_active_mean,
        ),
        (
            "gantry_domain_free_whole",
            "1 when every node of the domain is idle and schedulable (a whole domain a large job could have).",
            |d| Some(if d.free_whole { 1.0 } else { 0.0 }),
        ),
    ];
    for (name, help, value) in domain_families {
        o.family(name, "gauge", help);
        for d in &ov.domains {
            if let Some(v) = value(d) {
                o.sample(name, &[("domain", &d.name), ("kind", kind(d.kind))], v);
            }
        }
    }

    // Free capacity in segments, per block topology (its base block names it).
    if !ov.segments.is_empty() {
        o.family(
            "gantry_free_segments",
            "gauge",
            "Segments of each size (--segment, in nodes) that could start now, summed over a block topology's blocks (base: its base block's nodes).",
        );
        for sf in &ov.segments {
            let base = sf.base.to_string();
            for (size, n, _) in &sf.sizes {
                o.sample(
                    "gantry_free_segments",
                    &[("base", &base), ("size", &size.to_string())],
                    f64::from(*n),
                );
            }
        }
        o.family(
            "gantry_largest_free_segment_nodes",
            "gauge",
            "The largest segment, in nodes, that could start now in a block topology.",
        );
        for sf in &ov.segments {
            o.sample(
                "gantry_largest_free_segment_nodes",
                &[("base", &sf.base.to_string())],
                f64::from(sf.largest_free_segment),
            );
        }
    }

    // The floor's marks: nodes the radar and the lemon ranking flag now.
    use app::live::marks::{HUNG, LEMON, STRAGGLER};
    let marks = [("lemon", LEMON), ("straggler", STRAGGLER), ("hung", HUNG)];
    o.family(
        "gantry_nodes_marked",
        "gauge",
        "Nodes marked on the floor now: mark=\"lemon\" (RMA recommended), \"straggler\" (a GPU under its job's peers), \"hung\" (running a hung job).",
    );
    for (mark, bit) in marks {
        let n = ov.nodes.iter().filter(|t| t.marks & bit != 0).count();
        o.sample("gantry_nodes_marked", &[("mark", mark)], n as f64);
    }
    o.family(
        "gantry_node_marked",
        "gauge",
        "1 for each node and mark it carries now (only marked nodes are listed).",
    );
    for t in ov.nodes.iter().filter(|t| t.marks != 0) {
        for (mark, bit) in marks {
            if t.marks & bit != 0 {
                o.sample(
                    "gantry_node_marked",
                    &[("node", &t.name), ("mark", mark)],
                    1.0,
                );
            }
        }
    }
    o.0
}

/// The fleet level: each data hall's power against its feed, GPUs by state, throttling
/// and SM activity (nothing where the layout names no halls).
fn halls(o: &mut Out, halls: &[app::live::HallTile]) {
    if halls.is_empty() {
        return;
    }
    type HallValue = fn(&app::live::HallTile) -> Option<f64>;
    let families: [(&str, &str, HallValue); 5] = [
        (
            "gantry_hall_power_watts",
            "A data hall's power now: the sum of its racks' (a lower bound where some do not report).",
            |h| Some(h.power_watts),
        ),
        (
            "gantry_hall_power_feed_watts",
            "A data hall's power feed (the layout's); left out when it gives none.",
            |h| h.power_feed_watts,
        ),
        (
            "gantry_hall_gpus_throttling",
            "A data hall's GPUs throttling now.",
            |h| Some(f64::from(h.gpus_throttling)),
        ),
        (
            "gantry_hall_sm_active_ratio",
            "A data hall's mean SM activity over its allocated GPUs with a reading, 0 to 1; left out when none.",
            |h| h.sm_active_mean,
        ),
        (
            "gantry_hall_nodes_not_reporting",
            "A data hall's nodes up without a fresh power reading.",
            |h| Some(f64::from(h.nodes_not_reporting)),
        ),
    ];
    for (name, help, value) in families {
        o.family(name, "gauge", help);
        for h in halls {
            if let Some(v) = value(h) {
                o.sample(name, &[("hall", &h.name)], v);
            }
        }
    }
    o.family(
        "gantry_hall_gpus",
        "gauge",
        "A data hall's GPUs by state (allocated, idle, drained, down; they sum to its GPUs).",
    );
    for h in halls {
        for (state, n) in [
            ("allocated", h.gpus.allocated),
            ("idle", h.gpus.idle),
            ("drained", h.gpus.drained),
            ("down", h.gpus.down),
        ] {
            o.sample(
                "gantry_hall_gpus",
                &[("hall", &h.name), ("state", state)],
                f64::from(n),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_as_the_format_says() {
        assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape("a\nb"), "a\\nb");
    }

    #[test]
    fn the_text_parses_with_gantrys_own_parser_and_leaves_missing_out() {
        let mut ov = Overview {
            published_ms: 1_000,
            interval_ms: 1_000,
            ..Overview::default()
        };
        ov.summary.power_watts = 1234.5;
        ov.racks.push(app::live::RackTile {
            name: "R\"1".into(),
            row: "A".into(),
            hall: String::new(),
            position: 1,
            power_watts: None,
            power_limit_watts: 40_000.0,
            inlet_celsius: Some(24.5),
            cooling: app::model::Cooling::Air,
            gpus_throttling: 0,
            nodes_unavailable: 0,
            nodes_not_reporting: 8,
            gpu_temp_max_celsius: None,
            inlet_limit_celsius: 35.0,
            jobs: vec![],
            coolant: None,
            placement: None,
            shelves: None,
            fabric: None,
            incident: None,
        });
        ov.segments.push(app::live::SegmentFree {
            base: 18,
            blocks: 2,
            idle_nodes: 20,
            largest_free_segment: 16,
            sizes: vec![(16, 1, 4), (8, 2, 4)],
            pending: (0, 0, 0),
        });
        for (name, marks) in [
            ("t1", 0),
            ("t2", app::live::marks::LEMON | app::live::marks::HUNG),
        ] {
            ov.nodes.push(app::live::NodeTile {
                name: name.into(),
                rack: "R\"1".into(),
                u_position: 1,
                u_height: 1,
                state: app::model::NodeState::Allocated,
                power_watts: None,
                gpu_temp_max_celsius: None,
                sm_active_mean: None,
                gpus: 4,
                gpus_throttling: 0,
                jobs: vec![],
                marks,
            });
        }
        ov.idle.push(app::queue::IdleHeld {
            job: 42,
            gpus: 4,
            of: 8,
            since_ms: 0,
            gpu_hours: 2.5,
        });
        let text = render(&ov, &[("rack:R\"1".into(), [0, 2, 0, 0, 1])], 3_500);
        type Parsed = (String, Vec<(String, String)>, f64);
        let mut samples: Vec<Parsed> = Vec::new();
        let report = crate::telemetry::exposition::parse(text.as_bytes(), |s| {
            samples.push((
                s.name.to_string(),
                s.labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                s.value,
            ))
        });
        assert!(report.errors.is_empty(), "{:?}\n{text}", report.errors);
        let get = |name: &str, label: Option<(&str, &str)>| {
            samples
                .iter()
                .find(|(n, labels, _)| {
                    n == name
                        && label
                            .is_none_or(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
                })
                .map(|s| s.2)
        };
        assert_eq!(get("gantry_data_age_seconds", None), Some(2.5));
        assert_eq!(
            get("gantry_job_gpus_held_idle", Some(("job", "42"))),
            Some(4.0)
        );
        assert_eq!(
            get("gantry_job_gpu_hours_held_idle", Some(("job", "42"))),
            Some(2.5)
        );
        assert_eq!(get("gantry_cluster_power_watts", None), Some(1234.5));
        assert_eq!(
            get("gantry_rack_power_watts", None),
            None,
            "missing is left out"
        );
        assert_eq!(
            get("gantry_rack_power_limit_watts", Some(("rack", "R\"1"))),
            Some(40_000.0)
        );
        assert_eq!(
            get("gantry_gpus_throttling", Some(("reason", "sw_thermal"))),
            Some(2.0)
        );
        assert_eq!(get("gantry_free_segments", Some(("size", "8"))), Some(2.0));
        assert_eq!(get("gantry_largest_free_segment_nodes", None), Some(16.0));
        assert_eq!(
            get("gantry_nodes_marked", Some(("mark", "lemon"))),
            Some(1.0)
        );
        assert_eq!(
            get("gantry_nodes_marked", Some(("mark", "straggler"))),
            Some(0.0)
        );
        let marked: Vec<(&str, &str)> = samples
            .iter()
            .filter(|s| s.0 == "gantry_node_marked")
            .filter_map(|s| {
                let l = |k: &str| s.1.iter().find(|(lk, _)| lk == k).map(|(_, v)| v.as_str());
                Some((l("node")?, l("mark")?))
            })
            .collect();
        assert_eq!(marked, [("t2", "lemon"), ("t2", "hung")]);
    }

    #[test]
    fn halls_are_a_level_of_their_own_and_racks_name_theirs() {
        let mut ov = Overview::default();
        let rack = |name: &str, hall: &str| app::live::RackTile {
            name: name.into(),
            row: "A".into(),
            hall: hall.into(),
            position: 0,
            power_watts: Some(30_000.0),
            power_limit_watts: 40_000.0,
            inlet_celsius: None,
            cooling: app::model::Cooling::Air,
            gpus_throttling: 0,
            nodes_unavailable: 0,
            nodes_not_reporting: 0,
            gpu_temp_max_celsius: None,
            inlet_limit_celsius: 35.0,
            jobs: vec![],
            coolant: None,
            placement: None,
            shelves: None,
            fabric: None,
            incident: None,
        };
        ov.racks.push(rack("A01", "H1"));
        ov.halls.push(app::live::HallTile {
            name: "H1".into(),
            power_watts: 30_000.0,
            power_feed_watts: Some(34_000.0),
            gpus: app::live::GpuCounts {
                total: 64,
                allocated: 40,
                idle: 16,
                drained: 8,
                down: 0,
            },
            sm_active_mean: None,
            ..Default::default()
        });
        let text = render(&ov, &[], 0);
        let mut samples: Vec<String> = Vec::new();
        let report = crate::telemetry::exposition::parse(text.as_bytes(), |s| {
            let mut labels: Vec<String> =
                s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            labels.sort();
            samples.push(format!("{}{{{}}} {}", s.name, labels.join(","), s.value));
        });
        assert!(report.errors.is_empty(), "{:?}\n{text}", report.errors);
        for want in [
            "gantry_rack_power_watts{hall=H1,rack=A01,row=A} 30000",
            "gantry_hall_power_watts{hall=H1} 30000",
            "gantry_hall_power_feed_watts{hall=H1} 34000",
            "gantry_hall_gpus{hall=H1,state=allocated} 40",
            "gantry_hall_gpus{hall=H1,state=drained} 8",
            "gantry_hall_gpus{hall=H1,state=down} 0",
        ] {
            assert!(
                samples.iter().any(|s| s == want),
                "{want} not in {samples:#?}"
            );
        }
        assert!(
            !samples
                .iter()
                .any(|s| s.starts_with("gantry_hall_sm_active_ratio")),
            "no reading: left out"
        );
        // Without halls, no hall families and no hall label.
        let text = render(
            &Overview {
                racks: vec![rack("A01", "")],
                ..Overview::default()
            },
            &[],
            0,
        );
        assert!(
            !text.contains("gantry_hall_") && !text.contains("hall="),
            "{text}"
        );
    }
}
