//! The simulated cluster as the live source. Each tick advances the simulator to now,
//! publishes its frame for its own exporters, reads the telemetry (the simulator's readings
//! directly, its exporters through the scrape path, or a PromQL store that scrapes them),
//! and hands the frame to the pipeline. Everything one tick shows comes from one simulated
//! instant.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use app::model::{Inventory, UnixMs};
use tokio::sync::{mpsc, oneshot, OwnedMutexGuard};

use super::run::Source;
use crate::clock::wall_now_ms;
use crate::config::{Config, TelemetryKind};
use crate::live::{Event, Frame, Latest, Live, SchedSnapshot, SimFrame};
use crate::scheduler::{
    validate_node_name, validate_reason, SchedError, SchedFuture, SchedJob, SchedNode, Scheduler,
};
use crate::sim::{Sim, SimEvent};
use crate::telemetry::ingest::{self, Ingest, Telemetry};
use crate::telemetry::promql::PromQl;
use crate::telemetry::scrape::{Client, ScrapeConfig};
use crate::telemetry::Readings;

/// The simulator as the live source (built by [`SimSource::from_config`], run by
/// [`super::run::run`]).
pub struct SimSource {
    sim: Sim,
    start_ms: UnixMs,
    speed: f64,
    interval_ms: u64,
    /// Scrape the simulator's exporters (the embedded default) instead of reading it directly.
    ingest: Option<Telemetry>,
    /// With `ingest`: query this PromQL store (which scrapes the exporters) instead of scraping.
    /// How often each target is scraped; data older than two of these is stale.
    scrape_interval_ms: u64,
    /// Whether the simulator makes up GPU and BMC readings. Off when the telemetry comes
    /// from configured exporters: the simulator then only schedules (and there is no truth).
    simulate_telemetry: bool,
    /// The simulator's calls, answered while this source runs (a standby has none).
    ops: Arc<SimOps>,
    ops_rx: Option<OwnedMutexGuard<mpsc::Receiver<SimOp>>>,
    /// Only a share of its exporters scraped (`sim.scrape_every` above 1): the rest read
    /// directly.
    sampled: Option<super::sampled::Sampled>,
    /// When the run started: simulated time is `start_ms` plus the wall time since, times `speed`.
    wall_start: Instant,
    inventory: Arc<Inventory>,
}

impl SimSource {
    /// The simulator of `cfg`, built off the runtime, with its telemetry: read directly,
    /// through its own exporters on this server at `addr` (scraped within each tick, or
    /// through a PromQL store), or configured exporters scraped by their own task (put in
    /// `ctx.tasks`). `None` if the simulator could not be built.
    pub async fn from_config(
        cfg: &Config,
        addr: std::net::SocketAddr,
        serving_https: bool,
        ops: Arc<SimOps>,
        ctx: &mut super::Context<'_>,
    ) -> Option<SimSource> {
        let start_ms = cfg.sim.start_ms.unwrap_or_else(wall_now_ms);
        let (profile, nodes, seed, name) = (
            cfg.sim.profile,
            cfg.sim.nodes as usize,
            cfg.sim.seed,
            cfg.cluster_name.clone(),
        );
        let sim = match tokio::task::spawn_blocking(move || {
            let mut sim = Sim::with_profile(profile, nodes, seed, &name, start_ms);
            sim.track_ledgers();
            sim
        })
        .await
        {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "simulator could not start");
                return None;
            }
        };
        // Configured exporters, or the simulator's own, on this server (scraped by
        // Gantry, or by a PromQL store that Gantry queries).
        let own = format!("http://{addr}/sim/exporter");
        let external = cfg
            .gpu_exporter_url
            .clone()
            .zip(cfg.bmc_exporter_url.clone());
        let (gpu_t, bmc_t) = external.clone().unwrap_or_else(|| {
            (
                format!("{own}/dcgm/{{node}}/metrics"),
                format!("{own}/ipmi/{{node}}/metrics"),
            )
        });
        // node_exporter (InfiniBand counters): configured, or the simulator's own when
        // its other exporters are the ones read.
        let node_t = cfg.node_exporter_url.clone().or_else(|| {
            external
                .is_none()
                .then(|| format!("{own}/node/{{node}}/metrics"))
        });
        let targets = ingest::with_node_exporter(
            ingest::targets(sim.inventory(), &gpu_t, &bmc_t),
            node_t.as_deref(),
        );
        // Racks' power controllers (racks with shelves): configured, or the simulator's own.
        let rack_t = cfg.rack_exporter_url.clone().or_else(|| {
            external
                .is_none()
                .then(|| format!("{own}/redfish/{{rack}}/metrics"))
        });
        // NVLink domains' NMX-T (racks with switch trays): configured, or the simulator's own.
        let fabric_t = cfg.nvlink_telemetry_url.clone().or_else(|| {
            external
                .is_none()
                .then(|| format!("{own}/nmxt/{{rack}}/xcset/nvlink_domain_telemetry"))
        });
        let rack_targets =
            ingest::rack_targets(sim.inventory(), rack_t.as_deref(), fabric_t.as_deref());
        // Every Nth of its own exporters scraped, by their own task; the rest read directly.
        let sampled = (external.is_none()
            && cfg.telemetry == TelemetryKind::Scrape
            && cfg.sim.scrape_every > 1)
            .then(|| super::sampled::Sampled::new(sim.inventory(), cfg.sim.scrape_every as usize));
        let (targets, rack_targets) = match &sampled {
            Some(s) => s.targets(targets, rack_targets),
            None => (targets, rack_targets),
        };
        let own_task = external.is_some() || sampled.is_some();
        // The simulator's own exporters are scraped every tick, so a tick shows one
        // simulated instant; configured ones every 10 s, spread over the interval.
        // Through a PromQL store it is the store's scrape interval (a sample older than two
        // of them is stale), 15 s unless set.
        let scrape_interval_ms = cfg.scrape_interval_ms.unwrap_or(
            if cfg.telemetry == crate::config::TelemetryKind::PromQl {
                15_000
            } else if own_task {
                10_000
            } else {
                cfg.live_interval_ms
            },
        );
        // The simulator's own exporters are read within the tick that uses them; configured
        // exporters and a PromQL store by their own task, each request within most of the
        // interval (at most 10 s).
        let is_promql = cfg.telemetry == TelemetryKind::PromQl;
        let client = Client::new(
            ScrapeConfig {
                timeout: Duration::from_millis(if own_task || is_promql {
                    (scrape_interval_ms * 4 / 5).min(10_000)
                } else {
                    cfg.live_interval_ms * 4 / 5
                }),
                gzip: external.is_some() || is_promql,
                max_idle_per_host: cfg.scrape_concurrency,
                ..ScrapeConfig::default()
            },
            Arc::clone(ctx.tls),
        );
        // Serving HTTPS, the simulator's own exporters would be scraped over TLS at an
        // address its certificate does not name: its readings are then taken directly.
        let telemetry =
            if serving_https && external.is_none() && cfg.telemetry == TelemetryKind::Scrape {
                tracing::info!(
                    "serving HTTPS: the simulator's readings are taken directly, not scraped"
                );
                TelemetryKind::Direct
            } else {
                cfg.telemetry
            };
        let ingest = match telemetry {
            TelemetryKind::Direct => None,
            TelemetryKind::Scrape => {
                let ing = Ingest::new(
                    client,
                    targets,
                    cfg.power_mapping.clone(),
                    cfg.scrape_concurrency,
                )
                .with_rack_targets(rack_targets);
                if own_task {
                    // Real exporters (or a share of its own): their own task, spread over
                    // the interval.
                    let shared = super::scraper::spawn(ing.with_jitter(), ctx, scrape_interval_ms);
                    Some(Telemetry::Task(shared))
                } else {
                    Some(Telemetry::InTick(Box::new(ing)))
                }
            }
            TelemetryKind::PromQl => {
                let url = cfg.promql_url.clone().unwrap_or_default();
                let prom = PromQl::new(client.clone(), &url);
                let ing = Ingest::new(
                    client,
                    Vec::new(),
                    cfg.power_mapping.clone(),
                    cfg.scrape_concurrency,
                );
                let fresh_ms = fresh_ms(scrape_interval_ms, cfg.live_interval_ms);
                let shared =
                    super::scraper::spawn_promql(ing, prom, ctx, scrape_interval_ms, fresh_ms);
                Some(Telemetry::Task(shared))
            }
        };
        let inventory = Arc::new(sim.inventory().clone());
        Some(SimSource {
            sim,
            start_ms,
            speed: cfg.sim.speed,
            interval_ms: cfg.live_interval_ms,
            ingest,
            scrape_interval_ms,
            simulate_telemetry: external.is_none(),
            sampled,
            ops,
            ops_rx: None,
            wall_start: Instant::now(),
            inventory,
        })
    }

    /// The simulated instant of now.
    fn sim_now(&self) -> UnixMs {
        self.start_ms + (self.wall_start.elapsed().as_millis() as f64 * self.speed) as i64
    }
}

impl Source for SimSource {
    const NAME: &'static str = "simulator";

    fn interval_ms(&self) -> u64 {
        self.interval_ms
    }

    async fn start(&mut self) -> Option<(Arc<Inventory>, Vec<Event>)> {
        // The simulator's calls are answered here while this source runs.
        self.ops_rx = Some(Arc::clone(&self.ops.rx).lock_owned().await);
        self.ops.serving.store(true, Ordering::Release);
        self.wall_start = Instant::now();
        Some((Arc::clone(&self.inventory), events(self.sim.drain_events())))
    }

    async fn serve(&mut self) -> Vec<Event> {
        let op = match self.ops_rx.as_mut() {
            Some(rx) => rx.recv().await,
            None => None,
        };
        let Some(op) = op else {
            return std::future::pending().await;
        };
        // Scheduler calls act on the simulator as of now, between ticks.
        let now = self.sim_now();
        self.sim.advance_to(now);
        serve_sim_op(&mut self.sim, op);
        events(self.sim.drain_events())
    }

    async fn frame(&mut self, live: &Live) -> Option<Frame> {
        let now = self.sim_now();
        let sim = &mut self.sim;
        sim.advance_to(now);
        let happened = events(sim.drain_events());
        let readings: Readings = if self.simulate_telemetry {
            sim.readings()
        } else {
            sim.sched_readings()
        };
        let sched = sched(sim, self.interval_ms);
        // The scheduler's view is current before the telemetry below is read (a scrape
        // takes a while): after an action, its effect on jobs and nodes shows at once.
        live.set_sched(Arc::clone(&sched));
        let truth = self.simulate_telemetry.then(|| sim.truth_with(&readings));
        // Publish the simulator's frame first: its exporters serve it to the scrapes below,
        // so everything this tick shows comes from one instant.
        let frame = live.set_sim_frame(SimFrame {
            inventory: Arc::clone(&self.inventory),
            readings,
        });
        let inventory = &self.inventory;
        let fresh_ms = fresh_ms(self.scrape_interval_ms, self.interval_ms);
        // What the scraper holds fresh now, with the simulator's nodes and jobs.
        let fresh = |ing: &Ingest| {
            let r = &frame.readings;
            Latest::Owned(Arc::new(ing.readings(
                inventory,
                wall_now_ms(),
                r.at_ms,
                fresh_ms,
                r.nodes.iter().map(|n| (n.name.clone(), n.state)),
                r.jobs.clone(),
            )))
        };
        let readings = match self.ingest.as_mut() {
            None => Latest::Frame(Arc::clone(&frame)),
            // Scraped by its own task: take what is fresh now (a share of it: with the
            // rest as the simulator has it).
            Some(Telemetry::Task(shared)) => {
                let scraped = fresh(&shared.lock().unwrap_or_else(|e| e.into_inner()));
                match &self.sampled {
                    Some(s) => {
                        Latest::Owned(Arc::new(s.merge(&frame.readings, scraped.readings())))
                    }
                    None => scraped,
                }
            }
            Some(Telemetry::InTick(ing)) => {
                let round = ing
                    .scrape_due(
                        wall_now_ms(),
                        Duration::from_millis(self.scrape_interval_ms),
                    )
                    .await;
                live.metrics.record_scrape_round(&round);
                live.set_targets(ing.health());
                fresh(ing)
            }
        };
        Some(Frame {
            inventory: Arc::clone(&self.inventory),
            readings,
            sched,
            events: happened,
            truth,
        })
    }

    fn published(&mut self, live: &Live, took: Duration) {
        live.metrics
            .live_tick_duration_us
            .store(took.as_micros() as u64, Ordering::Relaxed);
    }

    fn stop(&mut self) {
        self.ops.serving.store(false, Ordering::Release);
    }
}

/// The simulator's events as the pipeline takes them, each at the time it happened. Its
/// XIDs are not among them: the pipeline reads those where a real cluster shows them, in
/// the GPUs' readings (the simulator's telemetry or its exporters).
pub fn events(events: Vec<SimEvent>) -> Vec<Event> {
    events
        .into_iter()
        .filter_map(|e| match e {
            SimEvent::JobSubmitted { job } => Some(Event::Job {
                at_ms: job.submit_ms,
                job,
                detail: String::new(),
            }),
            SimEvent::JobStarted { job } => Some(Event::Job {
                at_ms: job.start_ms.unwrap_or(job.submit_ms),
                job,
                detail: String::new(),
            }),
            SimEvent::JobEnded { job, detail } => Some(Event::Job {
                at_ms: job.end_ms.unwrap_or(job.submit_ms),
                job,
                detail,
            }),
            SimEvent::JobRequeued { job, at_ms } => Some(Event::Job {
                job,
                at_ms,
                detail: REQUEUED_BY_OPERATOR.into(),
            }),
            SimEvent::Checkpoint { checkpoint } => Some(Event::Checkpoint(checkpoint)),
            SimEvent::Xid { .. } => None,
        })
        .collect()
}

/// The detail of a requeue an operator asked for (Gantry's own words, as its audit has it).
pub const REQUEUED_BY_OPERATOR: &str = "requeued by an operator";

/// The scheduler's view of the simulator now, as a Slurm poll would give it.
pub fn sched(sim: &Sim, interval_ms: u64) -> Arc<SchedSnapshot> {
    Arc::new(SchedSnapshot {
        at_ms: sim.now_ms(),
        polled_ms: wall_now_ms(),
        interval_ms: interval_ms as i64,
        nodes: sim.slurm_nodes(),
        jobs: sim.slurm_jobs(),
        health: Some(Arc::new(crate::live::HealthPoll {
            polled_ms: wall_now_ms(),
            every_ms: interval_ms as i64,
            health: sim.sched_health(),
        })),
    })
}

/// A request to the simulator's task, which owns the simulator.
pub enum SimOp {
    Nodes(oneshot::Sender<Vec<SchedNode>>),
    Jobs(oneshot::Sender<Vec<SchedJob>>),
    Drain {
        node: String,
        reason: String,
        reply: oneshot::Sender<Result<(), String>>,
    },
    Resume {
        node: String,
        reply: oneshot::Sender<Result<(), String>>,
    },
    Requeue {
        job: u64,
        hold: bool,
        exclude: Vec<String>,
        reply: oneshot::Sender<Result<(), String>>,
    },
}

/// The simulator as a scheduler: every call is a message to the source task.
#[derive(Clone)]
pub struct SimScheduler {
    tx: mpsc::Sender<SimOp>,
    ops: Arc<SimOps>,
}

/// The receiving end of the simulator's calls, taken by each run of its source task.
pub struct SimOps {
    rx: Arc<tokio::sync::Mutex<mpsc::Receiver<SimOp>>>,
    /// Whether a source task answers now (a standby replica runs none).
    serving: std::sync::atomic::AtomicBool,
}

impl SimScheduler {
    pub fn new() -> (SimScheduler, Arc<SimOps>) {
        let (tx, rx) = mpsc::channel(64);
        let ops = Arc::new(SimOps {
            rx: Arc::new(tokio::sync::Mutex::new(rx)),
            serving: std::sync::atomic::AtomicBool::new(false),
        });
        (
            SimScheduler {
                tx,
                ops: Arc::clone(&ops),
            },
            ops,
        )
    }

    async fn ask<T>(&self, op: SimOp, rx: oneshot::Receiver<T>) -> Result<T, SchedError> {
        let gone = || SchedError::Unavailable("the simulator has stopped".into());
        if !self.ops.serving.load(Ordering::Acquire) {
            return Err(SchedError::Unavailable(
                "the simulated cluster runs in the leading replica, not this one".into(),
            ));
        }
        self.tx.send(op).await.map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
    }

    async fn act(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<(), String>>) -> SimOp,
    ) -> Result<(), SchedError> {
        let (reply, rx) = oneshot::channel();
        self.ask(make(reply), rx)
            .await?
            .map_err(SchedError::Refused)
    }
}

impl Scheduler for SimScheduler {
    fn runs_here(&self) -> bool {
        self.ops.serving.load(Ordering::Acquire)
    }
    fn nodes(&self) -> SchedFuture<'_, Vec<SchedNode>> {
        Box::pin(async move {
            let (reply, rx) = oneshot::channel();
            self.ask(SimOp::Nodes(reply), rx).await
        })
    }
    fn jobs(&self) -> SchedFuture<'_, Vec<SchedJob>> {
        Box::pin(async move {
            let (reply, rx) = oneshot::channel();
            self.ask(SimOp::Jobs(reply), rx).await
        })
    }
    fn drain<'a>(&'a self, node: &'a str, reason: &'a str) -> SchedFuture<'a, ()> {
        Box::pin(async move {
            validate_node_name(node)?;
            validate_reason(reason)?;
            self.act(|reply| SimOp::Drain {
                node: node.into(),
                reason: reason.into(),
                reply,
            })
            .await
        })
    }
    fn resume<'a>(&'a self, node: &'a str) -> SchedFuture<'a, ()> {
        Box::pin(async move {
            validate_node_name(node)?;
            self.act(|reply| SimOp::Resume {
                node: node.into(),
                reply,
            })
            .await
        })
    }
    fn requeue<'a>(&'a self, job: u64, hold: bool, exclude: &'a [String]) -> SchedFuture<'a, ()> {
        let exclude = exclude.to_vec();
        Box::pin(async move {
            self.act(|reply| SimOp::Requeue {
                job,
                hold,
                exclude,
                reply,
            })
            .await
        })
    }
}

/// Answers one request against the simulator (called by its task, between ticks).
pub fn serve_sim_op(sim: &mut Sim, op: SimOp) {
    // A dropped reply means the caller gave up; nothing to do.
    match op {
        SimOp::Nodes(reply) => drop(reply.send(sim.slurm_nodes())),
        SimOp::Jobs(reply) => drop(reply.send(sim.slurm_jobs())),
        SimOp::Drain {
            node,
            reason,
            reply,
        } => drop(reply.send(sim.drain_node(&node, &reason))),
        SimOp::Resume { node, reply } => drop(reply.send(sim.resume_node(&node))),
        SimOp::Requeue {
            job,
            hold,
            exclude,
            reply,
        } => drop(reply.send(sim.requeue_job(job, hold, &exclude))),
    }
}

/// How old a reading may be and still be fresh: two scrape intervals (or live intervals,
/// when those are longer).
fn fresh_ms(scrape_interval_ms: u64, live_interval_ms: u64) -> i64 {
    2 * scrape_interval_ms.max(live_interval_ms) as i64
}
