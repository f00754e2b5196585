//! The simulated cluster as the live source. Each tick advances the simulator to now,
//! publishes its frame for its own exporters, reads the telemetry (the simulator's readings
//! directly, its exporters through the scrape path, or a PromQL store that scrapes them),
//! and hands the frame to the pipeline. Everything one tick shows comes from one simulated
//! instant.

use std::sync::Arc;
use std::time::{Duration, Instant};

use app::model::UnixMs;
use tokio::sync::{mpsc, oneshot, watch};

use crate::live::StoreQueue;
use crate::live::{wall_now_ms, Event, Frame, Latest, Live, Pipeline, SchedSnapshot, SimFrame};
use crate::scheduler::{
    validate_node_name, validate_reason, SchedError, SchedFuture, SchedJob, SchedNode, Scheduler,
};
use crate::sim::{Sim, SimEvent};
use crate::telemetry::ingest::{RoundStats, Telemetry, PROMQL_QUERIES};
use crate::telemetry::Readings;

/// Settings of the simulator source task.
pub struct SimSource {
    pub sim: Sim,
    pub start_ms: UnixMs,
    pub speed: f64,
    pub interval_ms: u64,
    /// Scrape the simulator's exporters (the embedded default) instead of reading it directly.
    pub ingest: Option<Telemetry>,
    /// With `ingest`: query this PromQL store (which scrapes the exporters) instead of scraping.
    pub promql: Option<crate::telemetry::promql::PromQl>,
    /// How often each target is scraped; data older than two of these is stale.
    pub scrape_interval_ms: u64,
    /// Whether the simulator makes up GPU and BMC readings. Off when the telemetry comes
    /// from configured exporters: the simulator then only schedules (and there is no truth).
    pub simulate_telemetry: bool,
    /// Allocated GPUs under this SM activity count as idle in reports.
    pub idle_below_sm: f64,
    /// The hang rule's hold, which the badput ledger's hung time follows.
    pub hang_ms: i64,
    /// Where a predecessor's reports stopped ([`Pipeline::resume`]), and the gap allowed.
    pub resume: Option<(UnixMs, i64)>,
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
    })
}

/// Runs the simulator as the live source until `shutdown` turns true.
pub async fn run_sim_source(
    src: SimSource,
    live: Arc<Live>,
    q: StoreQueue,
    ops: Arc<SimOps>,
    mut shutdown: watch::Receiver<bool>,
) {
    // The simulator's calls are answered here while this task runs (a standby has none).
    let mut ops_rx = ops.rx.lock().await;
    let ops_rx = &mut *ops_rx;
    ops.serving
        .store(true, std::sync::atomic::Ordering::Release);
    let SimSource {
        mut sim,
        start_ms,
        speed,
        interval_ms,
        mut ingest,
        promql,
        scrape_interval_ms,
        simulate_telemetry,
        idle_below_sm,
        hang_ms,
        resume,
    } = src;
    let mut pipeline = Pipeline::new(interval_ms as i64, idle_below_sm);
    pipeline.set_hang_ms(hang_ms);
    if let Some((at, gap)) = resume {
        pipeline.resume(at, gap);
    }
    let inventory = Arc::new(sim.inventory().clone());
    pipeline.start(&inventory, &live, &q);
    pipeline.record(events(sim.drain_events()), &live, &q);
    let wall_start = Instant::now();
    let mut ticker = tokio::time::interval(Duration::from_millis(interval_ms));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let fresh_ms = 2 * scrape_interval_ms.max(interval_ms) as i64;
    loop {
        let sim_now = || start_ms + (wall_start.elapsed().as_millis() as f64 * speed) as i64;
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.changed() => break,
            // After an action: publish its effect now rather than at the next interval.
            _ = live.poked() => {}
            Some(op) = ops_rx.recv() => {
                // Scheduler calls act on the simulator as of now, between ticks.
                sim.advance_to(sim_now());
                serve_sim_op(&mut sim, op);
                pipeline.record(events(sim.drain_events()), &live, &q);
                continue;
            }
        }
        if *shutdown.borrow() {
            break;
        }
        let began = Instant::now();
        sim.advance_to(sim_now());
        let happened = events(sim.drain_events());
        let readings: Readings = if simulate_telemetry {
            sim.readings()
        } else {
            sim.sched_readings()
        };
        let sched = sched(&sim, interval_ms);
        // The scheduler's view is current before the telemetry below is read (a scrape
        // takes a while): after an action, its effect on jobs and nodes shows at once.
        live.set_sched(Arc::clone(&sched));
        let truth = simulate_telemetry.then(|| sim.truth_with(&readings));
        // Publish the simulator's frame first: its exporters serve it to the scrapes below,
        // so everything this tick shows comes from one instant.
        let frame = live.set_sim_frame(SimFrame {
            inventory: Arc::clone(&inventory),
            readings,
        });
        // What the scraper holds fresh now, with the simulator's nodes and jobs.
        let fresh = |ing: &crate::telemetry::ingest::Ingest| {
            let r = &frame.readings;
            Latest::Owned(Arc::new(ing.readings(
                &inventory,
                wall_now_ms(),
                r.at_ms,
                fresh_ms,
                r.nodes.iter().map(|n| (n.name.clone(), n.state)),
                r.jobs.clone(),
            )))
        };
        let readings = match ingest.as_mut() {
            None => Latest::Frame(Arc::clone(&frame)),
            // Scraped by its own task: take what is fresh now.
            Some(Telemetry::Task(shared)) => {
                fresh(&shared.lock().unwrap_or_else(|e| e.into_inner()))
            }
            Some(Telemetry::InTick(ing)) => {
                let round = match &promql {
                    None => {
                        ing.scrape_due(wall_now_ms(), Duration::from_millis(scrape_interval_ms))
                            .await
                    }
                    Some(prom) => match ing.query_promql(prom, wall_now_ms()).await {
                        Ok(r) => r,
                        Err(e) => {
                            // Logged once per failing tick, counted; the data ages and shows stale.
                            tracing::warn!(error = %e, "PromQL query failed");
                            RoundStats {
                                targets: PROMQL_QUERIES,
                                failed: PROMQL_QUERIES,
                                ..Default::default()
                            }
                        }
                    },
                };
                live.metrics.record_scrape_round(&round);
                live.set_targets(ing.health());
                fresh(ing)
            }
        };
        pipeline.run(
            Frame {
                inventory: Arc::clone(&inventory),
                readings,
                sched,
                events: happened,
                truth,
            },
            &live,
            &q,
        );
        live.metrics.live_tick_duration_us.store(
            began.elapsed().as_micros() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
    }
    ops.serving
        .store(false, std::sync::atomic::Ordering::Release);
    pipeline.finish(&q);
    tracing::info!("simulator source stopped");
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
    rx: tokio::sync::Mutex<mpsc::Receiver<SimOp>>,
    /// Whether a source task answers now (a standby replica runs none).
    serving: std::sync::atomic::AtomicBool,
}

impl SimScheduler {
    pub fn new() -> (SimScheduler, Arc<SimOps>) {
        let (tx, rx) = mpsc::channel(64);
        let ops = Arc::new(SimOps {
            rx: tokio::sync::Mutex::new(rx),
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
        if !self.ops.serving.load(std::sync::atomic::Ordering::Acquire) {
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
        self.ops.serving.load(std::sync::atomic::Ordering::Acquire)
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
    fn requeue(&self, job: u64, hold: bool) -> SchedFuture<'_, ()> {
        Box::pin(async move { self.act(|reply| SimOp::Requeue { job, hold, reply }).await })
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
        SimOp::Requeue { job, hold, reply } => drop(reply.send(sim.requeue_job(job, hold))),
    }
}
