//! `/racks`: the floor. Racks by row, each with power now against its limit, inlet
//! temperature and cooling; its nodes stacked by U, coloured by the metric chosen in the
//! URL (`?metric=power|temp|sm|throttle|state`), every colour paired with text. Racks over
//! or near their limit list the jobs drawing their power. Each node cell links to its page.
//!
//! The floor (`floor`) is rendered once per shape (which racks and nodes where). Updates
//! arrive as deltas; in the browser one painter per floor (`paint`) compares each tick's
//! tiles with what every cell and rack head shows and writes only what differs. Above the
//! floor, rack-scale racks' power shelves (`shelves`) and NVLink switch trays (`fabric`),
//! each a section (`section`) rendered again only when what it shows changes; liquid
//! racks' coolant (`coolant`) shows in their heads.

mod coolant;
mod fabric;
mod floor;
#[cfg(feature = "hydrate")]
mod paint;
mod section;
mod shelves;

pub(crate) use coolant::tenths;

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::live::{shape_of, LiveView, NodeTile, Overview};
use crate::model::NodeState;
use floor::FloorRow;

/// What the node cells are coloured by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Power,
    Temp,
    Sm,
    Throttle,
    State,
}

impl Metric {
    const ALL: [Metric; 5] = [
        Metric::Power,
        Metric::Temp,
        Metric::Sm,
        Metric::Throttle,
        Metric::State,
    ];

    fn key(self) -> &'static str {
        match self {
            Metric::Power => "power",
            Metric::Temp => "temp",
            Metric::Sm => "sm",
            Metric::Throttle => "throttle",
            Metric::State => "state",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Metric::Power => "Node power",
            Metric::Temp => "Hottest GPU",
            Metric::Sm => "SM activity",
            Metric::Throttle => "GPUs throttling",
            Metric::State => "Slurm state",
        }
    }

    fn parse(s: &str) -> Metric {
        Metric::ALL
            .into_iter()
            .find(|m| m.key() == s)
            .unwrap_or(Metric::Power)
    }

    /// The legend: bucket 0 to 4, with words.
    fn legend(self) -> [&'static str; 5] {
        match self {
            Metric::Power => [
                "under 2 kW",
                "2–4 kW",
                "4–5.5 kW",
                "5.5–6.5 kW",
                "over 6.5 kW",
            ],
            Metric::Temp => [
                "under 50 °C",
                "50–65 °C",
                "65–75 °C",
                "75–85 °C",
                "85 °C or more",
            ],
            Metric::Sm => ["under 20%", "20–40%", "40–60%", "60–80%", "80% or more"],
            Metric::Throttle => ["none", "1", "2–3", "4–6", "7–8"],
            Metric::State => ["idle", "allocated", "draining / drained", "down", "other"],
        }
    }
}

/// The colour bucket (0 to 4) of a node for a metric, or `None` when there is no value.
pub fn bucket(m: Metric, n: &NodeTile) -> Option<u8> {
    let cut = |x: f64, edges: [f64; 4]| edges.iter().filter(|&&e| x >= e).count() as u8;
    match m {
        Metric::Power => n
            .power_watts
            .map(|p| cut(p, [2000.0, 4000.0, 5500.0, 6500.0])),
        Metric::Temp => n
            .gpu_temp_max_celsius
            .map(|t| cut(t, [50.0, 65.0, 75.0, 85.0])),
        Metric::Sm => n.sm_active_mean.map(|s| cut(s, [0.2, 0.4, 0.6, 0.8])),
        Metric::Throttle => Some(cut(f64::from(n.gpus_throttling), [1.0, 2.0, 4.0, 7.0])),
        Metric::State => Some(match n.state {
            NodeState::Idle => 0,
            NodeState::Allocated | NodeState::Mixed => 1,
            NodeState::Draining | NodeState::Drained => 2,
            NodeState::Down | NodeState::NotResponding => 3,
            _ => 4,
        }),
    }
}

#[component]
pub fn RacksPage() -> impl IntoView {
    view! { <LiveView title="Racks" heading="Racks" body=|state, stale| view! { <Floor state stale/> }.into_any()/> }
}

#[component]
fn Floor(state: RwSignal<Overview>, stale: Memo<bool>) -> impl IntoView {
    let q = use_query_map();
    let metric =
        Memo::new(move |_| Metric::parse(&q.with(|q| q.get("metric").unwrap_or_default())));
    // The floor's shape (rows, racks, which nodes where) changes only with a snapshot:
    // recomputed when the node or rack list changes, not on every tick.
    let shape_key = Memo::new(move |_| {
        state.with(|s| {
            (
                shape_of(s.racks.iter().map(|r| (&r.name, &r.row, r.position))),
                shape_of(s.nodes.iter().map(|n| (&n.name, &n.rack, n.u_position))),
            )
        })
    });
    let shape = Memo::new(move |_| {
        shape_key.track();
        state.with_untracked(|s| {
            let rack_of: std::collections::HashMap<&str, usize> = s
                .racks
                .iter()
                .enumerate()
                .map(|(i, r)| (r.name.as_str(), i))
                .collect();
            let mut per_rack: Vec<Vec<usize>> = vec![Vec::new(); s.racks.len()];
            for (i, n) in s.nodes.iter().enumerate() {
                if let Some(&ri) = rack_of.get(n.rack.as_str()) {
                    per_rack[ri].push(i);
                }
            }
            let mut rows: Vec<FloorRow> = Vec::new();
            for (ri, mut nodes) in per_rack.into_iter().enumerate() {
                let r = &s.racks[ri];
                // Top of the rack first.
                nodes.sort_by_key(|&i| std::cmp::Reverse(s.nodes[i].u_position));
                match rows.iter_mut().find(|(name, _)| *name == r.row) {
                    Some((_, v)) => v.push((ri, nodes)),
                    None => rows.push((r.row.clone(), vec![(ri, nodes)])),
                }
            }
            for (_, v) in rows.iter_mut() {
                v.sort_by_key(|(ri, _)| s.racks[*ri].position);
            }
            rows
        })
    });
    let floor = NodeRef::<leptos::html::Div>::new();
    // In the browser one effect per floor brings it up to date on every tick.
    #[cfg(feature = "hydrate")]
    let painted = paint::Painted::new(floor);
    #[cfg(feature = "hydrate")]
    {
        Effect::new(move |_| {
            let m = metric.get();
            state.with(|s| painted.repaint(s, m));
        });
        Effect::new(move |_| {
            if let Some(el) = floor.get() {
                paint::watch_rows(&el, painted, state, metric);
            }
        });
    }
    // The floor of one shape: rendered afresh (never patched) when the shape changes, so
    // what the painter registers is what the DOM shows.
    let draw = move |_: (u64, u64)| {
        let rows = shape.get_untracked();
        let m = metric.get_untracked();
        #[cfg(feature = "hydrate")]
        painted.clear();
        state.with_untracked(|s| {
            floor::floor(s, &rows, m, &mut |p| {
                #[cfg(feature = "hydrate")]
                painted.register(p, m);
                #[cfg(not(feature = "hydrate"))]
                let _ = p;
            })
            .into_any()
        })
    };
    // The rack-scale sections follow no tick: compared every tick, rendered only when
    // what they show changes.
    let shelves = Memo::new(move |_| state.with(shelves::rows));
    let fabric = Memo::new(move |_| state.with(fabric::rows));
    view! {
        <nav class="toolbar" aria-label="Colour nodes by">
            <span>"Colour nodes by:"</span>
            {Metric::ALL.into_iter().map(|m| view! {
                <a href=format!("/racks?metric={}", m.key())
                    class=move || if metric.get() == m { "chip active" } else { "chip" }
                    aria-current=move || (metric.get() == m).then_some("true")>
                    {m.label()}
                </a>
            }).collect_view()}
        </nav>
        <p class="legend" data-test="floor-legend" data-metric=move || metric.get().key()>
            {move || {
                let m = metric.get();
                m.legend().into_iter().enumerate().map(|(i, t)| view! {
                    <span class=format!("swatch m{i}")>{t}</span>
                }).collect_view()
            }}
            <span class="swatch none">"no reading"</span>
        </p>
        <p class="legend marks-legend" data-test="floor-marks">
            <span class="mark-key hung">"running a hung job"</span>
            <span class="mark-key straggler">"a straggling GPU"</span>
            <span class="mark-key lemon">"RMA recommended"</span>
            <a href="/reliability">"Reliability"</a>
        </p>
        <div>
            {move || { let (racks, rows) = shelves.get(); view! { <shelves::Shelves racks rows/> } }}
            {move || { let (racks, rows) = fabric.get(); view! { <fabric::Fabric racks rows/> } }}
        </div>
        <div class="floor" node_ref=floor class:stale=move || stale.get() data-metric=move || metric.get().key()>
            <For each=move || [shape_key.get()] key=|k| *k children=draw/>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::floor::{cell, cell_view, floor, head_view, NARROW_NBSP};
    use super::*;
    use crate::live::{RackTile, Severity};

    /// What the server writes of `v`, without the renderer's hydration markers.
    fn html(v: impl FnOnce() -> AnyView) -> String {
        Owner::new().with(|| v().to_html().replace("<!>", ""))
    }

    fn n() -> NodeTile {
        NodeTile {
            name: "gpu001".into(),
            rack: "A01".into(),
            u_position: 1,
            u_height: 4,
            state: NodeState::Allocated,
            power_watts: Some(5_600.0),
            gpu_temp_max_celsius: Some(85.0),
            sm_active_mean: Some(0.79),
            gpus: 8,
            gpus_throttling: 3,
            jobs: vec![1],
            marks: 0,
        }
    }

    #[test]
    fn a_marked_cell_carries_its_marks_as_classes_and_words() {
        use crate::live::marks::{HUNG, LEMON, STRAGGLER};
        let mut node = n();
        node.marks = LEMON | STRAGGLER;
        let h = html(|| cell(&node, cell_view(&node, Metric::Sm)).into_any());
        assert!(h.starts_with(r#"<li><a href="#), "{h}");
        assert!(
            h.contains(r#" class="floor-node m3 straggler lemon">"#),
            "{h}"
        );
        assert!(
            h.contains("jobs 1, a straggling GPU, RMA recommended\""),
            "{h}"
        );
        node.marks = HUNG;
        let v = cell_view(&node, Metric::Sm);
        assert_eq!(v.class(), "floor-node m3 hung");
        assert!(
            v.summary.ends_with("jobs 1, running a hung job"),
            "{}",
            v.summary
        );
        // No marks, no words.
        node.marks = 0;
        let v = cell_view(&node, Metric::Sm);
        assert_eq!(v.class(), "floor-node m3");
        assert!(v.summary.ends_with("jobs 1"), "{}", v.summary);
    }

    #[test]
    fn a_cell_escapes_what_the_scheduler_names() {
        let mut hostile = n();
        hostile.name = r#"gpu"1'<img src=x onerror=alert(1)>&"#.into();
        let view = cell_view(&hostile, Metric::Power);
        let h = html(|| cell(&hostile, view).into_any());
        assert!(!h.contains("<img"), "{h}");
        let esc = "gpu&quot;1'&lt;img src=x onerror=alert(1)&gt;&amp;";
        let text = "gpu\"1'&lt;img src=x onerror=alert(1)&gt;&amp;";
        assert!(h.contains(&format!(r#"data-node="{esc}""#)), "{h}");
        let href = "/nodes/gpu%221%27%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E%26";
        assert!(h.contains(&format!(r#"href="{href}""#)), "{h}");
        // The summary in the title names the node too, escaped the same way.
        assert!(
            h.contains(&format!(r#"title="{esc}: allocated, 5.6 kW power"#)),
            "{h}"
        );
        // Every element opened is closed: the cell cannot spill into its neighbours.
        for tag in ["li", "a"] {
            assert_eq!(
                h.matches(&format!("<{tag}")).count(),
                h.matches(&format!("</{tag}>")).count(),
                "{tag}: {h}"
            );
        }
        assert_eq!(
            h,
            format!(
                r#"<li><a href="{href}" title="{esc}: allocated, 5.6 kW power, hottest GPU 85 °C, SM 79%, 3 of 8 GPUs throttling, jobs 1" data-test="floor-node" data-node="{esc}" data-bucket="3" class="floor-node m3">{text} 5.6{NARROW_NBSP}kW</a></li>"#
            )
        );
    }

    fn rack(name: &str) -> RackTile {
        RackTile {
            name: name.into(),
            row: "A".into(),
            position: 1,
            power_watts: Some(19_500.0),
            power_limit_watts: 20_000.0,
            inlet_celsius: Some(24.0),
            cooling: crate::model::Cooling::Air,
            gpus_throttling: 0,
            nodes_unavailable: 0,
            nodes_not_reporting: 0,
            gpu_temp_max_celsius: None,
            inlet_limit_celsius: 42.0,
            jobs: vec![7, 9],
            coolant: None,
            placement: None,
            shelves: None,
            fabric: None,
        }
    }

    #[test]
    fn the_floor_is_rendered_in_the_painters_order_with_names_escaped() {
        let hostile = r#"R"<b>&'"#;
        let mut s = Overview {
            racks: vec![rack("A01"), rack(hostile)],
            nodes: vec![n()],
            ..Overview::default()
        };
        s.racks[1].row = "B".into();
        s.racks[1].nodes_not_reporting = 2;
        s.racks[1].power_watts = None;
        let rows: Vec<FloorRow> = vec![
            ("A".into(), vec![(0, vec![0])]),
            ("B<".into(), vec![(1, vec![])]),
        ];
        let mut placed = Vec::new();
        let h = html(|| {
            floor(&s, &rows, Metric::Power, &mut |p| {
                placed.push(match p {
                    floor::Placed::Node { i, rack, at, .. } => (0, i, rack, at),
                    floor::Placed::Rack { ri, row, pos, .. } => (1, ri, row, pos),
                })
            })
            .into_any()
        });
        // Each rack and cell is told where it is, for the painter to find it.
        assert_eq!(placed, [(1, 0, 0, 0), (0, 0, 0, 0), (1, 1, 1, 0)]);
        let esc = "R&quot;&lt;b&gt;&amp;'";
        let text = "R\"&lt;b&gt;&amp;'";
        // The first rack is near its limit (97.5%): it names the jobs drawing its power.
        assert!(h.starts_with(concat!(
            r#"<section aria-label="Row A" class="floor-row"><h2>Row A</h2><div class="floor-racks">"#,
            r#"<article data-test="floor-rack" data-rack="A01" aria-label="Rack A01" class="floor-rack">"#,
            r#"<header data-test="floor-rack-head" data-power-watts="19500.0" class="floor-rack-head sev-warning">"#,
            r#"<strong class="rack-name">A01</strong><span class="num">19.5 kW / 20.0 kW (98%) · near limit</span>"#,
            r#"<span class="muted">inlet 24 °C · air</span><span hidden class="rack-silent"> </span>"#,
        )), "{h}");
        assert!(h.contains(r#"<span data-test="rack-jobs" class="rack-jobs">drawing its power: <a href="/jobs/7">job 7</a> <a href="/jobs/9">job 9</a> </span></header><ol aria-label="Nodes, top of the rack first" class="floor-nodes"><li><a href="/nodes/gpu001""#), "{h}");
        // The second: names escaped, silent nodes shown, no jobs (not near its limit).
        assert!(h.contains(&format!(
            r#"<section aria-label="Row B&lt;" class="floor-row"><h2>Row B&lt;</h2><div class="floor-racks"><article data-test="floor-rack" data-rack="{esc}" aria-label="Rack {esc}" class="floor-rack"><header data-test="floor-rack-head" data-power-watts="" class="floor-rack-head sev-"#
        )), "{h}");
        assert!(
            h.contains(&format!(r#"<strong class="rack-name">{text}</strong>"#)),
            "{h}"
        );
        assert!(h.contains(r#"<span class="rack-silent">power incomplete: 2 not reporting</span><span data-test="rack-jobs" hidden class="rack-jobs">drawing its power: </span></header><ol aria-label="Nodes, top of the rack first" class="floor-nodes"></ol></article></div></section>"#), "{h}");
        assert!(!h.contains("<b>"), "{h}");
        for tag in [
            "section", "h2", "div", "article", "header", "strong", "span", "ol", "li", "a",
        ] {
            assert_eq!(
                h.matches(&format!("<{tag}>")).count() + h.matches(&format!("<{tag} ")).count(),
                h.matches(&format!("</{tag}>")).count(),
                "{tag}: {h}"
            );
        }
    }

    #[test]
    fn buckets_follow_the_legend() {
        assert_eq!(bucket(Metric::Power, &n()), Some(3));
        assert_eq!(bucket(Metric::Temp, &n()), Some(4));
        assert_eq!(bucket(Metric::Sm, &n()), Some(3));
        assert_eq!(bucket(Metric::Throttle, &n()), Some(2));
        assert_eq!(bucket(Metric::State, &n()), Some(1));
        let mut silent = n();
        silent.power_watts = None;
        assert_eq!(bucket(Metric::Power, &silent), None, "missing is not zero");
        assert_eq!(Metric::parse("nonsense"), Metric::Power);
    }

    #[test]
    fn a_liquid_racks_head_leads_with_a_leak_then_its_coolant() {
        let mut r = rack("B06");
        r.cooling = crate::model::Cooling::Liquid;
        r.coolant = Some(crate::live::CoolantTile {
            supply_celsius: Some(30.04),
            return_celsius: Some(41.0),
            delta_t_celsius: Some(10.96),
            flow_lpm: Some(43.2),
            trays_reporting: 18,
            leak: crate::model::LeakState::Critical,
            leaking: vec!["gb0097".into(), "gb0098".into()],
            low_flow: vec!["gb0099".into()],
            flow_min_lpm: Some(4.5),
            delta_t_max_celsius: Some(10.0),
        });
        let v = head_view(&r);
        assert_eq!(
            v.inlet,
            "LEAK (Critical) at gb0097, gb0098 · coolant ΔT 11.0 °C (over limit) · flow 43.2 L/min · low flow at gb0099 · inlet 24 °C · liquid"
        );
        assert_eq!(v.severity, "critical");
        // Who runs in a leaking rack is shown, whatever its power.
        assert_eq!(v.jobs, vec![7, 9]);
    }

    #[test]
    fn the_shelves_section_lists_racks_in_trouble_with_names_escaped() {
        let mut ov = Overview::default();
        let mut ok = rack("A01");
        ok.shelves = Some(crate::live::ShelvesTile {
            expected: 8,
            reporting: 8,
            busbar_watts: 132_000.0,
            limit_watts: Some(132_000.0),
            ..Default::default()
        });
        ov.racks.push(ok.clone());
        let shelves_html = |ov: &Overview| {
            let (racks, rows) = shelves::rows(ov);
            html(|| view! { <shelves::Shelves racks rows/> }.into_any())
        };
        assert!(shelves_html(&ov)
            .contains("1 rack with power shelves: every shelf reporting and delivering."));
        let mut bad = rack("A<2");
        bad.power_watts = Some(63_000.0);
        bad.power_limit_watts = 99_000.0;
        bad.shelves = Some(crate::live::ShelvesTile {
            expected: 8,
            reporting: 8,
            down: vec!["Shelf<b>".into()],
            busbar_watts: 132_000.0,
            limit_watts: Some(99_000.0),
            ..Default::default()
        });
        ov.racks.push(bad);
        let h = shelves_html(&ov);
        assert!(h.contains(r#"<tr data-rack="A&lt;2" class="warn"><th scope="row">A&lt;2</th><td data-test="shelves-state">7 of 8 delivering; down: Shelf&lt;b&gt;</td>"#), "{h}");
        assert!(
            h.contains(r#"data-limit-watts="99000" class="num">99.0 kW (132.0 kW)"#),
            "{h}"
        );
        assert!(h.contains(r#"<section aria-labelledby="shelves" class="shelves"><h2 id="shelves">Power shelves</h2><table aria-labelledby="shelves" data-test="shelves" class="grid compact">"#), "{h}");
        assert!(
            !h.contains("A01"),
            "a rack whose shelves are well is not listed"
        );
        // No shelves anywhere: nothing.
        assert!(!shelves_html(&Overview::default()).contains("<section"));
    }
    #[test]
    fn the_fabric_section_lists_racks_with_switch_trays_in_trouble_with_names_escaped() {
        let mut ov = Overview::default();
        let mut ok = rack("A01");
        ok.fabric = Some(crate::live::FabricTile {
            expected: 9,
            reporting: 9,
            links: 1296,
            active: 1296,
            ..Default::default()
        });
        ov.racks.push(ok.clone());
        let fabric_html = |ov: &Overview| {
            let (racks, rows) = fabric::rows(ov);
            html(|| view! { <fabric::Fabric racks rows/> }.into_any())
        };
        assert!(fabric_html(&ov).contains(
            "1 rack with NVLink switch trays: every switch tray reporting, every GPU link active."
        ));
        assert_eq!(fabric::fabric_words(ok.fabric.as_ref().expect("tile")), "");
        let mut bad = rack("A<2");
        bad.fabric = Some(crate::live::FabricTile {
            expected: 9,
            reporting: 9,
            links: 1296,
            active: 1152,
            down: vec!["sw<4>".into()],
            cut: vec!["gb0001".into(), "tray 3".into()],
            ..Default::default()
        });
        let mut node = n();
        node.name = "gb0001".into();
        node.jobs = vec![1042];
        ov.nodes.push(node);
        ov.racks.push(bad.clone());
        let h = fabric_html(&ov);
        assert!(h.contains(r#"<tr data-rack="A&lt;2" class="crit"><th scope="row">A&lt;2</th><td data-test="fabric-state">8 of 9 up; down: sw&lt;4&gt;</td><td data-test="fabric-links" class="num">1152 of 1296</td><td data-test="fabric-cut"><a href="/nodes/gb0001" data-node="gb0001">gb0001</a>, tray 3</td><td data-test="fabric-jobs"><a href="/jobs/1042" data-job="1042">job 1042</a> </td>"#), "{h}");
        assert!(
            !h.contains("A01"),
            "a rack whose fabric is well is not listed"
        );
        assert_eq!(
            fabric::fabric_words(bad.fabric.as_ref().expect("tile")),
            " · NVLink switch tray down: sw<4>"
        );
        assert_eq!(bad.severity(), Severity::Critical);
        assert!(!fabric_html(&Overview::default()).contains("<section"));
    }
}
