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
    pub spans: Vec<SpanMark>,
    pub runs: Vec<RunMark>,
}

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

/// One run of a job: one link, its bars over runs of adjacent rows, and a mark at its end
/// when it lost work.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunMark {
    pub job: u64,
    pub class: &'static str,
    pub title: String,
    /// (x, y, width, height, rows covered).
    pub bars: Vec<(String, String, String, String, usize)>,
    /// (x, y, height).
    pub mark: Option<(String, String, String)>,
}

/// The layout of `d`'s Gantt.
pub fn drawing(d: &TimelineData) -> Drawing {
    const LEFT: f64 = 90.0;
    const WIDTH: f64 = 1100.0;
    const ROW: f64 = 6.0;
    const RACK_GAP: f64 = 10.0;
    const TOP: f64 = 24.0;
    let (from_ms, to_ms) = (d.from_ms, d.to_ms);
    let span = (to_ms - from_ms).max(1) as f64;
    let x = |t: UnixMs| LEFT + (t.clamp(from_ms, to_ms) - from_ms) as f64 / span * WIDTH;
    let mut y_of: Vec<f64> = Vec::new();
    let mut y = TOP;
    let mut groups = Vec::new();
    for (rack, nodes) in &d.racks {
        groups.push((format!("{:.1}", y + 5.0), rack.clone()));
        for _ in nodes {
            y_of.push(y);
            y += ROW;
        }
        y += RACK_GAP;
    }
    let node_name = |row: u32| -> &str {
        d.racks
            .iter()
            .flat_map(|(_, n)| n.iter())
            .nth(row as usize)
            .map(String::as_str)
            .unwrap_or("")
    };
    let height = y + 20.0;
    let (from, to) = (crate::units::utc(from_ms), crate::units::utc(to_ms));
    let mut out = Drawing {
        width: format!("{}", LEFT + WIDTH + 10.0),
        height: format!("{height:.0}"),
        label: format!("Jobs over nodes from {from} to {to}"),
        title: format!("Jobs over nodes, {from} to {to}"),
        grid_y: (format!("{}", TOP - 4.0), format!("{:.0}", height - 16.0)),
        groups,
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
    for (row, start, end, state) in &d.spans {
        if *end < from_ms || *start > to_ms {
            continue;
        }
        let Some(&yy) = y_of.get(*row as usize) else {
            continue;
        };
        let node = node_name(*row);
        let (x0, x1) = (x(*start), x(*end));
        out.spans.push(SpanMark {
            x: format!("{x0:.1}"),
            y: format!("{:.1}", yy - 0.5),
            width: format!("{:.1}", (x1 - x0).max(1.0)),
            height: format!("{ROW:.1}"),
            class: match state {
                NodeState::Drained | NodeState::Draining => "tl-drain",
                _ => "tl-down",
            },
            node: node.to_string(),
            title: format!(
                "{node} {} from {}",
                state.label(),
                crate::units::utc(*start)
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
        let title = format!(
            "job {} {} on {} node(s), {} to {}{}",
            r.job_id,
            r.name,
            r.rows.len(),
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
        let mut i = 0;
        while i < ys.len() {
            let mut j = i + 1;
            while j < ys.len() && (ys[j] - ys[j - 1] - ROW).abs() < 0.01 {
                j += 1;
            }
            let k = j - i;
            bars.push((
                format!("{x0:.0}"),
                format!("{:.0}", ys[i]),
                format!("{width:.0}"),
                format!("{:.0}", k as f64 * ROW - 1.0),
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
                format!("{:.1}", ROW + 1.0),
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
        spans,
        runs,
    } = d;
    let view_box = format!("0 0 {width} {height}");
    view! {
        <svg xmlns="http://www.w3.org/2000/svg" class="timeline" width=width height=height viewBox=view_box role="group" aria-label=label>
            <title>{title}</title>
            {grid.into_iter().map(|(x, t)| {
                let (x1, x2, tx) = (x.clone(), x.clone(), x);
                let (y1, y2) = (y1.clone(), y2.clone());
                view! {
                    <line x1=x1 x2=x2 y1=y1 y2=y2 class="tl-grid"></line>
                    <text x=tx y="14" class="tl-time">{t}</text>
                }
            }).collect_view()}
            {groups.into_iter().map(|(y, name)| view! { <text x="4" y=y class="tl-rack">{name}</text> }).collect_view()}
            {spans.into_iter().map(span).collect_view()}
            {runs.into_iter().map(run).collect_view()}
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
/// outside an `svg`), its bars and its end mark.
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
        assert!(s.contains(r#"height="11" data-nodes="2""#), "{s}");
        assert_eq!(s.matches(r#"class="tl-mark""#).count(), 1, "{s}");
        assert!(
            s.contains("llama &lt;pretrain&gt;"),
            "names are escaped: {s}"
        );
        assert!(!s.contains("<pretrain>"), "{s}");
    }
}
