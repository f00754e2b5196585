//! The simulator as a scheduler: what Slurm would answer and do, so the embedded default
//! has working drain, resume and requeue. Refusals use Slurm's own words.

use app::model::{JobState, NodeState};

use super::{Sim, SimEvent};
use crate::scheduler::{SchedJob, SchedNode};

/// Slurm's base state and flags for a simulated node.
fn raw_state(s: NodeState) -> Vec<String> {
    let v: &[&str] = match s {
        NodeState::Idle => &["IDLE"],
        NodeState::Allocated => &["ALLOCATED"],
        NodeState::Mixed => &["MIXED"],
        NodeState::Draining => &["ALLOCATED", "DRAIN"],
        NodeState::Drained => &["IDLE", "DRAIN"],
        NodeState::Down => &["DOWN", "NOT_RESPONDING"],
        NodeState::NotResponding => &["IDLE", "NOT_RESPONDING"],
        NodeState::Maintenance => &["IDLE", "MAINTENANCE"],
        NodeState::Reserved => &["IDLE", "RESERVED"],
        NodeState::Planned => &["IDLE", "PLANNED"],
        NodeState::Unknown => &["UNKNOWN"],
    };
    v.iter().map(|x| x.to_string()).collect()
}

impl Sim {
    fn node_index(&self, name: &str) -> Result<usize, String> {
        self.inv
            .nodes
            .iter()
            .position(|n| n.name == name)
            .ok_or_else(|| format!("Invalid node name specified: {name}"))
    }

    /// Every node as Slurm would list it.
    pub fn slurm_nodes(&self) -> Vec<SchedNode> {
        self.nodes
            .iter()
            .zip(&self.inv.nodes)
            .map(|(s, n)| SchedNode {
                name: n.name.clone(),
                state: s.state,
                raw_state: raw_state(s.state),
                reason: s.reason.clone(),
                partitions: vec!["gpu".into()],
                gpus_total: Some(self.gpn as u32),
                gpus_used: Some(if s.job.is_some() { self.gpn as u32 } else { 0 }),
            })
            .collect()
    }

    /// Pending and running jobs as Slurm would list them.
    pub fn slurm_jobs(&self) -> Vec<SchedJob> {
        self.active
            .iter()
            .map(|j| SchedJob {
                job: j.job.clone(),
                raw_state: vec![j.job.state.label().to_ascii_uppercase()],
                state_reason: Some(
                    if j.job.state == JobState::Pending {
                        j.q.reason
                    } else {
                        "None"
                    }
                    .into(),
                ),
                restart_count: j.restart_count,
                exit_code: None,
                node_count: j.nodes_needed as u32,
                segment_size: j.segment.map(|s| s as u32),
                excluded: j
                    .excluded
                    .iter()
                    .map(|&i| self.inv.nodes[i].name.clone())
                    .collect(),
                queue: crate::scheduler::QueueFacts {
                    time_limit_ms: Some(j.q.time_limit_ms),
                    est_start_ms: j.q.est_start_ms,
                    priority: Some(j.q.priority),
                    dependency: j.q.after.map(|a| format!("afterok:{a}(unfulfilled)")),
                    qos: Some(j.q.qos.name().into()),
                },
            })
            .collect()
    }

    /// `scontrol update NodeName=.. State=DRAIN Reason=..`.
    pub fn drain_node(&mut self, name: &str, reason: &str) -> Result<(), String> {
        let i = self.node_index(name)?;
        let n = &mut self.nodes[i];
        n.state = match n.state {
            NodeState::Allocated | NodeState::Mixed | NodeState::Draining => NodeState::Draining,
            NodeState::Down => NodeState::Down,
            _ if n.job.is_some() => NodeState::Draining,
            _ => NodeState::Drained,
        };
        n.reason = Some(reason.to_string());
        Ok(())
    }

    /// `scontrol update NodeName=.. State=RESUME`.
    pub fn resume_node(&mut self, name: &str) -> Result<(), String> {
        let i = self.node_index(name)?;
        let n = &mut self.nodes[i];
        n.state = match n.state {
            NodeState::Draining => NodeState::Allocated,
            NodeState::Drained | NodeState::Down | NodeState::NotResponding => NodeState::Idle,
            _ => return Err("Invalid node state specified".into()),
        };
        n.reason = None;
        n.back_at_ms = None;
        self.schedule();
        Ok(())
    }

    /// `scontrol requeue ID` / `scontrol requeuehold ID`; with `exclude`, its
    /// `ExcNodeList` set to those nodes (Slurm refuses a name it does not know).
    pub fn requeue_job(&mut self, id: u64, hold: bool, exclude: &[String]) -> Result<(), String> {
        let Some(j) = self.active.iter().position(|j| j.job.id == id) else {
            return Err(format!("Invalid job id specified: {id}"));
        };
        let mut excluded = Vec::with_capacity(exclude.len());
        for name in exclude {
            let Some(i) = self.inv.nodes.iter().position(|n| &n.name == name) else {
                return Err(format!("Invalid node name specified: {name}"));
            };
            excluded.push(i);
        }
        let t = self.t_ms;
        if self.active[j].job.state == JobState::Pending {
            return Err(format!("Job is pending execution for job {id}"));
        }
        self.ledger_run_ended(j, t, JobState::Requeued, true);
        let sj = &mut self.active[j];
        let banked = sj.banked(t);
        let nodes = std::mem::take(&mut sj.node_idx);
        let mut ended = sj.job.clone();
        ended.end_ms = Some(t);
        ended.state = JobState::Requeued;
        sj.job.state = JobState::Pending;
        sj.job.start_ms = None;
        sj.job.nodes.clear();
        sj.restart_count += 1;
        sj.held = hold;
        if !exclude.is_empty() {
            sj.excluded = excluded;
        }
        sj.fault = None;
        sj.straggle = None;
        sj.hang_from_ms = None;
        sj.eligible_ms = t + 120_000;
        let gpus = sj.job.gpus;
        self.release(&nodes, banked);
        self.end_slowdowns(id, t);
        self.note_interruption(super::TruthInterruption {
            job: id,
            at_ms: t,
            gpus,
            cause: app::reliability::Cause::Planned,
            evidence: true,
            node: None,
        });
        self.events.push(SimEvent::JobRequeued {
            job: ended,
            at_ms: t,
        });
        self.schedule();
        Ok(())
    }
}
