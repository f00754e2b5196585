//! How `/nodes` orders and filters its rows, and the URL that keeps both.

use crate::model::NodeState;
use crate::views::NodeRow;

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

/// The rows `filter` keeps (name, state or rack, any case), in `sort`'s order.
pub(crate) fn arrange(nodes: &[NodeRow], filter: &str, sort: Sort) -> Vec<NodeRow> {
    let f = filter.to_ascii_lowercase();
    let mut rows: Vec<NodeRow> = nodes
        .iter()
        .filter(|n| {
            f.is_empty()
                || n.name.to_ascii_lowercase().contains(&f)
                || n.state.label().contains(&f)
                || n.rack.to_ascii_lowercase().contains(&f)
        })
        .cloned()
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

/// `/nodes` with `filter` and `sort` in its query.
pub(super) fn nodes_href(filter: &str, sort: Sort) -> String {
    let mut q = Vec::new();
    if !filter.is_empty() {
        q.push(format!("filter={}", crate::nav::encode_component(filter)));
    }
    if sort != Sort::Name {
        q.push(format!("sort={}", sort.word()));
    }
    if q.is_empty() {
        "/nodes".into()
    } else {
        format!("/nodes?{}", q.join("&"))
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
    use super::{arrange, fingerprint, nodes_href, Sort};
    use crate::model::NodeState;
    use crate::views::NodeRow;

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
            names(arrange(&nodes, "", Sort::Problems)),
            ["gpu004", "gpu005", "gpu003", "gpu002", "gpu001"]
        );
        assert_eq!(
            names(arrange(&nodes, "a02", Sort::Gpus)),
            ["gpu003", "gpu005", "gpu004"]
        );
        assert_eq!(names(arrange(&nodes, "DRAIN", Sort::Name)), ["gpu002"]);
        assert_eq!(Sort::parse(Some("problems")), Sort::Problems);
        assert_eq!(Sort::parse(Some("nonsense")), Sort::Name);
        assert_eq!(nodes_href("", Sort::Name), "/nodes");
        assert_eq!(
            nodes_href("rack A", Sort::Problems),
            "/nodes?filter=rack%20A&sort=problems"
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
}
