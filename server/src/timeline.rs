//! The cluster's Gantt: job runs from transitions, out-of-service spans from node state
//! changes, and the window's [`TimelineData`] (drawn by `app::timeline::svg` on both
//! sides). Pure.

use app::model::{DomainKind, Inventory, Job, JobState, NodeState, UnixMs};
use app::timeline::{Grouping, TimelineData, TimelineRun};
use std::collections::{BTreeMap, HashMap};

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

/// Pairs each `running` transition with the next end of the same job. A `running` while
/// the job's run is open (a source that restarted sees its running jobs anew) goes on with
/// that run: it is not a new one.
pub fn runs(events: &[JobEvent]) -> Vec<Run> {
    let mut open: HashMap<u64, Run> = HashMap::new();
    let mut out = Vec::new();
    for e in events {
        match e.state {
            JobState::Running => {
                open.entry(e.job_id).or_insert_with(|| Run {
                    job_id: e.job_id,
                    nodes: e.nodes.clone(),
                    start_ms: e.at_ms,
                    end_ms: None,
                    end_state: None,
                });
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

/// One job's runs, for its page: [`runs`] of its transitions, completed by what the job says
/// now. A run the history missed the start of, still going, started at the job's start; the
/// open run of a job no longer running ended at the job's end (`now_ms` if it has none).
pub fn job_runs(job: &Job, events: &[JobEvent], now_ms: UnixMs) -> Vec<Run> {
    let mut out = runs(events);
    let open = out.last().is_some_and(|r| r.end_ms.is_none());
    if job.state == JobState::Running && !open {
        if let Some(start_ms) = job.start_ms {
            out.push(Run {
                job_id: job.id,
                nodes: job.nodes.clone(),
                start_ms,
                end_ms: None,
                end_state: None,
            });
        }
    }
    if job.state != JobState::Running {
        if let Some(r) = out.last_mut().filter(|r| r.end_ms.is_none()) {
            r.end_ms = job.end_ms.or(Some(now_ms));
        }
    }
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

/// The window's data for [`app::timeline::svg`]: groups of rows (racks in floor order,
/// nodes top of the rack first; or leaf switches under their spines, nodes by name, and
/// the nodes of no leaf last), runs and out-of-service spans that overlap the window,
/// nodes as row indices.
#[allow(clippy::too_many_arguments)]
pub fn data(
    inv: &Inventory,
    group: Grouping,
    runs: &[Run],
    names: &HashMap<u64, String>,
    spans: &[NodeSpan],
    from_ms: UnixMs,
    to_ms: UnixMs,
    now_ms: UnixMs,
) -> TimelineData {
    let groups: Vec<(String, Vec<String>)> = match group {
        Grouping::Rack => {
            let mut by_rack: BTreeMap<(String, u32, String), Vec<&app::model::Node>> =
                BTreeMap::new();
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
            by_rack
                .into_iter()
                .map(|((_, _, rack), mut nodes)| {
                    nodes.sort_by_key(|n| std::cmp::Reverse(n.u_position));
                    (rack, nodes.iter().map(|n| n.name.clone()).collect())
                })
                .collect()
        }
        Grouping::Switch => {
            let mut leaves: Vec<&app::model::SwitchDomain> = inv
                .domains
                .iter()
                .filter(|d| d.kind == DomainKind::Leaf)
                .collect();
            leaves.sort_by(|a, b| (&a.parent, &a.name).cmp(&(&b.parent, &b.name)));
            let mut placed: std::collections::HashSet<&str> = std::collections::HashSet::new();
            let mut out: Vec<(String, Vec<String>)> = Vec::new();
            for l in leaves {
                let mut nodes: Vec<String> = l
                    .nodes
                    .iter()
                    .filter(|n| placed.insert(n.as_str()))
                    .cloned()
                    .collect();
                nodes.sort();
                out.push((l.name.clone(), nodes));
            }
            let rest: Vec<String> = inv
                .nodes
                .iter()
                .filter(|n| !placed.contains(n.name.as_str()))
                .map(|n| n.name.clone())
                .collect();
            if !rest.is_empty() {
                out.push(("no leaf".into(), rest));
            }
            out
        }
    };
    let mut row_of: HashMap<&str, u32> = HashMap::new();
    for (_, nodes) in &groups {
        for n in nodes {
            let next = row_of.len() as u32;
            row_of.entry(n.as_str()).or_insert(next);
        }
    }
    let racks = groups.clone();
    let overlaps = |start: UnixMs, end: UnixMs| end >= from_ms && start <= to_ms;
    TimelineData {
        from_ms,
        to_ms,
        now_ms,
        racks,
        runs: runs
            .iter()
            .filter(|r| overlaps(r.start_ms, r.end_ms.unwrap_or(to_ms)))
            .map(|r| TimelineRun {
                job_id: r.job_id,
                name: names.get(&r.job_id).cloned().unwrap_or_default(),
                rows: r
                    .nodes
                    .iter()
                    .filter_map(|n| row_of.get(n.as_str()).copied())
                    .collect(),
                start_ms: r.start_ms,
                end_ms: r.end_ms,
                end_state: r.end_state,
            })
            .collect(),
        spans: spans
            .iter()
            .filter(|(_, s, e, _)| overlaps(*s, *e))
            .filter_map(|(n, s, e, st)| Some((*row_of.get(n.as_str())?, *s, *e, *st)))
            .collect(),
    }
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
    fn rows_group_by_rack_or_by_leaf_switch_with_every_node_once() {
        let inv = crate::sim::layout(20, "t");
        let run = Run {
            job_id: 1,
            nodes: vec![inv.nodes[0].name.clone(), inv.nodes[9].name.clone()],
            start_ms: 0,
            end_ms: None,
            end_state: None,
        };
        for g in [Grouping::Rack, Grouping::Switch] {
            let d = data(
                &inv,
                g,
                std::slice::from_ref(&run),
                &HashMap::new(),
                &[],
                0,
                10,
                10,
            );
            let mut all: Vec<&String> = d.racks.iter().flat_map(|(_, n)| n.iter()).collect();
            assert_eq!(all.len(), 20, "{g:?}");
            all.sort();
            all.dedup();
            assert_eq!(all.len(), 20, "{g:?}: every node once");
            assert_eq!(d.runs[0].rows.len(), 2);
        }
        let d = data(
            &inv,
            Grouping::Switch,
            &[run],
            &HashMap::new(),
            &[],
            0,
            10,
            10,
        );
        let names: Vec<&str> = d.racks.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["leaf01", "leaf02", "leaf03"]);
        assert!(app::timeline::svg(&d).contains(">leaf02<"));
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
    fn a_repeated_start_goes_on_with_the_open_run() {
        // Gantry restarted at 40 and saw job 1 running anew.
        let events = vec![
            ev(1, 20, JobState::Running, &["a"]),
            ev(1, 40, JobState::Running, &["a"]),
            ev(1, 60, JobState::Failed, &["a"]),
        ];
        let r = runs(&events);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(
            (r[0].start_ms, r[0].end_ms, r[0].end_state),
            (20, Some(60), Some(JobState::Failed))
        );
    }

    #[test]
    fn a_jobs_runs_are_completed_by_what_it_says_now() {
        let job = |state, start_ms, end_ms| Job {
            id: 1,
            name: String::new(),
            user: String::new(),
            account: String::new(),
            partition: String::new(),
            state,
            nodes: vec!["a".into()],
            gpus: 8,
            submit_ms: 0,
            start_ms,
            end_ms,
        };
        let span = |r: &[Run]| -> Vec<(i64, Option<i64>, Option<JobState>)> {
            r.iter()
                .map(|r| (r.start_ms, r.end_ms, r.end_state))
                .collect()
        };
        // Running, its start before the history: one open run from the job's start.
        let running = job(JobState::Running, Some(5), None);
        assert_eq!(span(&job_runs(&running, &[], 100)), [(5, None, None)]);
        // Running after a requeue: the ended run, then the open one.
        let events = [
            ev(1, 10, JobState::Running, &["a"]),
            ev(1, 30, JobState::Requeued, &["a"]),
            ev(1, 40, JobState::Running, &["a"]),
        ];
        assert_eq!(
            span(&job_runs(&running, &events, 100)),
            [(10, Some(30), Some(JobState::Requeued)), (40, None, None)]
        );
        // Ended, its end not in the history: at the job's end, else now; how is unknown.
        let events = [ev(1, 10, JobState::Running, &["a"])];
        let ended = job(JobState::Cancelled, Some(10), Some(50));
        assert_eq!(
            span(&job_runs(&ended, &events, 100)),
            [(10, Some(50), None)]
        );
        let ended = job(JobState::Cancelled, Some(10), None);
        assert_eq!(
            span(&job_runs(&ended, &events, 100)),
            [(10, Some(100), None)]
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
        let s = app::timeline::svg(&data(
            &inv,
            Grouping::Rack,
            &r,
            &names,
            &spans,
            0,
            1000,
            1000,
        ));
        assert_eq!(s.matches(r#"class="tl-drain""#).count(), 1);
        assert_eq!(s.matches(r#"class="tl-down""#).count(), 1);
        assert!(s.starts_with("<svg"));
        // Job 7 on two adjacent rows: one link, one bar covering both.
        assert_eq!(s.matches(r#"class="tl-run tl-requeued""#).count(), 1);
        assert!(s.contains(r#"height="31" data-nodes="2""#), "{s}");
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
