//! What the scheduler shows of a target, the call itself and its read-back.

use std::time::Duration;

use app::actions::ActionKind;
use app::model::{JobState, NodeState};

use super::Actions;
use crate::scheduler::{SchedError, SchedNode};

pub(super) fn has_drain(n: &SchedNode) -> bool {
    n.raw_state.iter().any(|s| s.eq_ignore_ascii_case("DRAIN"))
        || matches!(n.state, NodeState::Draining | NodeState::Drained)
}

/// Resumed: no DRAIN and not down. A brief NOT_RESPONDING right after a resume is Slurm's
/// design (it pings the node), not a failure.
pub(super) fn is_resumed(n: &SchedNode) -> bool {
    !has_drain(n) && n.state != NodeState::Down
}

/// A target as the scheduler shows it.
pub(super) struct Current {
    /// Already in the requested state (nothing to call).
    pub(super) done: bool,
    /// A job's restart count (what a requeue's read-back compares against).
    pub(super) restarts: u32,
    /// A job's excluded nodes (`ExcNodeList`).
    pub(super) excluded: Vec<String>,
    pub(super) state: String,
}

impl Actions {
    /// A target as the scheduler shows it now, or `None` when it does not list it.
    pub(super) async fn current(
        &self,
        kind: ActionKind,
        target: &str,
    ) -> Result<Option<Current>, SchedError> {
        if kind.on_nodes() {
            let nodes = self.sched.nodes().await?;
            Ok(nodes.iter().find(|n| n.name == target).map(|n| Current {
                done: match kind {
                    ActionKind::Drain => has_drain(n),
                    _ => is_resumed(n),
                },
                restarts: 0,
                excluded: Vec::new(),
                state: n.raw_state.join("+"),
            }))
        } else {
            let id = target.parse::<u64>().unwrap_or(0);
            let jobs = self.sched.jobs().await?;
            Ok(jobs.iter().find(|j| j.job.id == id).map(|j| Current {
                done: j.job.state == JobState::Pending,
                restarts: j.restart_count,
                excluded: j.excluded.clone(),
                state: if j.excluded.is_empty() {
                    format!("{} (restarts {})", j.raw_state.join("+"), j.restart_count)
                } else {
                    format!(
                        "{} (restarts {}, excluding {})",
                        j.raw_state.join("+"),
                        j.restart_count,
                        j.excluded.join(",")
                    )
                },
            }))
        }
    }

    /// Whether the scheduler shows `kind` done on `target` (for a requeue, a restart
    /// count past `restarts_before` and every node of `exclude` excluded), with the state
    /// it shows.
    pub(super) async fn read_back(
        &self,
        kind: ActionKind,
        target: &str,
        restarts_before: u32,
        exclude: &[String],
    ) -> Result<Option<(bool, String)>, SchedError> {
        Ok(self.current(kind, target).await?.map(|c| {
            let done = if kind.on_nodes() {
                c.done
            } else {
                c.restarts > restarts_before && exclude.iter().all(|n| c.excluded.contains(n))
            };
            (done, c.state)
        }))
    }

    /// Calls the scheduler for `kind` on `target` as `current` shows it, then reads it
    /// back until the end state shows or the deadline passes. A requeue with `exclude`
    /// keeps the job's earlier exclusions.
    pub(super) async fn act_and_verify(
        &self,
        kind: ActionKind,
        target: &str,
        reason: &str,
        current: &Current,
        exclude: &[String],
    ) -> (&'static str, String) {
        let job_id = target.parse::<u64>().unwrap_or(0);
        let mut all: Vec<String> = Vec::new();
        if !exclude.is_empty() {
            all = current.excluded.clone();
            all.extend(
                exclude
                    .iter()
                    .filter(|n| !current.excluded.contains(n))
                    .cloned(),
            );
        }
        let restarts_before = current.restarts;
        let called = match kind {
            ActionKind::Drain => self.sched.drain(target, reason).await,
            ActionKind::Resume => self.sched.resume(target).await,
            ActionKind::Requeue => self.sched.requeue(job_id, false, &all).await,
            ActionKind::RequeueHold => self.sched.requeue(job_id, true, &all).await,
        };
        if let Err(e) = called {
            // A requeue with exclusions is three calls: say what did land.
            if !exclude.is_empty() {
                if let Ok(Some(c)) = self.current(kind, target).await {
                    if c.restarts > restarts_before {
                        return (
                            "failed",
                            format!("requeued ({}), but the exclusion was not set: {e}", c.state),
                        );
                    }
                }
            }
            return ("failed", e.to_string());
        }
        let deadline = tokio::time::Instant::now() + self.verify_within;
        loop {
            let seen = self.read_back(kind, target, restarts_before, exclude).await;
            let late = tokio::time::Instant::now() >= deadline;
            match seen {
                Ok(Some((true, state))) => return ("ok", format!("verified: {state}")),
                Ok(Some((false, state))) if late => {
                    return (
                        "unverified",
                        format!("called, but the scheduler still shows {state}"),
                    )
                }
                Ok(None) => {
                    return (
                        "unverified",
                        "called, but the scheduler no longer lists it".into(),
                    )
                }
                Err(e) if late => {
                    return (
                        "unverified",
                        format!("called, but reading back failed: {e}"),
                    )
                }
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
}
