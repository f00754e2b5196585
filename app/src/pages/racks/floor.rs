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
            // Where the layout names halls, a row says its hall (a row stands in one).
            let hall = racks
                .first()
                .and_then(|(ri, _)| s.racks.get(*ri))
                .map(|r| r.hall.clone())
                .filter(|h| !h.is_empty());
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
            let label = match hall {
                Some(h) => format!("Row {row}, hall {h}"),
                None => format!("Row {row}"),
            };
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
        } + &r
            .incident
            .as_ref()
            .map(|i| format!(" · {} incident: {}", i.severity, i.words))
            .unwrap_or_default(),
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

#[cfg(test)]
mod tests {
    use super::super::fixtures::{html, n, rack};
    use super::*;

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
                h.matches(&["<", tag].concat()).count(),
                h.matches(&["</", tag, ">"].concat()).count(),
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
                    Placed::Node { i, rack, at, .. } => (0, i, rack, at),
                    Placed::Rack { ri, row, pos, .. } => (1, ri, row, pos),
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
                h.matches(&["<", tag, ">"].concat()).count()
                    + h.matches(&["<", tag, " "].concat()).count(),
                h.matches(&["</", tag, ">"].concat()).count(),
                "{tag}: {h}"
            );
        }
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
}
