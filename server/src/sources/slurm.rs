//! A real Slurm as the live source: one poll per interval for every browser (so
//! slurmctld's RPC count does not grow with viewers), job history from transitions, and
//! an overview published after each successful poll. A failed poll publishes nothing, so
//! views age into "stale" instead of showing old data as current.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use app::model::{Cooling, Gpu, GpuReading, Inventory, JobState, Node, Rack, RackReading};
use tokio::sync::watch;

use super::json::{SlurmJob, SlurmNode};
use crate::aggregate::Readings;
use crate::live::{wall_now_ms, Live, SchedSnapshot, StoreQueue, StoreWrite};
use crate::scheduler::Scheduler;

/// Nodes per rack when Slurm is the only source of layout.
const NODES_PER_RACK: usize = 8;

/// A layout from Slurm's node list alone: nodes in name order, eight to a rack, one row.
/// (Rows, U positions, PDUs and rack limits come from a layout file; see ARCHITECTURE.md.)
pub fn inventory_from_nodes(cluster: &str, nodes: &[SlurmNode]) -> Inventory {
    let mut names: Vec<&SlurmNode> = nodes.iter().collect();
    names.sort_by(|a, b| a.name.cmp(&b.name));
    let racks: Vec<Rack> = (0..names.len().div_ceil(NODES_PER_RACK))
        .map(|i| Rack {
            name: format!("rack{:02}", i + 1),
            row: "row1".into(),
            position: i as u32,
            power_limit_watts: 44_000.0,
            cooling: Cooling::Air,
            inlet_limit_celsius: 35.0,
        })
        .collect();
    let nodes = names
        .iter()
        .enumerate()
        .map(|(i, n)| Node {
            name: n.name.clone(),
            rack: format!("rack{:02}", i / NODES_PER_RACK + 1),
            u_position: (i % NODES_PER_RACK) as u32 * 5 + 1,
            u_height: 4,
            gpus: (0..n.gpus_total.unwrap_or(0))
                .map(|g| Gpu {
                    index: g,
                    uuid: String::new(),
                    model: String::new(),
                    max_power_watts: 700.0,
                })
                .collect(),
            domains: Vec::new(),
        })
        .collect();
    Inventory {
        cluster: cluster.into(),
        rows: vec!["row1".into()],
        racks,
        nodes,
        domains: Vec::new(),
    }
}

/// A transition's words: Slurm's reason and, for a finished job, its exit code.
fn detail_of(j: &SlurmJob) -> String {
    let mut parts = Vec::new();
    if let Some(r) = &j.state_reason {
        parts.push(r.clone());
    }
    if j.job.state.is_finished() {
        if let Some(c) = j.exit_code {
            parts.push(format!("exit code {c}"));
        }
    }
    parts.join("; ")
}

/// Job transitions between two polls, as store writes: a new job, a state change, a
/// requeue (seen as a higher restart count, even when both polls say PENDING or RUNNING).
pub fn transitions(
    prev: &HashMap<u64, (JobState, u32)>,
    jobs: &[SlurmJob],
    at_ms: i64,
) -> Vec<StoreWrite> {
    let mut out = Vec::new();
    for j in jobs {
        let before = prev.get(&j.job.id);
        if let Some(&(_, restarts)) = before {
            if j.restart_count > restarts {
                let mut requeued = j.job.clone();
                requeued.state = JobState::Requeued;
                out.push(StoreWrite::Job {
                    job: Box::new(requeued),
                    at_ms,
                    detail: format!("restart {}", j.restart_count),
                });
            }
        }
        if before.is_none_or(|&(s, r)| s != j.job.state || r != j.restart_count) {
            out.push(StoreWrite::Job {
                job: Box::new(j.job.clone()),
                at_ms,
                detail: detail_of(j),
            });
        }
    }
    out
}

/// Settings of the Slurm source task.
pub struct SlurmSource {
    pub sched: Arc<dyn Scheduler>,
    /// Where nodes are on the floor; `None`: eight to a rack in name order.
    pub layout: Option<crate::layout::Layout>,
    pub cluster: String,
    pub interval_ms: u64,
    /// Telemetry from each node's exporters: the scraper and the GPU and BMC URL templates;
    /// its targets follow Slurm's node list. `None`: no telemetry.
    /// Scraped by its own task (`ingest::run_scraper`); the source sets its targets and
    /// reads the latest.
    /// With the GPU, BMC and (optional) node_exporter URL templates.
    pub telemetry: Option<(crate::ingest::SharedIngest, String, String, Option<String>)>,
    pub scrape_interval_ms: u64,
    /// Allocated GPUs under this SM activity count as idle in reports.
    pub idle_below_sm: f64,
}

/// Polls Slurm (and scrapes the nodes' exporters, if configured) until `shutdown`.
pub async fn run_slurm_source(
    src: SlurmSource,
    live: Arc<Live>,
    q: StoreQueue,
    mut shutdown: watch::Receiver<bool>,
) {
    let SlurmSource {
        sched,
        layout,
        cluster,
        interval_ms,
        telemetry,
        scrape_interval_ms,
        idle_below_sm,
    } = src;
    let mut reports = crate::reports::Accumulator::new(idle_below_sm);
    let (ingest, gpu_t, bmc_t, node_t) = match telemetry {
        Some((i, g, b, n)) => (Some(i), g, b, n),
        None => (None, String::new(), String::new(), None),
    };
    let mut ticker = tokio::time::interval(Duration::from_millis(interval_ms));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut seq = 0u64;
    let mut inventory: Option<Arc<Inventory>> = None;
    let mut prev: HashMap<u64, (JobState, u32)> = HashMap::new();
    let mut failing = false;
    let mut node_history = crate::live::NodeStates::default();
    let mut minutes = crate::live::MinuteRollups::default();
    let mut hours = crate::live::HourRollups::default();
    let mut reasons = crate::live::ReasonCounter::default();
    let mut prev_now: Option<i64> = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = live.poked() => {}
            _ = shutdown.changed() => break,
        }
        if *shutdown.borrow() {
            break;
        }
        let polled = async {
            Ok::<_, crate::scheduler::SchedError>((sched.nodes().await?, sched.jobs().await?))
        };
        let (nodes, jobs) = match polled.await {
            Ok(x) => {
                if failing {
                    tracing::info!("Slurm answers again");
                    failing = false;
                }
                x
            }
            Err(e) => {
                // Logged when it starts failing, counted always; views go stale.
                if !failing {
                    tracing::warn!(error = %e, "Slurm poll failed");
                    failing = true;
                }
                live.metrics
                    .slurm_poll_errors_total
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                continue;
            }
        };
        let now = wall_now_ms();
        let same_nodes = inventory.as_ref().is_some_and(|inv| {
            let placed = inv
                .nodes
                .iter()
                .filter(|n| nodes.iter().any(|m| m.name == n.name))
                .count();
            placed == nodes.len()
                && nodes
                    .iter()
                    .all(|n| inv.nodes.iter().any(|m| m.name == n.name))
        });
        if !same_nodes {
            let inv = Arc::new(match &layout {
                Some(l) => crate::layout::place(
                    l,
                    &nodes
                        .iter()
                        .map(|n| (n.name.clone(), n.gpus_total.unwrap_or(0)))
                        .collect::<Vec<_>>(),
                ),
                None => inventory_from_nodes(&cluster, &nodes),
            });
            if let Some(ing) = ingest.as_ref() {
                ing.lock().unwrap_or_else(|e| e.into_inner()).set_targets(
                    crate::ingest::with_node_exporter(
                        crate::ingest::targets(&inv, &gpu_t, &bmc_t),
                        node_t.as_deref(),
                    ),
                );
            }
            q.send(StoreWrite::Inventory(Box::new((*inv).clone())));
            live.set_inventory(Arc::clone(&inv));
            inventory = Some(inv);
        }
        let Some(inv) = inventory.clone() else {
            continue;
        };
        for w in transitions(&prev, &jobs, now) {
            if let StoreWrite::Job { job, at_ms, .. } = &w {
                if crate::reports::loses_work(job.state) {
                    reports.job_lost(job, *at_ms, live.last_checkpoint(job.id));
                }
            }
            q.send(w);
        }
        prev = jobs
            .iter()
            .map(|j| (j.job.id, (j.job.state, j.restart_count)))
            .collect();
        node_history.observe(
            &q,
            now,
            &nodes
                .iter()
                .map(|n| {
                    (
                        n.name.clone(),
                        n.state,
                        n.reason.clone().unwrap_or_default(),
                    )
                })
                .collect::<Vec<_>>(),
        );
        let node_states: Vec<(String, app::model::NodeState)> =
            nodes.iter().map(|n| (n.name.clone(), n.state)).collect();
        let active: Vec<app::model::Job> = jobs
            .iter()
            .filter(|j| matches!(j.job.state, JobState::Pending | JobState::Running))
            .map(|j| j.job.clone())
            .collect();
        let readings = match ingest.as_ref() {
            Some(ing) => {
                let ing = ing.lock().unwrap_or_else(|e| e.into_inner());
                ing.readings(
                    &inv,
                    wall_now_ms(),
                    now,
                    2 * scrape_interval_ms.max(interval_ms) as i64,
                    node_states,
                    active,
                )
            }
            // No telemetry: every GPU is present and not reporting.
            None => Readings {
                at_ms: now,
                gpus: inv
                    .nodes
                    .iter()
                    .flat_map(|n| {
                        n.gpus.iter().map(|g| GpuReading {
                            node: n.name.clone(),
                            index: g.index,
                            ..GpuReading::default()
                        })
                    })
                    .collect(),
                racks: inv
                    .racks
                    .iter()
                    .map(|r| RackReading {
                        rack: r.name.clone(),
                        ..RackReading::default()
                    })
                    .collect(),
                node_power_watts: vec![None; node_states.len()],
                nodes: node_states,
                jobs: active,
                ..Readings::default()
            },
        };
        live.set_sched(SchedSnapshot {
            at_ms: now,
            polled_ms: now,
            interval_ms: interval_ms as i64,
            nodes,
            jobs,
        });
        seq += 1;
        let mut ov = crate::aggregate::overview(&inv, &readings, seq, interval_ms as i64, now);
        ov.summary.alerts_firing = live.alerts_firing();
        let by_reason = reasons.count(&ov, &readings);
        for r in minutes.add(&ov, &by_reason, prev_now.map(|p| now - p).unwrap_or(0)) {
            q.send(StoreWrite::Rollup(r));
        }
        for r in hours.add(&ov, &by_reason, prev_now.map(|p| now - p).unwrap_or(0)) {
            q.send(StoreWrite::Rollup1h(r));
        }
        let deltas = reports.observe(&inv, &readings, prev_now.map(|p| now - p).unwrap_or(0));
        if !deltas.is_empty() {
            q.send(StoreWrite::Report(deltas));
        }
        prev_now = Some(now);
        live.record_window(&readings, &ov);
        live.set_latest(crate::live::Latest::Owned(Arc::new(readings)));
        if let Some(prev) = live.current() {
            crate::aggregate::steady(&prev.overview, &mut ov);
        }
        live.publish(ov, None);
        live.metrics
            .slurm_polls_total
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    tracing::info!("Slurm source stopped");
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::model::{Job, NodeState};

    fn job(id: u64, state: JobState, restarts: u32) -> SlurmJob {
        SlurmJob {
            job: Job {
                id,
                name: "train".into(),
                user: "alice".into(),
                account: "a".into(),
                partition: "gpu".into(),
                state,
                nodes: vec!["gpu001".into()],
                gpus: 8,
                submit_ms: 0,
                start_ms: None,
                end_ms: None,
            },
            raw_state: vec![],
            state_reason: None,
            restart_count: restarts,
            exit_code: None,
        }
    }

    fn states(w: &[StoreWrite]) -> Vec<JobState> {
        w.iter()
            .filter_map(|w| match w {
                StoreWrite::Job { job, .. } => Some(job.state),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn transitions_record_changes_and_requeues_once() {
        let mut prev = HashMap::new();
        let first = [job(1, JobState::Running, 0)];
        assert_eq!(states(&transitions(&prev, &first, 1)), [JobState::Running]);
        prev.insert(1, (JobState::Running, 0));
        // Unchanged: nothing written.
        assert!(transitions(&prev, &first, 2).is_empty());
        // Requeued between polls and already running again: the requeue still shows.
        let again = [job(1, JobState::Running, 1)];
        assert_eq!(
            states(&transitions(&prev, &again, 3)),
            [JobState::Requeued, JobState::Running]
        );
        // A finished job's transition keeps its reason and exit code.
        let mut done = job(1, JobState::Failed, 0);
        done.state_reason = Some("NonZeroExitCode".into());
        done.exit_code = Some(3);
        let w = transitions(&prev, &[done], 4);
        let detail = w.iter().find_map(|w| match w {
            StoreWrite::Job { detail, .. } => Some(detail.clone()),
            _ => None,
        });
        assert_eq!(detail.as_deref(), Some("NonZeroExitCode; exit code 3"));
    }

    #[test]
    fn a_layout_from_slurm_alone() {
        let nodes: Vec<SlurmNode> = (1..=10)
            .rev()
            .map(|i| SlurmNode {
                name: format!("gpu{i:03}"),
                state: NodeState::Idle,
                raw_state: vec!["IDLE".into()],
                reason: None,
                partitions: vec![],
                gpus_total: Some(8),
                gpus_used: None,
            })
            .collect();
        let inv = inventory_from_nodes("c", &nodes);
        assert_eq!(inv.racks.len(), 2);
        assert_eq!(inv.nodes[0].name, "gpu001");
        assert_eq!(inv.nodes[9].rack, "rack02");
        assert_eq!(inv.gpu_count(), 80);
    }
}
