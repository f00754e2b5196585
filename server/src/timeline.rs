//! The cluster's Gantt: job runs over nodes (grouped by rack) for a time window, with
//! requeues and failures marked, drawn on the server as one SVG. Pure: runs and a layout
//! in, SVG text out.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use app::model::{Inventory, JobState, NodeState, UnixMs};

use crate::store::JobEvent;

/// One run of a job on its nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    pub job_id: u64,
    pub nodes: Vec<String>,
    pub start_ms: UnixMs,
    /// `None`: still running.
    pub end_ms: Option<UnixMs>,
    /// How it ended: completed, failed, requeued, cancelled, timeout, node_fail.
    pub end_state: Option<JobState>,
}

/// Pairs each `running` transition with the next end of the same job.
pub fn runs(events: &[JobEvent]) -> Vec<Run> {
    let mut open: HashMap<u64, Run> = HashMap::new();
    let mut out = Vec::new();
    for e in events {
        match e.state {
            JobState::Running => {
                if let Some(r) = open.remove(&e.job_id) {
                    out.push(r);
                }
                open.insert(
                    e.job_id,
                    Run {
                        job_id: e.job_id,
                        nodes: e.nodes.clone(),
                        start_ms: e.at_ms,
                        end_ms: None,
                        end_state: None,
                    },
                );
            }
            s if s.is_finished() || s == JobState::Requeued => {
                if let Some(mut r) = open.remove(&e.job_id) {
                    r.end_ms = Some(e.at_ms);
                    r.end_state = Some(s);
                    out.push(r);
                }
            }
            _ => {}
        }
    }
    out.extend(open.into_values());
    out.sort_by_key(|r| (r.start_ms, r.job_id));
    out
}

/// A node's state over a period: (node, from, to, state).
pub type NodeSpan = (String, UnixMs, UnixMs, NodeState);

/// Out-of-service periods of nodes (drained, draining, down, not responding,
/// maintenance) from their state changes, by node then time; the last lasts until `to_ms`.
pub fn node_spans(events: &[(String, UnixMs, NodeState)], to_ms: UnixMs) -> Vec<NodeSpan> {
    let out_of_service = |s: NodeState| {
        matches!(
            s,
            NodeState::Drained
                | NodeState::Draining
                | NodeState::Down
                | NodeState::NotResponding
                | NodeState::Maintenance
        )
    };
    let mut out = Vec::new();
    for (i, (node, at, state)) in events.iter().enumerate() {
        if !out_of_service(*state) {
            continue;
        }
        let end = events
            .get(i + 1)
            .filter(|(n, _, _)| n == node)
            .map(|(_, t, _)| *t)
            .unwrap_or(to_ms);
        out.push((node.clone(), *at, end, *state));
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The SVG of `runs` on `inv`'s nodes, grouped by rack, over [`from_ms`, `to_ms`].
pub fn svg(
    inv: &Inventory,
    runs: &[Run],
    names: &HashMap<u64, String>,
    spans: &[NodeSpan],
    from_ms: UnixMs,
    to_ms: UnixMs,
) -> String {
    const LEFT: f64 = 90.0;
    const WIDTH: f64 = 1100.0;
    const ROW: f64 = 6.0;
    const RACK_GAP: f64 = 10.0;
    const TOP: f64 = 24.0;
    let span = (to_ms - from_ms).max(1) as f64;
    let x = |t: UnixMs| LEFT + (t.clamp(from_ms, to_ms) - from_ms) as f64 / span * WIDTH;
    // Rows: racks in floor order, nodes top of the rack first.
    let mut by_rack: BTreeMap<(String, u32, String), Vec<&app::model::Node>> = BTreeMap::new();
    let rack_pos: HashMap<&str, (String, u32)> = inv
        .racks
        .iter()
        .map(|r| (r.name.as_str(), (r.row.clone(), r.position)))
        .collect();
    for n in &inv.nodes {
        let (row, pos) = rack_pos.get(n.rack.as_str()).cloned().unwrap_or_default();
        by_rack
            .entry((row, pos, n.rack.clone()))
            .or_default()
            .push(n);
    }
    let mut y_of: HashMap<&str, f64> = HashMap::new();
    let mut y = TOP;
    let mut labels = String::new();
    for ((_, _, rack), nodes) in by_rack.iter_mut() {
        nodes.sort_by_key(|n| std::cmp::Reverse(n.u_position));
        let _ = write!(
            labels,
            r#"<text x="4" y="{:.1}" class="tl-rack">{}</text>"#,
            y + 5.0,
            esc(rack)
        );
        for n in nodes.iter() {
            y_of.insert(n.name.as_str(), y);
            y += ROW;
        }
        y += RACK_GAP;
    }
    let height = y + 20.0;
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{w}" height="{height:.0}" viewBox="0 0 {w} {height:.0}" role="img" aria-label="Jobs over nodes from {} to {}"><title>Jobs over nodes, {} to {}</title>"#,
        app::units::utc(from_ms),
        app::units::utc(to_ms),
        app::units::utc(from_ms),
        app::units::utc(to_ms),
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
            &app::units::utc(t)[5..16]
        );
        t += step;
    }
    out.push_str(&labels);
    // Drains and downtime behind the runs, the whole row's height.
    for (node, start, end, state) in spans {
        if *end < from_ms || *start > to_ms {
            continue;
        }
        let Some(&yy) = y_of.get(node.as_str()) else {
            continue;
        };
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
            esc(node),
            esc(node),
            state.label(),
            app::units::utc(*start)
        );
    }
    // One link per run, its bars over its nodes' rows.
    for r in runs {
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
        let name = names.get(&r.job_id).map(String::as_str).unwrap_or("");
        let title = format!(
            "job {} {} on {} node(s), {} to {}{}",
            r.job_id,
            name,
            r.nodes.len(),
            app::units::utc(r.start_ms),
            r.end_ms
                .map(app::units::utc)
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
            esc(&title)
        );
        let mut ys: Vec<f64> = r
            .nodes
            .iter()
            .filter_map(|n| y_of.get(n.as_str()).copied())
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
            if let Some(&yy) = r.nodes.first().and_then(|n| y_of.get(n.as_str())) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(job: u64, at: i64, state: JobState, nodes: &[&str]) -> JobEvent {
        JobEvent {
            job_id: job,
            at_ms: at,
            state,
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            detail: String::new(),
        }
    }

    #[test]
    fn runs_pair_starts_with_ends() {
        let events = vec![
            ev(1, 10, JobState::Pending, &[]),
            ev(1, 20, JobState::Running, &["a", "b"]),
            ev(1, 50, JobState::Requeued, &["a", "b"]),
            ev(1, 60, JobState::Running, &["c"]),
            ev(2, 5, JobState::Running, &["d"]),
            ev(2, 9, JobState::Failed, &["d"]),
        ];
        let r = runs(&events);
        assert_eq!(r.len(), 3);
        assert_eq!((r[0].job_id, r[0].end_state), (2, Some(JobState::Failed)));
        assert_eq!(
            (r[1].start_ms, r[1].end_ms, r[1].end_state),
            (20, Some(50), Some(JobState::Requeued))
        );
        assert_eq!(
            (r[2].nodes.clone(), r[2].end_ms),
            (vec!["c".to_string()], None)
        );
    }

    #[test]
    fn the_svg_has_a_bar_per_run_over_its_nodes_and_marks_lost_work() {
        let inv = crate::sim::layout(16, "t");
        let n = |i: usize| inv.nodes[i].name.clone();
        let r = vec![
            Run {
                job_id: 7,
                nodes: vec![n(0), n(1)],
                start_ms: 0,
                end_ms: Some(500),
                end_state: Some(JobState::Requeued),
            },
            Run {
                job_id: 8,
                nodes: vec![n(2)],
                start_ms: 600,
                end_ms: None,
                end_state: None,
            },
            Run {
                job_id: 9,
                nodes: vec![n(3)],
                start_ms: 2000,
                end_ms: None,
                end_state: None,
            },
        ];
        let mut names = HashMap::new();
        names.insert(7, "llama <pretrain>".to_string());
        let spans = node_spans(
            &[
                (n(5), 100, NodeState::Drained),
                (n(5), 400, NodeState::Idle),
                (n(6), 900, NodeState::Down),
            ],
            1000,
        );
        assert_eq!(
            spans,
            vec![
                (n(5), 100, 400, NodeState::Drained),
                (n(6), 900, 1000, NodeState::Down)
            ]
        );
        let s = svg(&inv, &r, &names, &spans, 0, 1000);
        assert_eq!(s.matches(r#"class="tl-drain""#).count(), 1);
        assert_eq!(s.matches(r#"class="tl-down""#).count(), 1);
        assert!(s.starts_with("<svg"));
        // Job 7 on two adjacent rows: one link, one bar covering both.
        assert_eq!(s.matches(r#"class="tl-run tl-requeued""#).count(), 1);
        assert!(s.contains(r#"height="11" data-nodes="2"/>"#), "{s}");
        assert_eq!(
            s.matches(r#"class="tl-run""#).count(),
            1,
            "job 9 starts after the window"
        );
        assert_eq!(s.matches(r#"class="tl-mark""#).count(), 1);
        assert!(s.contains("llama &lt;pretrain&gt;"), "names are escaped");
        assert!(s.contains(r#"href="/jobs/7""#));
    }
}
