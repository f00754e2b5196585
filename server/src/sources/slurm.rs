//! A real Slurm as the live source: one poll per interval for every browser (so
//! slurmctld's RPC count does not grow with viewers), job history from transitions, and
//! an overview published after each successful poll. A failed poll publishes nothing, so
//! views age into "stale" instead of showing old data as current.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use app::model::{Cooling, Gpu, GpuReading, Inventory, JobState, Node, Rack, UnixMs};
use tokio::sync::watch;

use crate::live::{wall_now_ms, Event, Frame, Latest, Live, Pipeline, SchedSnapshot, StoreQueue};
use crate::scheduler::Scheduler;
use crate::scheduler::{SchedJob, SchedNode};
use crate::telemetry::{NodeReading, Readings};

/// Nodes per rack when Slurm is the only source of layout.
const NODES_PER_RACK: usize = 8;

/// A layout from Slurm's node list alone: nodes in name order, eight to a rack, one row.
/// (Rows, U positions, PDUs and rack limits come from a layout file; see docs/configuration.md.)
pub fn inventory_from_nodes(cluster: &str, nodes: &[SchedNode]) -> Inventory {
    let mut names: Vec<&SchedNode> = nodes.iter().collect();
    names.sort_by(|a, b| a.name.cmp(&b.name));
    let racks: Vec<Rack> = (0..names.len().div_ceil(NODES_PER_RACK))
        .map(|i| Rack {
            name: format!("rack{:02}", i + 1),
            row: "row1".into(),
            position: i as u32,
            power_limit_watts: 44_000.0,
            cooling: Cooling::Air,
            inlet_limit_celsius: 35.0,
            coolant_flow_min_lpm: None,
            coolant_delta_t_max_celsius: None,
            chassis_serial: None,
            power_shelves: None,
            power_shelves_redundant: 0,
            switch_trays: None,
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
fn detail_of(j: &SchedJob) -> String {
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

/// Job transitions between two polls, as events: a new job, a state change, a requeue
/// (seen as a higher restart count, even when both polls say PENDING or RUNNING). A
/// finished job's transition is at its end time when Slurm gives one, so the work it lost
/// is counted up to its end, not up to the poll that noticed it.
pub fn transitions(
    prev: &HashMap<u64, (JobState, u32)>,
    jobs: &[SchedJob],
    at_ms: i64,
) -> Vec<Event> {
    let mut out = Vec::new();
    for j in jobs {
        let before = prev.get(&j.job.id);
        if let Some(&(_, restarts)) = before {
            if j.restart_count > restarts {
                let mut requeued = j.job.clone();
                requeued.state = JobState::Requeued;
                out.push(Event::Job {
                    job: requeued,
                    at_ms,
                    detail: format!("restart {}", j.restart_count),
                });
            }
        }
        if before.is_none_or(|&(s, r)| s != j.job.state || r != j.restart_count) {
            let at = match j.job.end_ms {
                Some(end) if j.job.state.is_finished() => end.min(at_ms),
                _ => at_ms,
            };
            out.push(Event::Job {
                job: j.job.clone(),
                at_ms: at,
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
    /// Telemetry from each node's exporters: the scraper (run by its own task,
    /// `sources::scraper`; the source sets its targets and reads the latest) with the
    /// GPU, BMC, (optional) node_exporter, (optional) rack power controller and
    /// (optional) NVLink domain NMX-T URL templates. `None`: no telemetry.
    #[allow(clippy::type_complexity)]
    pub telemetry: Option<(
        crate::telemetry::ingest::SharedIngest,
        String,
        String,
        Option<String>,
        Option<String>,
        Option<String>,
    )>,
    pub scrape_interval_ms: u64,
    /// Allocated GPUs under this SM activity count as idle in reports.
    pub idle_below_sm: f64,
    /// The hang rule's hold, which the badput ledger's hung time follows.
    pub hang_ms: i64,
    /// Where a predecessor's reports stopped ([`Pipeline::resume`]), and the gap allowed.
    pub resume: Option<(UnixMs, i64)>,
}

/// Turns polls of Slurm into frames: the inventory for the node list (the same one while
/// the nodes do not change) and each poll's readings and job transitions.
pub struct SlurmFrames {
    layout: Option<crate::layout::Layout>,
    cluster: String,
    interval_ms: i64,
    inventory: Option<Arc<Inventory>>,
    prev: HashMap<u64, (JobState, u32)>,
}

impl SlurmFrames {
    pub fn new(
        layout: Option<crate::layout::Layout>,
        cluster: &str,
        interval_ms: u64,
    ) -> SlurmFrames {
        SlurmFrames {
            layout,
            cluster: cluster.into(),
            interval_ms: interval_ms as i64,
            inventory: None,
            prev: HashMap::new(),
        }
    }

    /// The inventory of `nodes`, and whether it is new (the node list changed).
    pub fn place(&mut self, nodes: &[SchedNode]) -> (Arc<Inventory>, bool) {
        if let Some(inv) = &self.inventory {
            let same = inv.nodes.len() == nodes.len() && {
                let known: std::collections::HashSet<&str> =
                    inv.nodes.iter().map(|n| n.name.as_str()).collect();
                nodes.iter().all(|n| known.contains(n.name.as_str()))
            };
            if same {
                return (Arc::clone(inv), false);
            }
        }
        let inv = Arc::new(match &self.layout {
            Some(l) => crate::layout::place(
                l,
                &nodes
                    .iter()
                    .map(|n| (n.name.clone(), n.gpus_total.unwrap_or(0)))
                    .collect::<Vec<_>>(),
            ),
            None => inventory_from_nodes(&self.cluster, nodes),
        });
        self.inventory = Some(Arc::clone(&inv));
        (inv, true)
    }

    /// The job transitions since the previous poll.
    pub fn transitions(&mut self, jobs: &[SchedJob], at_ms: UnixMs) -> Vec<Event> {
        let out = transitions(&self.prev, jobs, at_ms);
        self.prev = jobs
            .iter()
            .map(|j| (j.job.id, (j.job.state, j.restart_count)))
            .collect();
        out
    }

    /// One poll at `at_ms` as a frame: readings from what `ingest` holds fresh at `now_ms`
    /// (within `fresh_ms`), or every GPU present and not reporting when there is no
    /// telemetry. `events` are the poll's transitions.
    pub fn frame(
        &self,
        inv: Arc<Inventory>,
        nodes: Vec<SchedNode>,
        jobs: Vec<SchedJob>,
        at_ms: UnixMs,
        ingest: Option<(&crate::telemetry::ingest::Ingest, UnixMs, i64)>,
        events: Vec<Event>,
    ) -> Frame {
        let node_states: Vec<(String, app::model::NodeState)> =
            nodes.iter().map(|n| (n.name.clone(), n.state)).collect();
        let active: Vec<app::model::Job> = jobs
            .iter()
            .filter(|j| matches!(j.job.state, JobState::Pending | JobState::Running))
            .map(|j| j.job.clone())
            .collect();
        let readings = match ingest {
            Some((ing, now_ms, fresh_ms)) => {
                ing.readings(&inv, now_ms, at_ms, fresh_ms, node_states, active)
            }
            None => Readings {
                at_ms,
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
                racks: Vec::new(),
                nodes: node_states
                    .into_iter()
                    .map(|(name, state)| NodeReading::silent(name, state))
                    .collect(),
                jobs: active,
            },
        };
        Frame {
            inventory: inv,
            readings: Latest::Owned(Arc::new(readings)),
            sched: Arc::new(SchedSnapshot {
                at_ms,
                polled_ms: at_ms,
                interval_ms: self.interval_ms,
                nodes,
                jobs,
            }),
            events,
            truth: None,
        }
    }
}

/// Polls Slurm (and takes the nodes' exporters' readings, if configured) until `shutdown`.
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
        hang_ms,
        resume,
    } = src;
    let mut pipeline = Pipeline::new(interval_ms as i64, idle_below_sm);
    pipeline.set_hang_ms(hang_ms);
    if let Some((at, gap)) = resume {
        pipeline.resume(at, gap);
    }
    let mut frames = SlurmFrames::new(layout, &cluster, interval_ms);
    let fresh_ms = 2 * scrape_interval_ms.max(interval_ms) as i64;
    let mut ticker = tokio::time::interval(Duration::from_millis(interval_ms));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut failing = false;
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
        let (inv, new) = frames.place(&nodes);
        if let (true, Some((ing, gpu_t, bmc_t, node_t, rack_t, fabric_t))) =
            (new, telemetry.as_ref())
        {
            let mut ing = ing.lock().unwrap_or_else(|e| e.into_inner());
            ing.set_targets(crate::telemetry::ingest::with_node_exporter(
                crate::telemetry::ingest::targets(&inv, gpu_t, bmc_t),
                node_t.as_deref(),
            ));
            ing.set_rack_targets(crate::telemetry::ingest::rack_targets(
                &inv,
                rack_t.as_deref(),
                fabric_t.as_deref(),
            ));
        }
        let events = frames.transitions(&jobs, now);
        let frame = match telemetry.as_ref() {
            Some((ing, ..)) => {
                let ing = ing.lock().unwrap_or_else(|e| e.into_inner());
                frames.frame(
                    inv,
                    nodes,
                    jobs,
                    now,
                    Some((&ing, wall_now_ms(), fresh_ms)),
                    events,
                )
            }
            None => frames.frame(inv, nodes, jobs, now, None, events),
        };
        pipeline.run(frame, &live, &q);
        live.metrics
            .slurm_polls_total
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    pipeline.finish(&q);
    tracing::info!("Slurm source stopped");
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::model::{Job, NodeState};

    fn job(id: u64, state: JobState, restarts: u32) -> SchedJob {
        SchedJob {
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
            node_count: 1,
            segment_size: None,
        }
    }

    fn states(w: &[Event]) -> Vec<JobState> {
        w.iter()
            .filter_map(|w| match w {
                Event::Job { job, .. } => Some(job.state),
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
            Event::Job { detail, .. } => Some(detail.clone()),
            _ => None,
        });
        assert_eq!(detail.as_deref(), Some("NonZeroExitCode; exit code 3"));
    }

    #[test]
    fn a_layout_from_slurm_alone() {
        let nodes: Vec<SchedNode> = (1..=10)
            .rev()
            .map(|i| SchedNode {
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
