//! The cluster's Gantt as data and as SVG: job runs over node rows (grouped by rack) for a
//! time window, drains and downtime behind them, requeues and failures marked. The server
//! sends [`TimelineData`] (rows as indices, so a 7-day window of 2,048 nodes is a fraction
//! of its SVG) and both sides draw it with [`Gantt`]: the HTML carries the picture once,
//! and the hydration data the compact numbers. Where each mark goes ([`drawing`]) is pure.

use leptos::prelude::*;
use leptos::tachys::svg;
use serde::{Deserialize, Serialize};

use crate::model::{JobState, NodeState, UnixMs};

/// One run of a job: its node rows and when.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct TimelineRun {
    pub job_id: u64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Indices into the window's rows, each node once.
    pub rows: Vec<u32>,
    pub start_ms: UnixMs,
    /// `None`: still running.
    pub end_ms: Option<UnixMs>,
    /// How it ended: completed, failed, requeued, cancelled, timeout, node_fail.
    pub end_state: Option<JobState>,
}

/// How the Gantt's rows are grouped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Grouping {
    /// By rack, in floor order, top of the rack first.
    #[default]
    Rack,
    /// By InfiniBand leaf switch (under its spine), nodes by name.
    Switch,
}

impl Grouping {
    pub fn as_str(self) -> &'static str {
        match self {
            Grouping::Rack => "rack",
            Grouping::Switch => "switch",
        }
    }

    pub fn parse(s: &str) -> Option<Grouping> {
        [Grouping::Rack, Grouping::Switch]
            .into_iter()
            .find(|g| g.as_str() == s)
    }
}

/// Everything the Gantt of one window shows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct TimelineData {
    pub from_ms: UnixMs,
    pub to_ms: UnixMs,
    /// The source's time now (the window may end earlier).
    pub now_ms: UnixMs,
    /// Groups (racks in floor order, or leaf switches) with their nodes; rows are
    /// numbered through all groups in this order.
    pub racks: Vec<(String, Vec<String>)>,
    /// Runs that overlap the window.
    pub runs: Vec<TimelineRun>,
    /// Out-of-service spans overlapping the window: (row, from, to, state).
    pub spans: Vec<(u32, UnixMs, UnixMs, NodeState)>,
}

/// Where every mark of the Gantt goes, with its words: coordinates as the SVG writes
/// them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Drawing {
    pub width: String,
    pub height: String,
    pub label: String,
    pub title: String,
    /// The time grid: (x, its UTC label).
    pub grid: Vec<(String, String)>,
    /// Where the grid's lines start and end.
    pub grid_y: (String, String),
    /// Each group's name at its y.
    pub groups: Vec<(String, String)>,
    /// Each node's name at its row's y, right-aligned at `name_x`; empty when the rows are
    /// too thin to read (more than [`NAMED_ROWS`] nodes), where each bar's and span's
    /// title names its nodes instead.
    pub nodes: Vec<(String, String)>,
    pub name_x: String,
    /// The source's "now" when it falls in the window: its x.
    pub now: Option<String>,
    pub spans: Vec<SpanMark>,
    pub runs: Vec<RunMark>,
}

/// Up to this many nodes, each row is tall enough to carry its node's name and its jobs'
/// ids; beyond it rows are thin and named on hover.
pub const NAMED_ROWS: usize = 160;

/// A node out of service: its row's height over the span.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpanMark {
    pub x: String,
    pub y: String,
    pub width: String,
    pub height: String,
    pub class: &'static str,
    pub node: String,
    pub title: String,
}

/// One run of a job: one link, its bars over runs of adjacent rows, a mark at its end
/// when it lost work, and its id written on each bar where it fits.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunMark {
    pub job: u64,
    pub class: &'static str,
    pub title: String,
    /// (x, y, width, height, rows covered).
    pub bars: Vec<(String, String, String, String, usize)>,
    /// (x, y, height).
    pub mark: Option<(String, String, String)>,
    /// (x, y, words) per bar where 12 px text fits: the job's id, its name when there
    /// is room, and the end's symbol.
    pub labels: Vec<(String, String, String)>,
}

/// The symbol written after a job's id for an end that lost work (its second cue beside
/// the colour): ↻ requeued, ✕ failed.
pub fn end_symbol(s: Option<JobState>) -> &'static str {
    match s {
        Some(JobState::Requeued) => " \u{21bb}",
        Some(JobState::Failed | JobState::NodeFail | JobState::Timeout) => " \u{2715}",
        _ => "",
    }
}

/// The layout of `d`'s Gantt.
pub fn drawing(d: &TimelineData) -> Drawing {
    const LEFT: f64 = 120.0;
    const WIDTH: f64 = 1100.0;
    const TOP: f64 = 26.0;
    /// Roughly the width of a character of the 12 px labels.
    const CHAR: f64 = 7.0;
    let rows_total: usize = d.racks.iter().map(|(_, n)| n.len()).sum();
    let named = rows_total <= NAMED_ROWS;
    // Named rows are 16 px (12 px text), their groups headed by a line of their own;
    // thin rows 6 px, the group's name beside its first rows.
    let (row, gap, head) = if named {
        (16.0, 6.0, 16.0)
    } else {
        (6.0, 10.0, 0.0)
    };
    let (from_ms, to_ms) = (d.from_ms, d.to_ms);
    let span = (to_ms - from_ms).max(1) as f64;
    let x = |t: UnixMs| LEFT + (t.clamp(from_ms, to_ms) - from_ms) as f64 / span * WIDTH;
    let mut y_of: Vec<f64> = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    let mut y = TOP;
    let mut groups = Vec::new();
    let mut nodes = Vec::new();
    for (rack, members) in &d.racks {
        if named {
            groups.push((format!("{:.1}", y + 12.0), rack.clone()));
            y += head;
        } else {
            groups.push((format!("{:.1}", y + 9.0), rack.clone()));
        }
        for n in members {
            if named {
                nodes.push((format!("{:.1}", y + 12.0), n.clone()));
            }
            y_of.push(y);
            names.push(n);
            y += row;
        }
        y += gap;
    }
    let node_name = |row: u32| -> &str { names.get(row as usize).copied().unwrap_or("") };
    let height = y + 20.0;
    let (from, to) = (crate::units::utc(from_ms), crate::units::utc(to_ms));
    let mut out = Drawing {
        width: format!("{}", LEFT + WIDTH + 10.0),
        height: format!("{height:.0}"),
        label: format!("Jobs over nodes from {from} to {to}"),
        title: format!("Jobs over nodes, {from} to {to}"),
        grid_y: (format!("{}", TOP - 4.0), format!("{:.0}", height - 16.0)),
        groups,
        nodes,
        name_x: format!("{}", LEFT - 6.0),
        now: (from_ms..=to_ms)
            .contains(&d.now_ms)
            .then(|| format!("{:.1}", x(d.now_ms))),
        ..Drawing::default()
    };
    // Hour grid and labels (UTC).
    let step = if span > 2.0 * 86_400_000.0 {
        86_400_000
    } else if span > 12.0 * 3_600_000.0 {
        6 * 3_600_000
    } else {
        3_600_000
    };
    let mut t = from_ms - from_ms.rem_euclid(step) + step;
    while t < to_ms {
        out.grid.push((
            format!("{:.1}", x(t)),
            crate::units::utc(t)[5..16].to_string(),
        ));
        t += step;
    }
    // Drains and downtime behind the runs, the whole row's height.
    for (r, start, end, state) in &d.spans {
        if *end < from_ms || *start > to_ms {
            continue;
        }
        let Some(&yy) = y_of.get(*r as usize) else {
            continue;
        };
        let node = node_name(*r);
        let (x0, x1) = (x(*start), x(*end));
        out.spans.push(SpanMark {
            x: format!("{x0:.1}"),
            y: format!("{:.1}", yy - 0.5),
            width: format!("{:.1}", (x1 - x0).max(1.0)),
            height: format!("{row:.1}"),
            class: match state {
                NodeState::Drained | NodeState::Draining => "tl-drain",
                _ => "tl-down",
            },
            node: node.to_string(),
            title: format!(
                "{node} {} from {} to {}",
                state.label(),
                crate::units::utc(*start),
                if *end >= d.now_ms {
                    "now".to_string()
                } else {
                    crate::units::utc(*end)
                }
            ),
        });
    }
    // One link per run, its bars over its nodes' rows.
    for r in &d.runs {
        let end = r.end_ms.unwrap_or(to_ms);
        if end < from_ms || r.start_ms > to_ms {
            continue;
        }
        let (x0, x1) = (x(r.start_ms), x(end));
        let on: Vec<&str> = r.rows.iter().map(|&i| node_name(i)).collect();
        let title = format!(
            "job {}{}{} on {} node(s){}, {} to {}{}",
            r.job_id,
            if r.name.is_empty() { "" } else { " " },
            r.name,
            on.len(),
            if on.len() <= 8 {
                format!(" ({})", on.join(", "))
            } else {
                format!(" ({}, … {})", on[..4].join(", "), on[on.len() - 1])
            },
            crate::units::utc(r.start_ms),
            r.end_ms
                .map(crate::units::utc)
                .unwrap_or_else(|| "now".into()),
            r.end_state
                .map(|s| format!(" ({})", s.label()))
                .unwrap_or_default()
        );
        // Bars of nodes on adjacent rows are merged into one (covering `k` rows), so a
        // 32-node job is one element, not 32.
        let mut ys: Vec<f64> = r
            .rows
            .iter()
            .filter_map(|&i| y_of.get(i as usize).copied())
            .collect();
        ys.sort_by(f64::total_cmp);
        ys.dedup();
        let width = (x1 - x0).max(1.0);
        let mut bars = Vec::new();
        let mut labels = Vec::new();
        let with_name = format!("{} {}{}", r.job_id, r.name, end_symbol(r.end_state));
        let id = format!("{}{}", r.job_id, end_symbol(r.end_state));
        let fits = |s: &str| (s.chars().count() as f64) * CHAR + 6.0 <= width;
        let words = if !r.name.is_empty() && fits(&with_name) {
            Some(with_name)
        } else {
            fits(&id).then_some(id)
        };
        let mut i = 0;
        while i < ys.len() {
            let mut j = i + 1;
            while j < ys.len() && (ys[j] - ys[j - 1] - row).abs() < 0.01 {
                j += 1;
            }
            let k = j - i;
            let h = k as f64 * row - 1.0;
            // The id (and the name where there is room) on each bar 12 px text fits in.
            if let Some(w) = words.as_ref().filter(|_| h >= 13.0) {
                labels.push((
                    format!("{:.0}", x0 + 3.0),
                    format!("{:.0}", ys[i] + h / 2.0 + 4.0),
                    w.clone(),
                ));
            }
            bars.push((
                format!("{x0:.0}"),
                format!("{:.0}", ys[i]),
                format!("{width:.0}"),
                format!("{h:.0}"),
                k,
            ));
            i = j;
        }
        // An end that lost work is marked at its end.
        let mark = matches!(
            r.end_state,
            Some(JobState::Requeued | JobState::Failed | JobState::NodeFail)
        )
        .then(|| r.rows.first().and_then(|&i| y_of.get(i as usize)))
        .flatten()
        .map(|&yy| {
            (
                format!("{:.1}", x1 - 1.0),
                format!("{:.1}", yy - 1.0),
                format!("{:.1}", row + 1.0),
            )
        });
        out.runs.push(RunMark {
            job: r.job_id,
            class: match r.end_state {
                None => "tl-run",
                Some(JobState::Requeued) => "tl-run tl-requeued",
                Some(JobState::Failed | JobState::NodeFail | JobState::Timeout) => {
                    "tl-run tl-failed"
                }
                Some(_) => "tl-run tl-done",
            },
            title,
            bars,
            mark,
            labels,
        });
    }
    out
}

/// The Gantt of `d`, as one SVG.
#[component]
pub fn Gantt(d: Drawing) -> impl IntoView {
    let Drawing {
        width,
        height,
        label,
        title,
        grid,
        grid_y: (y1, y2),
        groups,
        nodes,
        name_x,
        now,
        spans,
        runs,
    } = d;
    let view_box = format!("0 0 {width} {height}");
    let now_y2 = y2.clone();
    view! {
        <svg xmlns="http://www.w3.org/2000/svg" class="timeline" width=width height=height viewBox=view_box role="group" aria-label=label>
            <title>{title}</title>
            <defs>
                // The second cue of a node out of service: drained is hatched one way,
                // down crossed.
                <pattern id="tl-hatch-drain" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">
                    <rect width="6" height="6" class="tl-hatch-bg"></rect>
                    <line x1="0" y1="0" x2="0" y2="6" class="tl-hatch-drain"></line>
                </pattern>
                <pattern id="tl-hatch-down" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">
                    <rect width="6" height="6" class="tl-hatch-bg"></rect>
                    <line x1="0" y1="0" x2="0" y2="6" class="tl-hatch-down"></line>
                    <line x1="0" y1="0" x2="6" y2="0" class="tl-hatch-down"></line>
                </pattern>
            </defs>
            {grid.into_iter().map(|(x, t)| {
                let (x1, x2, tx) = (x.clone(), x.clone(), x);
                let (y1, y2) = (y1.clone(), y2.clone());
                view! {
                    <line x1=x1 x2=x2 y1=y1 y2=y2 class="tl-grid"></line>
                    <text x=tx y="14" class="tl-time">{t}</text>
                }
            }).collect_view()}
            {groups.into_iter().map(|(y, name)| view! { <text x="4" y=y class="tl-rack">{name}</text> }).collect_view()}
            {nodes.into_iter().map(|(y, name)| {
                let x = name_x.clone();
                view! { <text x=x y=y class="tl-node" text-anchor="end">{name}</text> }
            }).collect_view()}
            {spans.into_iter().map(span).collect_view()}
            {runs.into_iter().map(run).collect_view()}
            {now.map(|x| {
                let (x1, x2, tx) = (x.clone(), x.clone(), x);
                view! {
                    <g class="tl-now" data-test="timeline-now">
                        <line x1=x1 x2=x2 y1="18" y2=now_y2></line>
                        <text x=tx y="24" text-anchor="end" dx="-3">"now"</text>
                    </g>
                }
            })}
        </svg>
    }
}

/// A node out of service. Its class comes before its node, as the page always wrote it.
fn span(s: SpanMark) -> impl IntoView {
    svg::rect()
        .attr("x", s.x)
        .attr("y", s.y)
        .attr("width", s.width)
        .attr("height", s.height)
        .attr("class", s.class)
        .attr("data-node", s.node)
        .child(svg::title().child(s.title))
}

/// A run: a link to its job (SVG's `a`, which the `view!` macro cannot tell from HTML's
/// outside an `svg`), its bars, its end mark and its label.
fn run(r: RunMark) -> impl IntoView {
    let job = r.job.to_string();
    svg::a()
        .attr("href", format!("/jobs/{job}"))
        .attr("data-job", job)
        .attr("class", r.class)
        .child((
            svg::title().child(r.title),
            r.bars
                .into_iter()
                .map(
                    |(x, y, w, h, k)| view! { <rect x=x y=y width=w height=h data-nodes=k></rect> },
                )
                .collect_view(),
            r.mark.map(
                |(x, y, h)| view! { <rect x=x y=y width="2" height=h class="tl-mark"></rect> },
            ),
            r.labels
                .into_iter()
                .map(|(x, y, words)| view! { <text x=x y=y class="tl-label" aria-hidden="true">{words}</text> })
                .collect_view(),
        ))
}

/// The SVG of `d` as the server writes it (its tests read it).
#[cfg(feature = "ssr")]
pub fn svg(d: &TimelineData) -> String {
    let d = drawing(d);
    Owner::new().with(|| view! { <Gantt d/> }.to_html())
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;

    #[test]
    fn the_gantt_links_each_run_and_names_what_it_draws() {
        let d = TimelineData {
            from_ms: 0,
            to_ms: 3_600_000,
            now_ms: 3_600_000,
            racks: vec![
                ("R<1>".into(), vec!["n1".into(), "n2".into()]),
                ("R2".into(), vec!["n3".into()]),
            ],
            runs: vec![TimelineRun {
                job_id: 7,
                name: "llama <pretrain>".into(),
                rows: vec![0, 1],
                start_ms: 0,
                end_ms: Some(1_800_000),
                end_state: Some(JobState::Requeued),
            }],
            spans: vec![(2, 600_000, 1_200_000, NodeState::Drained)],
        };
        let s = svg(&d);
        assert!(s.starts_with("<svg"), "{s}");
        assert!(s.contains(">R&lt;1&gt;<"), "{s}");
        assert!(s.contains(r#"class="tl-drain" data-node="n3""#), "{s}");
        assert!(
            s.contains(r#"<a href="/jobs/7" data-job="7" class="tl-run tl-requeued">"#),
            "{s}"
        );
        assert!(s.contains(r#"height="31" data-nodes="2""#), "{s}");
        assert_eq!(s.matches(r#"class="tl-mark""#).count(), 1, "{s}");
        // Rows carry their nodes' names; the bar its job's id, name and the end's symbol.
        for n in ["n1", "n2", "n3"] {
            assert!(
                s.contains(&format!(r#"text-anchor="end" class="tl-node">{n}<"#)),
                "{n}: {s}"
            );
        }
        assert!(
            s.contains("class=\"tl-label\">7 llama &lt;pretrain&gt; \u{21bb}<"),
            "{s}"
        );
        assert!(
            s.contains("(n1, n2)"),
            "the bar's title names its nodes: {s}"
        );
        assert!(s.contains(r#"data-test="timeline-now""#), "{s}");
        assert!(
            s.contains("llama &lt;pretrain&gt;"),
            "names are escaped: {s}"
        );
        assert!(!s.contains("<pretrain>"), "{s}");
        for p in ["tl-hatch-drain", "tl-hatch-down"] {
            assert!(s.contains(&format!(r#"<pattern id="{p}""#)), "{p}: {s}");
        }
    }

    /// A drawing of `nodes` rows with one run of job 9 on the first two.
    fn rows(nodes: usize, now_ms: UnixMs, end_state: Option<JobState>) -> TimelineData {
        TimelineData {
            from_ms: 0,
            to_ms: 3_600_000,
            now_ms,
            racks: vec![("R1".into(), (0..nodes).map(|i| format!("n{i}")).collect())],
            runs: vec![TimelineRun {
                job_id: 9,
                name: String::new(),
                rows: vec![0, 1],
                start_ms: 0,
                end_ms: end_state.map(|_| 1_800_000),
                end_state,
            }],
            spans: vec![],
        }
    }

    #[test]
    fn thin_rows_name_their_nodes_on_hover_and_now_shows_only_inside_the_window() {
        let many = drawing(&rows(NAMED_ROWS + 1, 3_600_000, None));
        assert!(many.nodes.is_empty(), "too thin to read: names on hover");
        assert_eq!(many.groups.len(), 1);
        // A two-node bar in thin rows is 11 px: too low for 12 px text.
        assert!(many.runs[0].labels.is_empty());
        assert!(many.runs[0].title.contains("(n0, n1)"));
        let few = drawing(&rows(NAMED_ROWS, 3_600_000, Some(JobState::Failed)));
        assert_eq!(few.nodes.len(), NAMED_ROWS);
        let label: Vec<&str> = few.runs[0].labels.iter().map(|l| l.2.as_str()).collect();
        assert_eq!(label, ["9 \u{2715}"], "failed is marked in words too");
        assert_eq!(few.runs[0].class, "tl-run tl-failed");
        // The window ends at now: the line is at its right edge; a window in the past
        // has none.
        assert_eq!(few.now.as_deref(), Some("1220.0"));
        assert_eq!(drawing(&rows(3, 7_200_000, None)).now, None);
    }

    #[test]
    fn each_state_has_its_own_class_and_symbol() {
        let classes: Vec<&str> = [
            None,
            Some(JobState::Completed),
            Some(JobState::Requeued),
            Some(JobState::Failed),
        ]
        .into_iter()
        .map(|e| drawing(&rows(3, 3_600_000, e)).runs[0].class)
        .collect();
        let mut distinct = classes.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), 4, "{classes:?}");
        assert_ne!(
            end_symbol(Some(JobState::Requeued)),
            end_symbol(Some(JobState::Failed))
        );
    }
}
