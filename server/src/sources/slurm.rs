//! A real Slurm as the live source: one poll per interval for every browser (so
//! slurmctld's RPC count does not grow with viewers), job history from transitions, and
//! an overview published after each successful poll. A failed poll publishes nothing, so
//! views age into "stale" instead of showing old data as current.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use app::model::{Cooling, Gpu, GpuReading, Inventory, JobState, Node, Rack, UnixMs};

use super::run::Source;
use crate::clock::wall_now_ms;
use crate::config::Config;
use crate::live::{Event, Frame, Latest, Live, SchedSnapshot};
use crate::scheduler::Scheduler;
use crate::scheduler::{SchedJob, SchedNode};
use crate::telemetry::ingest::{self, Ingest, SharedIngest};
use crate::telemetry::scrape::{Client, ScrapeConfig};
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
            hall: String::new(),
            pod: None,
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
        halls: Vec::new(),
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

/// The URL templates of each node's (and rack's) exporters, for the scraper's targets.
pub struct ExporterUrls {
    pub gpu: String,
    pub bmc: String,
    pub node: Option<String>,
    /// Racks' power controllers (racks with shelves).
    pub rack: Option<String>,
    /// NVLink domains' NMX-T (racks with switch trays).
    pub fabric: Option<String>,
}

impl ExporterUrls {
    /// The configured templates, if the GPU and BMC ones are both there.
    pub fn from_config(cfg: &Config) -> Option<ExporterUrls> {
        let (gpu, bmc) = cfg
            .gpu_exporter_url
            .clone()
            .zip(cfg.bmc_exporter_url.clone())?;
        Some(ExporterUrls {
            gpu,
            bmc,
            node: cfg.node_exporter_url.clone(),
            rack: cfg.rack_exporter_url.clone(),
            fabric: cfg.nvlink_telemetry_url.clone(),
        })
    }
}

/// A real Slurm as the live source (built by [`SlurmSource::from_config`], run by
/// [`super::run::run`]).
pub struct SlurmSource {
    sched: Arc<dyn Scheduler>,
    interval_ms: u64,
    /// Telemetry from each node's exporters: the scraper (run by its own task,
    /// `sources::scraper`; the source sets its targets and reads the latest) and the
    /// exporters' URL templates. `None`: no telemetry.
    telemetry: Option<(SharedIngest, ExporterUrls)>,
    /// Readings older than this are stale (two scrape intervals, or two polls).
    fresh_ms: i64,
    frames: SlurmFrames,
    /// Whether the last poll failed (logged when it starts and when it ends).
    failing: bool,
    /// slurmctld's diagnostics: read every `diag_every_ms` at most, the newest kept (its
    /// own age shows when reads fail), and whether the last read failed.
    diag_every_ms: i64,
    diag_due_ms: UnixMs,
    diag: Option<Arc<crate::live::HealthPoll>>,
    diag_failing: bool,
}

impl SlurmSource {
    /// Slurm through `sched`, placed by `layout` (`None`: eight to a rack in name order),
    /// with the configured exporters scraped by their own task (put in `ctx.tasks`).
    pub fn from_config(
        cfg: &Config,
        sched: Arc<dyn Scheduler>,
        layout: Option<crate::cluster::layout::Layout>,
        ctx: &mut super::Context<'_>,
    ) -> SlurmSource {
        // Telemetry from each node's exporters, if their URL templates are configured.
        let scrape_interval_ms = cfg.scrape_interval_ms.unwrap_or(10_000);
        let telemetry = ExporterUrls::from_config(cfg).map(|urls| {
            let client = Client::new(
                ScrapeConfig {
                    timeout: Duration::from_millis((scrape_interval_ms * 4 / 5).min(10_000)),
                    max_idle_per_host: cfg.scrape_concurrency,
                    ..ScrapeConfig::default()
                },
                Arc::clone(ctx.tls),
            );
            let ing = Ingest::new(
                client,
                Vec::new(),
                cfg.power_mapping.clone(),
                cfg.scrape_concurrency,
            )
            .with_jitter();
            (super::scraper::spawn(ing, ctx, scrape_interval_ms), urls)
        });
        let interval_ms = cfg.slurm.poll_interval_ms;
        SlurmSource {
            sched,
            interval_ms,
            telemetry,
            fresh_ms: 2 * scrape_interval_ms.max(interval_ms) as i64,
            frames: SlurmFrames::new(layout, &cfg.cluster_name, interval_ms),
            failing: false,
            diag_every_ms: cfg.slurm.diag_interval_ms as i64,
            diag_due_ms: 0,
            diag: None,
            diag_failing: false,
        }
    }
}

impl Source for SlurmSource {
    const NAME: &'static str = "Slurm";

    fn interval_ms(&self) -> u64 {
        self.interval_ms
    }

    /// Polls Slurm (and takes the nodes' exporters' readings, if configured).
    async fn frame(&mut self, live: &Live) -> Option<Frame> {
        let sched = &self.sched;
        let polled = async {
            Ok::<_, crate::scheduler::SchedError>((sched.nodes().await?, sched.jobs().await?))
        };
        let (nodes, jobs) = match polled.await {
            Ok(x) => {
                if self.failing {
                    tracing::info!("Slurm answers again");
                    self.failing = false;
                }
                x
            }
            Err(e) => {
                // Logged when it starts failing, counted always; views go stale.
                if !self.failing {
                    tracing::warn!(error = %e, "Slurm poll failed");
                    self.failing = true;
                }
                live.metrics
                    .slurm_poll_errors_total
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return None;
            }
        };
        let now = wall_now_ms();
        let frames = &mut self.frames;
        let (inv, new) = frames.place(&nodes);
        if let (true, Some((ing, urls))) = (new, self.telemetry.as_ref()) {
            let mut ing = ing.lock().unwrap_or_else(|e| e.into_inner());
            ing.set_targets(ingest::with_node_exporter(
                ingest::targets(&inv, &urls.gpu, &urls.bmc),
                urls.node.as_deref(),
            ));
            ing.set_rack_targets(ingest::rack_targets(
                &inv,
                urls.rack.as_deref(),
                urls.fabric.as_deref(),
            ));
        }
        let events = frames.transitions(&jobs, now);
        if now >= self.diag_due_ms {
            self.diag_due_ms = now + self.diag_every_ms;
            match self.sched.diag().await {
                Ok(h) => {
                    self.diag_failing = false;
                    self.diag = h.map(|health| {
                        Arc::new(crate::live::HealthPoll {
                            polled_ms: now,
                            every_ms: self.diag_every_ms,
                            health,
                        })
                    });
                }
                Err(e) => {
                    if !self.diag_failing {
                        tracing::warn!(error = %e, "reading slurmctld's diagnostics failed");
                        self.diag_failing = true;
                    }
                }
            }
        }
        let health = self.diag.clone();
        let frames = &mut self.frames;
        let mut frame = match self.telemetry.as_ref() {
            Some((ing, _)) => {
                let ing = ing.lock().unwrap_or_else(|e| e.into_inner());
                frames.frame(
                    inv,
                    nodes,
                    jobs,
                    now,
                    Some((&ing, wall_now_ms(), self.fresh_ms)),
                    events,
                )
            }
            None => frames.frame(inv, nodes, jobs, now, None, events),
        };
        if let Some(s) = Arc::get_mut(&mut frame.sched) {
            s.health = health;
        }
        Some(frame)
    }

    fn published(&mut self, live: &Live, _took: Duration) {
        live.metrics
            .slurm_polls_total
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Turns polls of Slurm into frames: the inventory for the node list (the same one while
/// the nodes do not change) and each poll's readings and job transitions.
pub struct SlurmFrames {
    layout: Option<crate::cluster::layout::Layout>,
    cluster: String,
    interval_ms: i64,
    inventory: Option<Arc<Inventory>>,
    prev: HashMap<u64, (JobState, u32)>,
}

impl SlurmFrames {
    pub fn new(
        layout: Option<crate::cluster::layout::Layout>,
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
            Some(l) => crate::cluster::layout::place(
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
                index: Default::default(),
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
                health: None,
            }),
            events,
            truth: None,
        }
    }
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
            excluded: Vec::new(),
            queue: Default::default(),
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
