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
                "under 250 W a GPU",
                "250–500 W",
                "500–690 W",
                "690–810 W",
                "over 810 W a GPU",
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

/// The power bands' edges, watts per GPU of the node.
const POWER_PER_GPU: [f64; 4] = [250.0, 500.0, 687.5, 812.5];

/// The colour bucket (0 to 4) of a node for a metric, or `None` when there is no value.
pub fn bucket(m: Metric, n: &NodeTile) -> Option<u8> {
    let cut = |x: f64, edges: [f64; 4]| edges.iter().filter(|&&e| x >= e).count() as u8;
    match m {
        // Per GPU the node holds, so an 8-GPU node and a 4-GPU NVL72 tray share one
        // scale (the bands were 2, 4, 5.5 and 6.5 kW for 8-GPU nodes, where every tray
        // fell in the lowest two); a node without GPUs on the 8-GPU node's kW.
        Metric::Power => n.power_watts.map(|p| {
            let per = if n.gpus > 0 {
                p / f64::from(n.gpus)
            } else {
                p / 8.0
            };
            cut(per, POWER_PER_GPU)
        }),
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

/// `/racks` coloured by `m`, of one hall or all, in wall mode or not.
fn racks_href(m: Metric, hall: Option<&str>, kiosk: bool) -> String {
    let mut href = format!("/racks?metric={}", m.key());
    if let Some(h) = hall {
        href.push_str("&hall=");
        href.push_str(&crate::nav::encode_component(h));
    }
    if kiosk {
        href.push_str("&kiosk=1");
    }
    href
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
    // On the wall the floor comes first: no metric chips, power shelves or NVLink trays
    // above it (their racks take their colours), the legend in one line.
    let kiosk = crate::kiosk();
    // One hall's floor (`?hall=H1`), the level below the fleet: only its racks are drawn.
    let hall = Memo::new(move |_| q.with(|q| q.get("hall")).filter(|h| !h.is_empty()));
    let halls = Memo::new(move |_| {
        state.with(|s| s.halls.iter().map(|h| h.name.clone()).collect::<Vec<_>>())
    });
    // A hall the URL names and the layout lacks (once the floor is known).
    let missing_hall = Memo::new(move |_| {
        hall.get()
            .filter(|h| halls.with(|all| !all.contains(h)) && state.with(|s| !s.racks.is_empty()))
    });
    let shown = move |r: &crate::live::RackTile, h: &Option<String>| {
        h.as_ref().is_none_or(|h| r.hall == *h)
    };
    // The floor's shape (rows, racks, which nodes where) changes only with a snapshot:
    // recomputed when the node or rack list changes, not on every tick.
    let shape_key = Memo::new(move |_| {
        let h = hall.get();
        state.with(|s| {
            (
                shape_of(
                    s.racks
                        .iter()
                        .filter(|r| shown(r, &h))
                        .map(|r| (&r.name, &r.row, r.position)),
                ),
                shape_of(s.nodes.iter().map(|n| (&n.name, &n.rack, n.u_position))),
            )
        })
    });
    let shape = Memo::new(move |_| {
        shape_key.track();
        let h = hall.get_untracked();
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
                if !shown(r, &h) {
                    continue;
                }
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
        <nav class="toolbar" aria-label="Colour nodes by" hidden=move || kiosk.get()>
            <span>"Colour nodes by:"</span>
            {Metric::ALL.into_iter().map(|m| view! {
                <a href=move || racks_href(m, hall.get().as_deref(), kiosk.get())
                    class=move || if metric.get() == m { "chip active" } else { "chip" }
                    aria-current=move || (metric.get() == m).then_some("true")>
                    {m.label()}
                </a>
            }).collect_view()}
        </nav>
        <nav class="toolbar" aria-label="Halls" data-test="hall-chips" hidden=move || halls.with(Vec::is_empty)>
            <span>"Hall:"</span>
            <a href=move || racks_href(metric.get(), None, kiosk.get())
                class=move || if hall.get().is_none() { "chip active" } else { "chip" }
                aria-current=move || (hall.get().is_none() && !halls.with(Vec::is_empty)).then_some("true")>"All"</a>
            {move || halls.get().into_iter().map(|h| {
                let here = h.clone();
                let current = Memo::new(move |_| hall.get().as_deref() == Some(here.as_str()));
                let to = h.clone();
                view! {
                    <a href=move || racks_href(metric.get(), Some(&to), kiosk.get())
                        class=move || if current.get() { "chip active" } else { "chip" }
                        aria-current=move || current.get().then_some("true")>{h}</a>
                }
            }).collect_view()}
        </nav>
        // Always in the page (hidden when the hall exists): a child that comes and goes
        // between the page's top-level elements breaks hydration.
        <p class="error" role="status" data-test="no-such-hall" hidden=move || missing_hall.get().is_none()>
            {move || missing_hall.get().map(|h| format!("No hall named \"{h}\" in the layout: ")).unwrap_or_default()}
            <a href="/racks">"the whole floor"</a>
        </p>
        <p class="legend" data-test="floor-legend" data-metric=move || metric.get().key()>
            {move || {
                let m = metric.get();
                m.legend().into_iter().enumerate().map(|(i, t)| view! {
                    <span class=format!("swatch m{i}")>{t}</span>
                }).collect_view()
            }}
            <span class="swatch none">"no reading"</span>
            {move || (metric.get() == Metric::Power).then(|| view! {
                <span class="muted">"Node power per GPU it holds: 2 kW is 250 W a GPU on an 8-GPU node, 500 W on a 4-GPU tray."</span>
            })}
        </p>
        <p class="legend marks-legend" data-test="floor-marks" hidden=move || kiosk.get()>
            <span class="mark-key hung">"running a hung job"</span>
            <span class="mark-key straggler">"a straggling GPU"</span>
            <span class="mark-key lemon">"RMA recommended"</span>
            <a href="/reliability">"Reliability"</a>
        </p>
        <div class="floor" node_ref=floor class:stale=move || stale.get() data-metric=move || metric.get().key()>
            <For each=move || [shape_key.get()] key=|k| *k children=draw/>
        </div>
        // After the floor, whose rack heads already name a shelf or a switch tray in
        // trouble: the floor starts above the fold (on NVL72 it began below these tables).
        <div hidden=move || kiosk.get()>
            {move || { let (racks, rows) = shelves.get(); view! { <shelves::Shelves racks rows/> } }}
            {move || { let (racks, rows) = fabric.get(); view! { <fabric::Fabric racks rows/> } }}
        </div>
    }
}

/// What the racks' tests draw from.
#[cfg(test)]
mod fixtures {
    use leptos::prelude::*;

    use crate::live::{NodeTile, RackTile};
    use crate::model::NodeState;

    /// What the server writes of `v`, without the renderer's hydration markers.
    pub(super) fn html(v: impl FnOnce() -> AnyView) -> String {
        Owner::new().with(|| v().to_html().replace("<!>", ""))
    }

    pub(super) fn n() -> NodeTile {
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

    pub(super) fn rack(name: &str) -> RackTile {
        RackTile {
            name: name.into(),
            row: "A".into(),
            hall: String::new(),
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
            incident: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::n;
    use super::*;

    /// A rack's open incident colours its head at least as bad as the incident, and says
    /// what and where in its words; without one the rack keeps its power colour.
    #[test]
    fn a_rack_takes_the_colour_of_its_worst_incident() {
        let mut r = super::fixtures::rack("B02");
        r.power_watts = Some(5_000.0);
        assert_eq!(r.severity(), crate::live::Severity::Ok);
        r.incident = Some(crate::live::RackIncident {
            severity: "critical".into(),
            words: "gpu038: double-bit ECC errors on GPU 3".into(),
            link: "/nodes/gpu038".into(),
            count: 2,
        });
        assert_eq!(r.severity(), crate::live::Severity::Critical);
        let head = floor::head_view(&r);
        assert_eq!(head.severity, "critical");
        assert!(
            head.inlet
                .ends_with(" · critical incident: gpu038: double-bit ECC errors on GPU 3"),
            "{}",
            head.inlet
        );
        // A warning incident on a rack over its limit: still critical (the worse).
        let mut over = super::fixtures::rack("B03");
        over.power_watts = Some(21_000.0);
        over.incident = Some(crate::live::RackIncident {
            severity: "warning".into(),
            ..Default::default()
        });
        assert_eq!(over.severity(), crate::live::Severity::Critical);
        over.power_watts = Some(1_000.0);
        assert_eq!(over.severity(), crate::live::Severity::Warning);
    }

    #[test]
    fn buckets_follow_the_legend() {
        assert_eq!(bucket(Metric::Power, &n()), Some(3));
        // Scaled per node type: a 4-GPU tray at 2.5 kW works as hard as an 8-GPU node at
        // 5 kW; both were "2-4 kW" and "4-5.5 kW" before, the tray among the idle blues.
        let tray = NodeTile {
            gpus: 4,
            power_watts: Some(2_500.0),
            ..n()
        };
        let node = NodeTile {
            power_watts: Some(5_000.0),
            ..n()
        };
        assert_eq!(bucket(Metric::Power, &tray), Some(2));
        assert_eq!(bucket(Metric::Power, &tray), bucket(Metric::Power, &node));
        let idle_tray = NodeTile {
            power_watts: Some(800.0),
            ..tray.clone()
        };
        assert_eq!(bucket(Metric::Power, &idle_tray), Some(0));
        assert_eq!(bucket(Metric::Temp, &n()), Some(4));
        assert_eq!(bucket(Metric::Sm, &n()), Some(3));
        assert_eq!(bucket(Metric::Throttle, &n()), Some(2));
        assert_eq!(bucket(Metric::State, &n()), Some(1));
        let mut silent = n();
        silent.power_watts = None;
        assert_eq!(bucket(Metric::Power, &silent), None, "missing is not zero");
        assert_eq!(Metric::parse("nonsense"), Metric::Power);
    }
}
