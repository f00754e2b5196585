//! How `/nodes` and `/jobs` filter, order and cut their rows into pages (on the server),
//! and the URLs that keep all three.

use crate::queue::WaitKind;
#[cfg(any(feature = "ssr", feature = "hydrate"))]
use crate::views::NodesView;
#[cfg(feature = "ssr")]
use crate::{
    model::NodeState,
    views::{JobRow, ListQuery, NodeRow, PageOf, WaitCount, LIST_PAGE},
};

/// How `/nodes` orders its rows (`?sort=`): by name (the default), rack, state, GPUs used
/// (most first), or problems first (down or a critical incident, then a warning incident,
/// then drained; by name within each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sort {
    Name,
    Rack,
    State,
    Gpus,
    Problems,
}

impl Sort {
    const ALL: [(Sort, &'static str); 5] = [
        (Sort::Name, "name"),
        (Sort::Rack, "rack"),
        (Sort::State, "state"),
        (Sort::Gpus, "gpus"),
        (Sort::Problems, "problems"),
    ];

    pub(crate) fn parse(s: Option<&str>) -> Sort {
        Sort::ALL
            .iter()
            .find(|(_, w)| Some(*w) == s)
            .map_or(Sort::Name, |(k, _)| *k)
    }

    pub(super) fn word(self) -> &'static str {
        Sort::ALL
            .iter()
            .find(|(k, _)| *k == self)
            .map_or("name", |(_, w)| w)
    }
}

#[cfg(feature = "ssr")]
/// How bad a node's trouble is, worst first: down or a critical incident, a warning
/// incident, drained or in maintenance, none.
pub(crate) fn problem_rank(n: &NodeRow) -> u8 {
    let down = matches!(n.state, NodeState::Down | NodeState::NotResponding);
    match n.worst_incident.as_deref() {
        Some("critical") => 0,
        _ if down => 0,
        Some(_) => 1,
        None if matches!(
            n.state,
            NodeState::Drained | NodeState::Draining | NodeState::Maintenance
        ) =>
        {
            2
        }
        None => 3,
    }
}

#[cfg(feature = "ssr")]
/// The rows `filter` keeps (name, state or rack, any case), in `sort`'s order.
pub(crate) fn arrange(nodes: Vec<NodeRow>, filter: &str, sort: Sort) -> Vec<NodeRow> {
    let f = filter.to_ascii_lowercase();
    let mut rows: Vec<NodeRow> = nodes
        .into_iter()
        .filter(|n| {
            f.is_empty()
                || n.name.to_ascii_lowercase().contains(&f)
                || n.state.label().contains(&f)
                || n.rack.to_ascii_lowercase().contains(&f)
        })
        .collect();
    match sort {
        Sort::Name => rows.sort_by(|a, b| a.name.cmp(&b.name)),
        Sort::Rack => rows.sort_by(|a, b| (&a.rack, &a.name).cmp(&(&b.rack, &b.name))),
        Sort::State => {
            rows.sort_by(|a, b| (a.state.label(), &a.name).cmp(&(b.state.label(), &b.name)))
        }
        Sort::Gpus => rows.sort_by(|a, b| {
            (std::cmp::Reverse(a.gpus_used), &a.name)
                .cmp(&(std::cmp::Reverse(b.gpus_used), &b.name))
        }),
        Sort::Problems => {
            rows.sort_by(|a, b| (problem_rank(a), &a.name).cmp(&(problem_rank(b), &b.name)))
        }
    }
    rows
}

#[cfg(feature = "ssr")]
/// What the whole view `v` shows for `q`: one list (nodes, or jobs with those holding GPUs
/// idle), filtered, ordered and cut to a page of [`LIST_PAGE`] rows, with where that page
/// stands. The server answers this, so a refresh carries a page whatever the fleet's size.
pub(crate) fn select(mut v: NodesView, q: ListQuery) -> NodesView {
    if q.jobs {
        v.nodes = Vec::new();
        v.racks = Vec::new();
        let jobs = std::mem::take(&mut v.jobs);
        v.wait_counts = WaitKind::ALL
            .into_iter()
            .map(|kind| WaitCount {
                kind,
                jobs: jobs
                    .iter()
                    .filter(|j| j.wait.as_ref().is_some_and(|w| w.kind == kind))
                    .count() as u32,
            })
            .collect();
        let mut idle: Vec<JobRow> = jobs.iter().filter(|j| j.idle.is_some()).cloned().collect();
        idle.sort_by_key(|j| (j.idle.as_ref().map(|h| h.since_ms), j.id));
        v.idle_total = idle.len() as u32;
        idle.truncate(LIST_PAGE);
        v.idle = idle;
        let all = jobs.len();
        let want = WaitKind::parse(&q.wait);
        let kept: Vec<JobRow> = jobs
            .into_iter()
            .filter(|j| want.is_none() || j.wait.as_ref().map(|w| w.kind) == want)
            .collect();
        (v.jobs, v.page) = page(kept, all, q.page);
    } else {
        v.jobs = Vec::new();
        let all = v.nodes.len();
        let rows = arrange(
            std::mem::take(&mut v.nodes),
            &q.filter,
            Sort::parse(Some(&q.sort)),
        );
        (v.nodes, v.page) = page(rows, all, q.page);
    }
    v.query = q;
    v
}

/// Fingerprints `v`'s rows (`rows_hash`); when the asker holds rows of the same
/// fingerprint (`have`), leaves them out and says so (`unchanged`): most refreshes find
/// the scheduler's rows as they were, and the page then decodes and diffs nothing.
#[cfg(feature = "ssr")]
pub(crate) fn leave_out_held(mut v: NodesView, have: Option<u64>) -> NodesView {
    v.rows_hash = fingerprint(&(
        &v.nodes,
        &v.jobs,
        &v.idle,
        v.idle_total,
        &v.racks,
        &v.wait_counts,
        v.page,
    ));
    if have == Some(v.rows_hash) {
        v.unchanged = true;
        v.nodes = Vec::new();
        v.jobs = Vec::new();
        v.idle = Vec::new();
        v.racks = Vec::new();
        v.wait_counts = Vec::new();
    }
    v
}

/// `held` refreshed by `fresh`: everything of `fresh`, but the rows of `held` when `fresh`
/// left them out as unchanged; `None` when it left out rows `held` does not hold (the page
/// changed meanwhile: the next refresh brings them).
#[cfg(any(feature = "hydrate", test))]
pub(crate) fn refreshed(held: &NodesView, mut fresh: NodesView) -> Option<NodesView> {
    if fresh.unchanged {
        if fresh.rows_hash != held.rows_hash || fresh.query != held.query {
            return None;
        }
        fresh.nodes = held.nodes.clone();
        fresh.jobs = held.jobs.clone();
        fresh.idle = held.idle.clone();
        fresh.racks = held.racks.clone();
        fresh.wait_counts = held.wait_counts.clone();
        fresh.unchanged = false;
    }
    Some(fresh)
}

#[cfg(feature = "ssr")]
/// Page `want` (from 1, held within the list) of `rows`, which `all` rows were filtered to.
fn page<T>(mut rows: Vec<T>, all: usize, want: u32) -> (Vec<T>, PageOf) {
    let total = rows.len();
    let pages = total.div_ceil(LIST_PAGE).max(1);
    let page = (want as usize).clamp(1, pages);
    let first = (page - 1) * LIST_PAGE;
    rows.truncate(first + LIST_PAGE);
    rows.drain(..first.min(rows.len()));
    let at = PageOf {
        first: first as u32,
        shown: rows.len() as u32,
        total: total as u32,
        all: all as u32,
        page: page as u32,
        pages: pages as u32,
    };
    (rows, at)
}

/// `/nodes` with `filter`, `sort` and `page` in its query (the defaults left out).
pub(super) fn nodes_href(filter: &str, sort: Sort, page: u32) -> String {
    let mut q = Vec::new();
    if !filter.is_empty() {
        q.push(format!("filter={}", crate::nav::encode_component(filter)));
    }
    if sort != Sort::Name {
        q.push(format!("sort={}", sort.word()));
    }
    if page > 1 {
        q.push(format!("page={page}"));
    }
    if q.is_empty() {
        "/nodes".into()
    } else {
        format!("/nodes?{}", q.join("&"))
    }
}

/// `/jobs` with `wait` and `page` in its query (the defaults left out).
pub(super) fn jobs_href(wait: Option<WaitKind>, page: u32) -> String {
    let mut q = Vec::new();
    if let Some(w) = wait {
        q.push(format!("wait={}", w.as_str()));
    }
    if page > 1 {
        q.push(format!("page={page}"));
    }
    if q.is_empty() {
        "/jobs".into()
    } else {
        format!("/jobs?{}", q.join("&"))
    }
}

/// A row's content as a number, for keying table rows: a row whose fingerprint is the same
/// keeps its DOM on a refresh, so only changed rows are touched. Hashes the row's `Debug`
/// form without building it.
pub(crate) fn fingerprint(row: &impl std::fmt::Debug) -> u64 {
    use std::fmt::Write;
    use std::hash::Hasher;
    struct Into<H: Hasher>(H);
    impl<H: Hasher> Write for Into<H> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.write(s.as_bytes());
            Ok(())
        }
    }
    let mut h = Into(std::collections::hash_map::DefaultHasher::new());
    let _ = write!(h, "{row:?}");
    h.0.finish()
}

#[cfg(test)]
mod tests {
    use super::{arrange, fingerprint, jobs_href, nodes_href, select, Sort};
    use crate::model::{JobState, NodeState};
    use crate::queue::WaitKind;
    use crate::views::{JobRow, ListQuery, NodeRow, NodesView, PageOf, LIST_PAGE};

    fn row(name: &str, rack: &str, state: NodeState, worst: Option<&str>, used: u32) -> NodeRow {
        NodeRow {
            name: name.into(),
            rack: rack.into(),
            state,
            raw_state: String::new(),
            reason: None,
            gpus_total: Some(8),
            gpus_used: Some(used),
            jobs: Vec::new(),
            incidents: u32::from(worst.is_some()),
            worst_incident: worst.map(String::from),
        }
    }

    #[test]
    fn problems_come_first_and_the_url_keeps_the_order_and_filter() {
        let nodes = [
            row("gpu001", "A01", NodeState::Allocated, None, 8),
            row("gpu002", "A01", NodeState::Drained, None, 0),
            row("gpu003", "A02", NodeState::Allocated, Some("warning"), 8),
            row("gpu004", "A02", NodeState::Down, None, 0),
            row("gpu005", "A02", NodeState::Allocated, Some("critical"), 4),
        ];
        let names = |v: Vec<NodeRow>| v.into_iter().map(|n| n.name).collect::<Vec<_>>();
        assert_eq!(
            names(arrange(nodes.to_vec(), "", Sort::Problems)),
            ["gpu004", "gpu005", "gpu003", "gpu002", "gpu001"]
        );
        assert_eq!(
            names(arrange(nodes.to_vec(), "a02", Sort::Gpus)),
            ["gpu003", "gpu005", "gpu004"]
        );
        assert_eq!(
            names(arrange(nodes.to_vec(), "DRAIN", Sort::Name)),
            ["gpu002"]
        );
        assert_eq!(Sort::parse(Some("problems")), Sort::Problems);
        assert_eq!(Sort::parse(Some("nonsense")), Sort::Name);
        assert_eq!(nodes_href("", Sort::Name, 1), "/nodes");
        assert_eq!(
            nodes_href("rack A", Sort::Problems, 3),
            "/nodes?filter=rack%20A&sort=problems&page=3"
        );
        assert_eq!(jobs_href(None, 1), "/jobs");
        assert_eq!(
            jobs_href(Some(WaitKind::Resources), 2),
            "/jobs?wait=resources&page=2"
        );
    }

    #[test]
    fn a_row_keeps_its_fingerprint_until_its_content_changes() {
        let a = row("gpu001", "r1", NodeState::Idle, None, 0);
        let mut b = a.clone();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        b.gpus_used = Some(8);
        assert_ne!(fingerprint(&a), fingerprint(&b));
        b.gpus_used = a.gpus_used;
        b.reason = Some("ECC".into());
        assert_ne!(fingerprint(&a), fingerprint(&b));
    }

    fn job(id: u64, state: JobState) -> JobRow {
        JobRow {
            id,
            name: format!("job{id}"),
            user: "u".into(),
            state,
            nodes: Vec::new(),
            gpus: 8,
            start_ms: None,
            restart_count: 0,
            reason: None,
            time_limit_ms: None,
            wait: None,
            idle: None,
        }
    }

    #[test]
    fn a_view_carries_one_list_a_page_at_a_time() {
        let n = 2 * LIST_PAGE + 37;
        let whole = NodesView {
            racks: vec!["r1".into()],
            nodes: (0..n)
                .map(|i| row(&format!("gpu{i:04}"), "r1", NodeState::Idle, None, 0))
                .collect(),
            jobs: (1..=5).map(|i| job(i, JobState::Running)).collect(),
            ..Default::default()
        };
        let nodes = |p: u32, filter: &str| {
            select(
                whole.clone(),
                ListQuery {
                    filter: filter.into(),
                    page: p,
                    ..Default::default()
                },
            )
        };
        // The first page is page 1 (and 0 reads as 1); no jobs ride along.
        for p in [0, 1] {
            let v = nodes(p, "");
            assert_eq!(v.nodes.len(), LIST_PAGE);
            assert_eq!(v.nodes[0].name, "gpu0000");
            assert!(v.jobs.is_empty());
            assert_eq!(v.racks, ["r1"]);
            let at = PageOf {
                first: 0,
                shown: LIST_PAGE as u32,
                total: n as u32,
                all: n as u32,
                page: 1,
                pages: 3,
            };
            assert_eq!(v.page, at);
        }
        // The last page holds the rest; past it is the last.
        for p in [3, 4, u32::MAX] {
            let v = nodes(p, "");
            assert_eq!(v.nodes.len(), 37);
            assert_eq!(v.nodes[0].name, format!("gpu{:04}", 2 * LIST_PAGE));
            assert_eq!(
                (v.page.page, v.page.first, v.page.shown),
                (3, 2 * LIST_PAGE as u32, 37)
            );
        }
        // A filter counts what it kept, of all.
        let v = nodes(1, "gpu000");
        assert_eq!(v.nodes.len(), 10);
        assert_eq!((v.page.total, v.page.all, v.page.pages), (10, n as u32, 1));
        // Nothing kept is one empty page.
        let v = nodes(2, "nothing");
        assert!(v.nodes.is_empty());
        assert_eq!((v.page.page, v.page.pages, v.page.shown), (1, 1, 0));
        // The query comes back as asked, for the page to match its answer to its URL.
        assert_eq!(v.query.filter, "nothing");
    }

    #[test]
    fn the_jobs_list_pages_filters_by_wait_and_counts_over_every_job() {
        use crate::queue::{IdleHeld, Wait};
        let mut whole = NodesView {
            racks: vec!["r1".into()],
            nodes: vec![row("gpu001", "r1", NodeState::Idle, None, 0)],
            jobs: (1..=(LIST_PAGE as u64 + 10))
                .map(|i| job(i, JobState::Pending))
                .collect(),
            ..Default::default()
        };
        let wait = |kind| Wait {
            kind,
            reason: String::new(),
            words: String::new(),
            est_start_ms: None,
            ahead: 0,
        };
        for j in whole.jobs.iter_mut() {
            j.wait = Some(wait(if j.id % 2 == 0 {
                WaitKind::Priority
            } else {
                WaitKind::Resources
            }));
        }
        for (id, since) in [(3, 300), (7, 100)] {
            let j = &mut whole.jobs[id - 1];
            j.state = JobState::Running;
            j.wait = None;
            j.idle = Some(IdleHeld {
                job: id as u64,
                gpus: 8,
                of: 8,
                since_ms: since,
                gpu_hours: 1.0,
            });
        }
        let q = |wait: &str, page| ListQuery {
            jobs: true,
            wait: wait.into(),
            page,
            ..Default::default()
        };
        let v = select(whole.clone(), q("", 2));
        assert!(v.nodes.is_empty() && v.racks.is_empty());
        assert_eq!(v.jobs.len(), 10);
        assert_eq!((v.page.total, v.page.all, v.page.pages), (210, 210, 2));
        // Idle holders longest first, whatever the page.
        assert_eq!(v.idle.iter().map(|j| j.id).collect::<Vec<_>>(), [7, 3]);
        assert_eq!(v.idle_total, 2);
        let count = |v: &NodesView, k| v.wait_counts.iter().find(|c| c.kind == k).map(|c| c.jobs);
        assert_eq!(count(&v, WaitKind::Priority), Some(105));
        assert_eq!(count(&v, WaitKind::Resources), Some(103));
        // The filter keeps one reason; its counts stay over every job.
        let v = select(whole, q("priority", 1));
        assert_eq!(v.jobs.len(), 105);
        assert!(v.jobs.iter().all(|j| j.id % 2 == 0));
        assert_eq!((v.page.total, v.page.all), (105, 210));
        assert_eq!(count(&v, WaitKind::Resources), Some(103));
    }

    #[test]
    fn a_refresh_leaves_out_the_rows_the_page_holds() {
        use super::{leave_out_held, refreshed};
        let whole = NodesView {
            racks: vec!["r1".into()],
            nodes: (0..3)
                .map(|i| row(&format!("gpu{i}"), "r1", NodeState::Idle, None, 0))
                .collect(),
            ..Default::default()
        };
        let q = ListQuery::default();
        let first = leave_out_held(select(whole.clone(), q.clone()), None);
        assert!(!first.unchanged);
        assert_eq!(first.nodes.len(), 3);
        // The same rows again, asked by a page that holds them: left out...
        let mut again = whole.clone();
        again.at_ms = 99;
        let again = leave_out_held(select(again, q.clone()), Some(first.rows_hash));
        assert!(again.unchanged);
        assert!(again.nodes.is_empty() && again.racks.is_empty());
        // ...and the page keeps its own, with the new time.
        let merged = refreshed(&first, again.clone()).expect("same rows");
        assert_eq!(merged.nodes, first.nodes);
        assert_eq!(merged.racks, first.racks);
        assert_eq!(merged.at_ms, 99);
        assert!(!merged.unchanged);
        // A page holding other rows drops such an answer rather than show none.
        let mut other = first.clone();
        other.rows_hash ^= 1;
        assert_eq!(refreshed(&other, again), None);
        // A row that changed comes whole, whatever the asker holds.
        let mut changed = whole.clone();
        changed.nodes[1].gpus_used = Some(8);
        let changed = leave_out_held(select(changed, q), Some(first.rows_hash));
        assert!(!changed.unchanged);
        assert_eq!(changed.nodes.len(), 3);
        assert_ne!(changed.rows_hash, first.rows_hash);
        let merged = refreshed(&first, changed.clone()).expect("rows sent");
        assert_eq!(merged, changed);
    }
}
