//! What does not answer: nodes Slurm finds not responding or down, and scrape targets
//! failing in a row.

use app::model::NodeState;
use app::units;

use super::{Condition, RuleState, Tick};

/// A node Slurm has not responding or down (a warning).
pub(super) fn node_not_responding(t: &Tick<'_>, _: &mut RuleState, out: &mut Vec<Condition>) {
    for n in &t.ov.nodes {
        if matches!(n.state, NodeState::NotResponding | NodeState::Down) {
            out.push(Condition {
                rule: "node_not_responding",
                subject: format!("node:{}", n.name),
                severity: "warning",
                summary: format!("{}: {} in Slurm", n.name, n.state.label()),
                link: units::node_href(&n.name),
                drain_node: None,
            });
        }
    }
}

/// A scrape target failing `target_failures` times in a row (a warning).
pub(super) fn target_down(t: &Tick<'_>, _: &mut RuleState, out: &mut Vec<Condition>) {
    for target in t.f.targets {
        if target.consecutive_failures >= t.cfg.target_failures {
            out.push(Condition {
                rule: "target_down",
                subject: format!("target:{}", target.url),
                severity: "warning",
                summary: format!(
                    "{} failed {} scrapes in a row: {}",
                    target.url,
                    target.consecutive_failures,
                    target.last_error.as_deref().unwrap_or("?")
                ),
                link: "/api/targets".into(),
                drain_node: None,
            });
        }
    }
}
