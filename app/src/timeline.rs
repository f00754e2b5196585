//! The cluster's Gantt as data and as SVG: job runs over node rows (grouped by rack) for a
//! time window, drains and downtime behind them, requeues and failures marked. The server
//! sends [`TimelineData`] (rows as indices, so a 7-day window of 2,048 nodes is a fraction
//! of its SVG) and both sides draw it with [`svg`]: the HTML carries the picture once, and
//! the hydration data the compact numbers. Pure.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::model::{JobState, NodeState, UnixMs};
use crate::units::xml_escape;

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

/// The SVG of `d`.
pub fn svg(d: &TimelineData) -> String {
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
    let mut labels = String::new();
    for (rack, nodes) in &d.racks {
        let _ = write!(
            labels,
            r#"<text x="4" y="{:.1}" class="tl-rack">{}</text>"#,
            y + 5.0,
            xml_escape(rack)
        );
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
    let mut out = String::with_capacity(64 * 1024 + d.runs.len() * 200);
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{w}" height="{height:.0}" viewBox="0 0 {w} {height:.0}" role="group" aria-label="Jobs over nodes from {} to {}"><title>Jobs over nodes, {} to {}</title>"#,
        crate::units::utc(from_ms),
        crate::units::utc(to_ms),
        crate::units::utc(from_ms),
        crate::units::utc(to_ms),
        w = LEFT + WIDTH + 10.0,
    );
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
        let _ = write!(
            out,
            r#"<line x1="{0:.1}" x2="{0:.1}" y1="{1}" y2="{2:.0}" class="tl-grid"/><text x="{0:.1}" y="14" class="tl-time">{3}</text>"#,
            x(t),
            TOP - 4.0,
            height - 16.0,
            &crate::units::utc(t)[5..16]
        );
        t += step;
    }
    out.push_str(&labels);
    // Drains and downtime behind the runs, the whole row's height.
    for (row, start, end, state) in &d.spans {
        if *end < from_ms || *start > to_ms {
            continue;
        }
        let Some(&yy) = y_of.get(*row as usize) else {
            continue;
        };
        let node = node_name(*row);
        let class = match state {
            NodeState::Drained | NodeState::Draining => "tl-drain",
            _ => "tl-down",
        };
        let (x0, x1) = (x(*start), x(*end));
        let _ = write!(
            out,
            r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{ROW:.1}" class="{class}" data-node="{}"><title>{} {} from {}</title></rect>"#,
            yy - 0.5,
            (x1 - x0).max(1.0),
            xml_escape(node),
            xml_escape(node),
            state.label(),
            crate::units::utc(*start)
        );
    }
    // One link per run, its bars over its nodes' rows.
    for r in &d.runs {
        let end = r.end_ms.unwrap_or(to_ms);
        if end < from_ms || r.start_ms > to_ms {
            continue;
        }
        let (x0, x1) = (x(r.start_ms), x(end));
        let class = match r.end_state {
            None => "tl-run",
            Some(JobState::Requeued) => "tl-run tl-requeued",
            Some(JobState::Failed | JobState::NodeFail | JobState::Timeout) => "tl-run tl-failed",
            Some(_) => "tl-run tl-done",
        };
        let name = r.name.as_str();
        let title = format!(
            "job {} {} on {} node(s), {} to {}{}",
            r.job_id,
            name,
            r.rows.len(),
            crate::units::utc(r.start_ms),
            r.end_ms
                .map(crate::units::utc)
                .unwrap_or_else(|| "now".into()),
            r.end_state
                .map(|s| format!(" ({})", s.label()))
                .unwrap_or_default()
        );
        // The run's class is on its link, its bars inherit the colour: one class per run,
        // not per bar. Bars of nodes on adjacent rows are merged into one (`data-nodes`
        // says how many rows it covers), so a 32-node job is one element, not 32.
        let _ = write!(
            out,
            r#"<a href="/jobs/{}" data-job="{}" class="{class}"><title>{}</title>"#,
            r.job_id,
            r.job_id,
            xml_escape(&title)
        );
        let mut ys: Vec<f64> = r
            .rows
            .iter()
            .filter_map(|&i| y_of.get(i as usize).copied())
            .collect();
        ys.sort_by(f64::total_cmp);
        ys.dedup();
        let width = (x1 - x0).max(1.0);
        let mut i = 0;
        while i < ys.len() {
            let mut j = i + 1;
            while j < ys.len() && (ys[j] - ys[j - 1] - ROW).abs() < 0.01 {
                j += 1;
            }
            let k = j - i;
            let _ = write!(
                out,
                r#"<rect x="{x0:.0}" y="{:.0}" width="{width:.0}" height="{:.0}" data-nodes="{k}"/>"#,
                ys[i],
                k as f64 * ROW - 1.0
            );
            i = j;
        }
        // An end that lost work is marked at its end.
        if matches!(
            r.end_state,
            Some(JobState::Requeued | JobState::Failed | JobState::NodeFail)
        ) {
            if let Some(&yy) = r.rows.first().and_then(|&i| y_of.get(i as usize)) {
                let _ = write!(
                    out,
                    r#"<rect x="{:.1}" y="{:.1}" width="2" height="{:.1}" class="tl-mark"/>"#,
                    x1 - 1.0,
                    yy - 1.0,
                    ROW + 1.0
                );
            }
        }
        out.push_str("</a>");
    }
    out.push_str("</svg>");
    out
}
