//! `/racks`: the floor. Racks by row, each with power now against its limit, inlet
//! temperature and cooling; its nodes stacked by U, coloured by the metric chosen in the
//! URL (`?metric=power|temp|sm|throttle|state`), every colour paired with text. Racks over
//! or near their limit list the jobs drawing their power. Each node cell links to its page.
//!
//! Updates arrive as deltas; each node cell reads its own tile through a memo, so a tick
//! redraws only the nodes whose display changed.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::live::{NodeTile, Overview, RackTile, Severity};
use crate::model::NodeState;
use crate::pages::overview::{LiveView, NodeCells};
use crate::units;

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

fn node_summary(n: &NodeTile) -> String {
    format!(
        "{}: {}, {} power, hottest GPU {}, SM {}, {} of {} GPUs throttling{}",
        n.name,
        n.state.label(),
        units::power(n.power_watts),
        units::celsius(n.gpu_temp_max_celsius),
        units::percent(n.sm_active_mean),
        n.gpus_throttling,
        n.gpus,
        if n.jobs.is_empty() {
            String::new()
        } else {
            format!(
                ", jobs {}",
                n.jobs
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    )
}

/// A row of the floor: its name, and its racks (index into `racks`) with their nodes
/// (indices into `nodes`, top of the rack first).
type FloorRow = (String, Vec<(usize, Vec<usize>)>);

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
                s.racks.len(),
                s.nodes.len(),
                s.nodes.first().map(|n| n.name.clone()),
                s.nodes.last().map(|n| n.name.clone()),
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
        <div class="floor" class:stale=move || stale.get() data-metric=move || metric.get().key()>
            {move || shape.get().into_iter().map(|(row, racks)| view! {
                <section class="floor-row" aria-label=format!("Row {row}")>
                    <h2>{format!("Row {row}")}</h2>
                    <div class="floor-racks">
                        {racks.into_iter().map(|(ri, nodes)| view! { <FloorRack state ri nodes metric/> }).collect_view()}
                    </div>
                </section>
            }).collect_view()}
        </div>
    }
}

#[component]
fn FloorRack(
    state: RwSignal<Overview>,
    ri: usize,
    nodes: Vec<usize>,
    metric: Memo<Metric>,
) -> impl IntoView {
    let tile = Memo::new(move |_| state.with(|s| s.racks.get(ri).cloned()));
    let head = move || {
        tile.get().map(|r: RackTile| {
            let sev = r.severity();
            let pct = units::percent(r.load_ratio());
            let near = matches!(sev, Severity::Critical | Severity::Warning) && r.load_ratio().is_some_and(|x| x > 0.9);
            let word = match sev {
                Severity::Critical if r.load_ratio().is_some_and(|x| x > 1.0) => " · over limit",
                _ if near => " · near limit",
                _ => "",
            };
            let jobs = r.jobs.clone();
            view! {
                <header class=format!("floor-rack-head sev-{}", sev.label())
                    data-test="floor-rack-head"
                    data-power-watts=r.power_watts.map(|p| format!("{p:.1}")).unwrap_or_default()>
                    <strong class="rack-name">{r.name.clone()}</strong>
                    <span class="num">{units::power(r.power_watts)}" / "{units::power(Some(r.power_limit_watts))}" ("{pct}")"{word}</span>
                    <span class="muted">{format!("inlet {} · {}", units::celsius(r.inlet_celsius), match r.cooling { crate::model::Cooling::Air => "air", crate::model::Cooling::Liquid => "liquid" })}</span>
                    {(r.nodes_not_reporting > 0).then(|| view! {
                        <span class="rack-silent">{format!("power incomplete: {} not reporting", r.nodes_not_reporting)}</span>
                    })}
                    {(near && !jobs.is_empty()).then(|| view! {
                        <span class="rack-jobs" data-test="rack-jobs">
                            "drawing its power: "
                            {jobs.iter().take(5).map(|j| view! { <a href=format!("/jobs/{j}")>{format!("job {j}")}</a>" " }).collect_view()}
                        </span>
                    })}
                </header>
            }
        })
    };
    let name = move || tile.with(|t| t.as_ref().map(|r| r.name.clone()).unwrap_or_default());
    view! {
        <article class="floor-rack" data-test="floor-rack" data-rack=name aria-label=move || format!("Rack {}", name())>
            {head}
            <ol class="floor-nodes" aria-label="Nodes, top of the rack first">
                {nodes.into_iter().map(|i| view! { <FloorNode state i metric/> }).collect_view()}
            </ol>
        </article>
    }
}

/// What one node cell shows: compared as a whole, so a tick that changes nothing shown
/// touches nothing in the DOM.
#[derive(Clone, Debug, Default, PartialEq)]
struct CellView {
    bucket: Option<u8>,
    summary: String,
    value: String,
}

fn cell_view(n: &NodeTile, m: Metric) -> CellView {
    CellView {
        bucket: bucket(m, n),
        summary: node_summary(n),
        value: match m {
            Metric::Power => units::power(n.power_watts),
            Metric::Temp => units::celsius(n.gpu_temp_max_celsius),
            Metric::Sm => units::percent(n.sm_active_mean),
            Metric::Throttle => format!("{} thr", n.gpus_throttling),
            Metric::State => n.state.label().to_string(),
        },
    }
}

#[component]
fn FloorNode(state: RwSignal<Overview>, i: usize, metric: Memo<Metric>) -> impl IntoView {
    // The cell is built once; a tick changes only its class, label and value text, and only
    // when what it shows changed. One memo per cell computes all of it once per change of
    // the node's own signal (when the page has node cells, a tick touches only the nodes it
    // names), else of the whole overview.
    let cells = use_context::<NodeCells>().and_then(|c| c.get(i));
    let name = match cells {
        Some(c) => c.with_untracked(|n| n.name.clone()),
        None => {
            state.with_untracked(|s| s.nodes.get(i).map(|n| n.name.clone()).unwrap_or_default())
        }
    };
    let shown: Memo<CellView> = match cells {
        Some(c) => Memo::new(move |_| {
            let m = metric.get();
            c.with(|n| cell_view(n, m))
        }),
        None => Memo::new(move |_| {
            let m = metric.get();
            state.with(|s| s.nodes.get(i).map(|n| cell_view(n, m)).unwrap_or_default())
        }),
    };
    let bucket_of = move || shown.with(|v| v.bucket);
    let summary = move || shown.with(|v| v.summary.clone());
    view! {
        <li>
            <a class=move || match bucket_of() { Some(k) => format!("floor-node m{k}"), None => "floor-node none".into() }
                href=format!("/nodes/{name}") title=summary aria-label=summary
                data-test="floor-node" data-node=name.clone()
                data-bucket=move || bucket_of().map(|k| k.to_string()).unwrap_or_default()>
                <span class="floor-node-name">{name.clone()}</span>
                <span class="floor-node-value num">{move || shown.with(|v| v.value.clone())}</span>
            </a>
        </li>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
