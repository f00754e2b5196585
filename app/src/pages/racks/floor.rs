//! The floor of `/racks`: rows of racks, each rack's head (power against its limit,
//! cooling, silent nodes, the jobs drawing its power) and its node cells stacked by U,
//! coloured by the metric chosen. Rendered once per shape (which racks and nodes where),
//! with no reactive binding per cell or head: in the browser one painter brings them up
//! to date on every tick (see `paint`), finding each part by its place, so the markup
//! here is the same for every rack and cell.

use leptos::prelude::*;

use super::coolant::coolant_words;
use super::fabric::fabric_words;
use super::shelves::shelf_words;
use super::{bucket, Metric};
use crate::live::{NodeTile, Overview, RackTile, Severity};
use crate::units;

/// A row of the floor: its name, and its racks (index into `racks`) with their nodes
/// (indices into `nodes`, top of the rack first).
pub(super) type FloorRow = (String, Vec<(usize, Vec<usize>)>);

/// A rack or node cell as it is rendered, with where it is: what the painter registers.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
pub(super) enum Placed<'a> {
    /// Node `i` of the overview, the `at`-th cell of rack `rack`.
    Node {
        i: usize,
        rack: usize,
        at: usize,
        tile: &'a NodeTile,
        view: &'a CellView,
    },
    /// Rack `ri` of the overview, the `pos`-th of the floor's `row`-th row.
    Rack {
        ri: usize,
        row: usize,
        pos: usize,
        tile: &'a RackTile,
        head: &'a HeadView,
    },
}

/// The floor: `rows` of racks with their cells coloured by `m`. Each rack and node is
/// told to `placed` as it is rendered.
pub(super) fn floor(
    s: &Overview,
    rows: &[FloorRow],
    m: Metric,
    placed: &mut dyn FnMut(Placed),
) -> impl IntoView {
    rows.iter()
        .enumerate()
        .map(|(row_at, (row, racks))| {
            let racks = racks
                .iter()
                .filter_map(|(ri, nodes)| Some((*ri, s.racks.get(*ri)?, nodes)))
                .enumerate()
                .map(|(pos, (ri, r, nodes))| {
                    let head = head_view(r);
                    placed(Placed::Rack {
                        ri,
                        row: row_at,
                        pos,
                        tile: r,
                        head: &head,
                    });
                    let cells = nodes
                        .iter()
                        .filter_map(|&i| Some((i, s.nodes.get(i)?)))
                        .enumerate()
                        .map(|(at, (i, n))| {
                            let view = cell_view(n, m);
                            placed(Placed::Node {
                                i,
                                rack: ri,
                                at,
                                tile: n,
                                view: &view,
                            });
                            cell(n, view)
                        })
                        .collect_view();
                    rack(&r.name, head, cells)
                })
                .collect_view();
            let label = format!("Row {row}");
            let aria = label.clone();
            view! {
                <section class="floor-row" aria-label=aria>
                    <h2>{label}</h2>
                    <div class="floor-racks">{racks}</div>
                </section>
            }
        })
        .collect_view()
}

/// A rack: its head, then its list of cells. The head's children are the rack's name,
/// power, inlet, silent nodes and jobs, in that order (the painter finds them so).
fn rack(name: &str, v: HeadView, cells: impl IntoView) -> impl IntoView {
    let class = v.class();
    let silent = v.silent();
    let (quiet, idle) = (v.not_reporting == 0, v.jobs.is_empty());
    view! {
        <article class="floor-rack" data-test="floor-rack" data-rack=name.to_string() aria-label=format!("Rack {name}")>
            <header class=class data-test="floor-rack-head" data-power-watts=v.power_attr>
                <strong class="rack-name">{name.to_string()}</strong>
                <span class="num">{v.power}</span>
                <span class="muted">{v.inlet}</span>
                <span class="rack-silent" hidden=quiet>{silent}</span>
                <span class="rack-jobs" data-test="rack-jobs" hidden=idle>
                    {JOBS_LEAD}
                    {v.jobs.into_iter().map(|j| view! { <a href=format!("/jobs/{j}")>{format!("job {j}")}</a>" " }).collect_view()}
                </span>
            </header>
            <ol class="floor-nodes" aria-label="Nodes, top of the rack first">{cells}</ol>
        </article>
    }
}

/// One node cell: `li > a > text`, name and value one text node (the painter writes its
/// text): three DOM nodes and three layout boxes per cell, not five and six.
pub(super) fn cell(n: &NodeTile, v: CellView) -> impl IntoView {
    let (class, bucket) = (v.class(), v.bucket_attr());
    view! {
        <li>
            <a class=class href=units::node_href(&n.name) title=v.summary data-test="floor-node" data-node=n.name.clone() data-bucket=bucket>
                {v.text}
            </a>
        </li>
    }
}

/// What a rack's head shows, compared as a whole like a node cell's.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct HeadView {
    pub(super) severity: &'static str,
    pub(super) power_attr: String,
    pub(super) power: String,
    pub(super) inlet: String,
    pub(super) not_reporting: u32,
    /// The jobs drawing its power, when it is over or near its limit.
    pub(super) jobs: Vec<u64>,
}

impl HeadView {
    pub(super) fn class(&self) -> String {
        format!("floor-rack-head sev-{}", self.severity)
    }

    pub(super) fn silent(&self) -> String {
        if self.not_reporting == 0 {
            String::new()
        } else {
            format!("power incomplete: {} not reporting", self.not_reporting)
        }
    }
}

/// What a rack head's list of jobs starts with.
pub(super) const JOBS_LEAD: &str = "drawing its power: ";

pub(super) fn head_view(r: &RackTile) -> HeadView {
    let sev = r.severity();
    let near = matches!(sev, Severity::Critical | Severity::Warning)
        && r.load_ratio().is_some_and(|x| x > 0.9);
    let word = match sev {
        Severity::Critical if r.load_ratio().is_some_and(|x| x > 1.0) => " · over limit",
        _ if near => " · near limit",
        _ => "",
    };
    let shelf_trouble = r.shelves.as_ref().is_some_and(|s| s.in_trouble())
        || r.fabric
            .as_ref()
            .is_some_and(|f| f.reporting() && f.lost() > 0);
    let fabric = r.fabric.as_ref().map(fabric_words).unwrap_or_default();
    HeadView {
        severity: sev.label(),
        power_attr: r.power_watts.map(|p| format!("{p:.1}")).unwrap_or_default(),
        power: format!(
            "{} / {} ({}){word}{}",
            units::power(r.power_watts),
            units::power(Some(r.power_limit_watts)),
            units::percent(r.load_ratio()),
            r.shelves.as_ref().map(shelf_words).unwrap_or_default()
        ),
        inlet: match &r.coolant {
            Some(c) => coolant_words(c, r.inlet_celsius) + &fabric,
            None => format!(
                "inlet {} · {}{fabric}",
                units::celsius(r.inlet_celsius),
                match r.cooling {
                    crate::model::Cooling::Air => "air",
                    crate::model::Cooling::Liquid => "liquid",
                }
            ),
        },
        not_reporting: r.nodes_not_reporting,
        // Who runs there: when it is near its power limit, a power shelf is in trouble,
        // or its coolant leaks.
        jobs: if near || shelf_trouble || r.coolant.as_ref().is_some_and(|c| !c.leaking.is_empty())
        {
            r.jobs.iter().take(5).copied().collect()
        } else {
            Vec::new()
        },
    }
}

/// What one node cell shows: compared as a whole, so a tick that changes nothing shown
/// touches nothing in the DOM.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct CellView {
    pub(super) bucket: Option<u8>,
    /// [`NodeTile::marks`]: classes whose glyphs (with their words for screen readers)
    /// the style sheet draws.
    pub(super) marks: u8,
    pub(super) summary: String,
    /// The node's name and value: the cell's one text node.
    pub(super) text: String,
}

pub(super) fn cell_view(n: &NodeTile, m: Metric) -> CellView {
    CellView {
        bucket: bucket(m, n),
        marks: n.marks,
        summary: node_summary(n),
        text: cell_text(
            &n.name,
            &match m {
                Metric::Power => units::power(n.power_watts),
                Metric::Temp => units::celsius(n.gpu_temp_max_celsius),
                Metric::Sm => units::percent(n.sm_active_mean),
                Metric::Throttle => format!("{} thr", n.gpus_throttling),
                Metric::State => n.state.label().to_string(),
            },
        ),
    }
}

/// A cell's text: the name, a space, and the value with its own spaces made narrow
/// no-break spaces. The cell justifies its one line (`text-align-last`), which widens
/// only the space after the name, so the value sits flush right without an element of
/// its own.
fn cell_text(name: &str, value: &str) -> String {
    let mut t = String::with_capacity(name.len() + value.len() + 4);
    t.push_str(name);
    t.push(' ');
    t.extend(
        value
            .chars()
            .map(|c| if c == ' ' { NARROW_NBSP } else { c }),
    );
    t
}

/// U+202F: not a justification opportunity, unlike U+0020 and U+00A0.
pub(super) const NARROW_NBSP: char = '\u{202F}';

impl CellView {
    pub(super) fn class(&self) -> String {
        use crate::live::marks::{HUNG, LEMON, STRAGGLER};
        let mut c = match self.bucket {
            Some(k) => format!("floor-node m{k}"),
            None => "floor-node none".into(),
        };
        for (bit, name) in [
            (HUNG, " hung"),
            (STRAGGLER, " straggler"),
            (LEMON, " lemon"),
        ] {
            if self.marks & bit != 0 {
                c.push_str(name);
            }
        }
        c
    }

    pub(super) fn bucket_attr(&self) -> String {
        self.bucket.map(|k| k.to_string()).unwrap_or_default()
    }
}

fn node_summary(n: &NodeTile) -> String {
    let mut marks = String::new();
    for w in crate::live::marks::words(n.marks) {
        marks.push_str(", ");
        marks.push_str(w);
    }
    format!(
        "{}: {}, {} power, hottest GPU {}, SM {}, {} of {} GPUs throttling{}{marks}",
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
