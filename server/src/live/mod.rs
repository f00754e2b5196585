//! The one owner of live state.
//!
//! A source task (today the simulator) ticks once per live interval: it advances the
//! source, aggregates readings into an [`Overview`], diffs it against the previous one and
//! publishes both (the delta serialized once, shared by every client). History goes to the
//! store through a bounded queue drained by one writer task, so a slow database never
//! delays live views; what the queue cannot take is counted and logged, not hidden.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use app::live::Overview;
use app::model::{Checkpoint, Inventory, Job, UnixMs};
use tokio::sync::{broadcast, mpsc, watch};

use crate::aggregate::Readings;
use crate::metrics::Metrics;
use crate::sim::{Sim, SimEvent, SimTruth};
use crate::store::{Rollup, Rollup1h, Store};

/// One published update.
#[derive(Debug)]
pub struct Tick {
    pub overview: Arc<Overview>,
    /// The delta from the previous tick, as JSON (shared by every client).
    pub delta_json: Arc<str>,
    pub from_seq: u64,
    /// When the previous tick was published: with its sequence, what names it across
    /// restarts (a new process counts sequences from 1 again).
    pub from_published_ms: Option<UnixMs>,
    /// Nodes or domains were added or removed: no delta can carry that, clients get a
    /// snapshot.
    pub reshaped: bool,
}

/// The hot window: an hour at 10 s resolution (the usual scrape interval).
pub const HOT_WINDOW_SPAN_MS: i64 = 3_600_000;
pub const HOT_WINDOW_RESOLUTION_MS: i64 = 10_000;

/// How many ticks of ground truth `/sim/truth?seq=` can still answer for.
const TRUTH_KEEP: usize = 300;

/// The simulator's latest readings, which its exporters serve.
pub struct SimFrame {
    pub inventory: Arc<Inventory>,
    pub readings: Readings,
}

/// The newest readings behind the published tick: the simulator's frame itself (no copy)
/// or what a scrape or poll produced.
pub enum Latest {
    Frame(Arc<SimFrame>),
    Owned(Arc<Readings>),
}

impl Latest {
    pub fn readings(&self) -> &Readings {
        match self {
            Latest::Frame(f) => &f.readings,
            Latest::Owned(r) => r,
        }
    }
}

/// The scheduler's state as of the last poll (one poll for every browser).
#[derive(Debug)]
pub struct SchedSnapshot {
    /// The source's time of the poll (simulated time with the simulator).
    pub at_ms: UnixMs,
    /// Wall-clock time of the poll, for staleness.
    pub polled_ms: UnixMs,
    /// How often the scheduler is polled.
    pub interval_ms: i64,
    pub nodes: Vec<crate::slurm::json::SlurmNode>,
    pub jobs: Vec<crate::slurm::json::SlurmJob>,
}

/// Live state, shared by the HTTP layer and the source task.
pub struct Live {
    inventory: RwLock<Option<Arc<Inventory>>>,
    latest: RwLock<Option<Arc<Latest>>>,
    sched: RwLock<Option<Arc<SchedSnapshot>>>,
    /// Newest complete checkpoint end per job (sources, ingest and the scanner note them).
    last_checkpoint: Mutex<std::collections::HashMap<u64, UnixMs>>,
    /// Alerts firing now (for the header's badge), set by the alert task.
    alerts_firing: std::sync::atomic::AtomicU32,
    /// Wakes the source early (after an action) so browsers see the effect at once.
    poke: tokio::sync::Notify,
    current: RwLock<Option<Arc<Tick>>>,
    sim_frame: RwLock<Option<Arc<SimFrame>>>,
    targets: RwLock<Arc<Vec<crate::scrape::TargetHealth>>>,
    /// The last hour at 10 s resolution, per GPU, node, rack and cluster.
    window: Mutex<crate::window::HotWindow>,
    tx: broadcast::Sender<Arc<Tick>>,
    truths: Mutex<VecDeque<(u64, Arc<SimTruth>)>>,
    pub metrics: Arc<Metrics>,
}

impl Live {
    pub fn new(metrics: Arc<Metrics>) -> Arc<Live> {
        let (tx, _) = broadcast::channel(16);
        Arc::new(Live {
            inventory: RwLock::new(None),
            latest: RwLock::new(None),
            sched: RwLock::new(None),
            poke: tokio::sync::Notify::new(),
            alerts_firing: std::sync::atomic::AtomicU32::new(0),
            last_checkpoint: Mutex::new(std::collections::HashMap::new()),
            current: RwLock::new(None),
            sim_frame: RwLock::new(None),
            targets: RwLock::new(Arc::new(Vec::new())),
            window: Mutex::new(crate::window::HotWindow::new(
                HOT_WINDOW_SPAN_MS,
                HOT_WINDOW_RESOLUTION_MS,
            )),
            tx,
            truths: Mutex::new(VecDeque::new()),
            metrics,
        })
    }

    /// The source's time now: the newest tick's (simulated time with the simulator), or the
    /// wall clock before the first tick.
    pub fn source_now(&self) -> UnixMs {
        self.current()
            .map(|t| t.overview.at_ms)
            .unwrap_or_else(wall_now_ms)
    }

    /// The cluster's layout, once the source knows it.
    pub fn inventory(&self) -> Option<Arc<Inventory>> {
        self.inventory.read().ok().and_then(|g| g.clone())
    }

    pub fn set_inventory(&self, inv: Arc<Inventory>) {
        if let Ok(mut g) = self.inventory.write() {
            *g = Some(inv);
        }
    }

    /// The readings behind the newest tick.
    pub fn latest(&self) -> Option<Arc<Latest>> {
        self.latest.read().ok().and_then(|g| g.clone())
    }

    pub fn set_latest(&self, l: Latest) {
        if let Ok(mut g) = self.latest.write() {
            *g = Some(Arc::new(l));
        }
    }

    /// The scheduler's state as of the last poll.
    pub fn sched(&self) -> Option<Arc<SchedSnapshot>> {
        self.sched.read().ok().and_then(|g| g.clone())
    }

    pub fn set_sched(&self, s: SchedSnapshot) {
        if let Ok(mut g) = self.sched.write() {
            *g = Some(Arc::new(s));
        }
    }

    /// Notes a complete checkpoint of `job` that finished at `end_ms`.
    pub fn checkpoint_seen(&self, job: u64, end_ms: UnixMs) {
        if let Ok(mut m) = self.last_checkpoint.lock() {
            let e = m.entry(job).or_insert(end_ms);
            *e = (*e).max(end_ms);
        }
    }

    /// The newest complete checkpoint end of one job, as noted since start.
    pub fn last_checkpoint(&self, job: u64) -> Option<UnixMs> {
        self.last_checkpoint
            .lock()
            .ok()
            .and_then(|m| m.get(&job).copied())
    }

    /// The newest complete checkpoint end per job, as noted since start.
    pub fn last_checkpoints(&self) -> std::collections::HashMap<u64, UnixMs> {
        self.last_checkpoint
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }

    pub fn alerts_firing(&self) -> u32 {
        self.alerts_firing
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn set_alerts_firing(&self, n: u32) {
        self.alerts_firing
            .store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Asks the source to poll now rather than at its next interval.
    pub fn poke(&self) {
        self.poke.notify_one();
    }

    pub async fn poked(&self) {
        self.poke.notified().await
    }

    /// The newest tick, if any.
    pub fn current(&self) -> Option<Arc<Tick>> {
        self.current.read().ok().and_then(|g| g.clone())
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Tick>> {
        self.tx.subscribe()
    }

    /// The simulator's latest readings, if the simulator is the source.
    pub fn sim_frame(&self) -> Option<Arc<SimFrame>> {
        self.sim_frame.read().ok().and_then(|g| g.clone())
    }

    fn set_sim_frame(&self, frame: SimFrame) -> Arc<SimFrame> {
        let frame = Arc::new(frame);
        if let Ok(mut f) = self.sim_frame.write() {
            *f = Some(Arc::clone(&frame));
        }
        frame
    }

    /// A series of the hot window since `from_ms`; `None` if the window has no such series.
    pub fn history(
        &self,
        scope: &crate::window::Scope,
        metric: crate::window::Metric,
        from_ms: UnixMs,
    ) -> Option<Vec<(UnixMs, Option<f32>)>> {
        self.window.lock().ok()?.query(scope, metric, from_ms)
    }

    pub fn record_window(&self, readings: &Readings, ov: &Overview) {
        let inv = self.inventory();
        if let Ok(mut w) = self.window.lock() {
            if w.push(readings.at_ms, readings, ov, inv.as_deref()) {
                self.metrics.hot_window_bytes.store(
                    w.memory_bytes() as u64,
                    std::sync::atomic::Ordering::Relaxed,
                );
            }
        }
    }

    /// Health of every scrape target, as of the last round.
    pub fn targets(&self) -> Arc<Vec<crate::scrape::TargetHealth>> {
        self.targets
            .read()
            .map(|t| Arc::clone(&t))
            .unwrap_or_default()
    }

    pub fn set_targets(&self, t: Vec<crate::scrape::TargetHealth>) {
        if let Ok(mut g) = self.targets.write() {
            *g = Arc::new(t);
        }
    }

    /// The simulator's truth at tick `seq`, or the newest one.
    pub fn truth(&self, seq: Option<u64>) -> Option<Arc<SimTruth>> {
        let t = self.truths.lock().ok()?;
        match seq {
            Some(s) => t.iter().find(|(q, _)| *q == s).map(|(_, x)| Arc::clone(x)),
            None => t.back().map(|(_, x)| Arc::clone(x)),
        }
    }

    /// Publishes `next` as the newest state.
    pub fn publish(&self, next: Overview, truth: Option<SimTruth>) {
        let prev = self.current();
        let from_seq = prev.as_ref().map(|p| p.overview.seq).unwrap_or(0);
        let reshaped = prev.as_ref().is_some_and(|p| !p.overview.same_shape(&next));
        let delta = match &prev {
            Some(p) => p.overview.diff(&next),
            None => Overview {
                seq: 0,
                ..next.clone()
            }
            .diff(&next),
        };
        let delta_json: Arc<str> = serde_json::to_string(&delta).unwrap_or_default().into();
        self.metrics.live_delta_bytes.store(
            delta_json.len() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        let seq = next.seq;
        let tick = Arc::new(Tick {
            overview: Arc::new(next),
            delta_json,
            from_seq,
            from_published_ms: prev.as_ref().map(|p| p.overview.published_ms),
            reshaped,
        });
        if let Some(t) = truth {
            if let Ok(mut q) = self.truths.lock() {
                q.push_back((seq, Arc::new(t)));
                while q.len() > TRUTH_KEEP {
                    q.pop_front();
                }
            }
        }
        if let Ok(mut c) = self.current.write() {
            *c = Some(Arc::clone(&tick));
        }
        // No receivers is fine: nobody is watching.
        let _ = self.tx.send(tick);
        self.metrics
            .live_ticks_total
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// What the store writer is asked to do.
#[derive(Debug)]
pub enum StoreWrite {
    Inventory(Box<Inventory>),
    Job {
        job: Box<Job>,
        at_ms: UnixMs,
        detail: String,
    },
    Checkpoint(Checkpoint),
    Xid {
        node: String,
        gpu: u32,
        xid: u32,
        at_ms: UnixMs,
    },
    Rollup(Rollup),
    Rollup1h(Rollup1h),
    /// Additions to hourly report rollups (one transaction).
    Report(Vec<crate::store::ReportDelta>),
    NodeState {
        node: String,
        at_ms: UnixMs,
        state: app::model::NodeState,
        reason: String,
    },
}

/// The sending half of the store queue; never blocks the caller.
#[derive(Clone)]
pub struct StoreQueue {
    tx: mpsc::Sender<StoreWrite>,
    metrics: Arc<Metrics>,
}

impl StoreQueue {
    pub fn send(&self, w: StoreWrite) {
        if self.tx.try_send(w).is_err() {
            let n = self
                .metrics
                .store_queue_dropped_total
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            // Log the first drop and then every 1000th, so a stuck database cannot flood the log.
            if n.is_multiple_of(1000) {
                tracing::warn!(
                    dropped_total = n + 1,
                    "store queue full: history write dropped"
                );
            }
        }
    }
}

/// Starts the store writer; it ends when every queue handle is dropped.
pub fn spawn_store_writer(
    store: Store,
    metrics: Arc<Metrics>,
) -> (StoreQueue, tokio::task::JoinHandle<()>) {
    // Room for a start-up burst at 2,048 nodes: the first tick records every node's state
    // and the simulator's day of history at once (with 8,192 slots, over 1,000 writes were
    // dropped there).
    let (tx, mut rx) = mpsc::channel::<StoreWrite>(65_536);
    let m = Arc::clone(&metrics);
    let handle = tokio::spawn(async move {
        while let Some(w) = rx.recv().await {
            let what = match &w {
                StoreWrite::Inventory(_) => "inventory",
                StoreWrite::Job { .. } => "job",
                StoreWrite::Checkpoint(_) => "checkpoint",
                StoreWrite::Xid { .. } => "xid",
                StoreWrite::Rollup(_) => "rollup",
                StoreWrite::Rollup1h(_) => "hourly rollup",
                StoreWrite::Report(_) => "report rollup",
                StoreWrite::NodeState { .. } => "node state",
            };
            let res = match w {
                StoreWrite::Inventory(inv) => store.put_inventory(&inv).await,
                StoreWrite::Job { job, at_ms, detail } => {
                    store.record_job(&job, at_ms, &detail).await
                }
                StoreWrite::Checkpoint(c) => store.put_checkpoint(&c).await,
                StoreWrite::Xid {
                    node,
                    gpu,
                    xid,
                    at_ms,
                } => store.put_xid(&node, gpu, xid, at_ms).await,
                StoreWrite::Rollup(r) => store.put_rollup(&r).await,
                StoreWrite::Rollup1h(r) => store.put_rollup_1h(&r).await,
                StoreWrite::Report(d) => store.add_report_deltas(&d).await,
                StoreWrite::NodeState {
                    node,
                    at_ms,
                    state,
                    reason,
                } => store.put_node_event(&node, at_ms, state, &reason).await,
            };
            match res {
                Ok(()) => {
                    m.store_writes_total
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Err(e) => {
                    m.store_errors_total
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::error!(write = what, error = %e, "store write failed");
                }
            }
        }
    });
    (StoreQueue { tx, metrics }, handle)
}

/// Sends a source's events to the store (and notes checkpoints in `live` at once, so rules
/// do not wait for the store writer).
pub fn record_events(q: &StoreQueue, live: &Live, events: Vec<SimEvent>) {
    for e in &events {
        if let SimEvent::Checkpoint { checkpoint: c } = e {
            if c.complete {
                live.checkpoint_seen(c.job_id, c.started_ms + c.duration_ms);
            }
        }
    }
    for e in events {
        match e {
            SimEvent::JobSubmitted { job } => {
                let at = job.submit_ms;
                q.send(StoreWrite::Job {
                    job: Box::new(job),
                    at_ms: at,
                    detail: String::new(),
                })
            }
            SimEvent::JobStarted { job } => {
                let at = job.start_ms.unwrap_or(job.submit_ms);
                q.send(StoreWrite::Job {
                    job: Box::new(job),
                    at_ms: at,
                    detail: String::new(),
                })
            }
            SimEvent::JobEnded { job } => {
                let at = job.end_ms.unwrap_or(job.submit_ms);
                q.send(StoreWrite::Job {
                    job: Box::new(job),
                    at_ms: at,
                    detail: String::new(),
                })
            }
            SimEvent::JobRequeued { job, at_ms } => q.send(StoreWrite::Job {
                job: Box::new(job),
                at_ms,
                detail: "requeued by an operator".into(),
            }),
            SimEvent::Checkpoint { checkpoint } => q.send(StoreWrite::Checkpoint(checkpoint)),
            SimEvent::Xid {
                node,
                gpu,
                xid,
                at_ms,
            } => q.send(StoreWrite::Xid {
                node,
                gpu,
                xid,
                at_ms,
            }),
        }
    }
}

/// Failures and requeues among a source's events lose work since the job's last checkpoint.
fn note_losses(reports: &mut crate::reports::Accumulator, live: &Live, events: &[SimEvent]) {
    for e in events {
        let (job, at) = match e {
            SimEvent::JobEnded { job } if crate::reports::loses_work(job.state) => {
                (job, job.end_ms.unwrap_or(job.submit_ms))
            }
            SimEvent::JobRequeued { job, at_ms } => (job, *at_ms),
            _ => continue,
        };
        reports.job_lost(job, at, live.last_checkpoint(job.id));
    }
}

/// Remembers each node's last state and queues a store write when it changes (the first
/// sight of a node counts as a change).
#[derive(Default)]
pub struct NodeStates(std::collections::HashMap<String, app::model::NodeState>);

impl NodeStates {
    pub fn observe(
        &mut self,
        q: &StoreQueue,
        at_ms: UnixMs,
        nodes: &[(String, app::model::NodeState, String)],
    ) {
        for (name, state, reason) in nodes {
            if self.0.get(name) != Some(state) {
                self.0.insert(name.clone(), *state);
                q.send(StoreWrite::NodeState {
                    node: name.clone(),
                    at_ms,
                    state: *state,
                    reason: reason.clone(),
                });
            }
        }
    }
}

/// One scope's period so far.
#[derive(Clone, Debug, Default)]
struct PeriodAcc {
    power_sum: f64,
    power_min: f64,
    power_max: f64,
    energy_wh: f64,
    sm_sum: f64,
    sm_n: u32,
    thr_max: u32,
    thr_gpu_seconds: f64,
    thr_s_by_reason: [f64; 5],
    samples: u32,
}

impl PeriodAcc {
    fn power_mean(&self) -> f64 {
        self.power_sum / f64::from(self.samples.max(1))
    }

    fn sm_mean(&self) -> Option<f64> {
        (self.sm_n > 0).then(|| self.sm_sum / f64::from(self.sm_n))
    }
}

/// Live ticks accumulated per scope over fixed periods (a minute, an hour): power (mean,
/// min, max, energy integrated over each tick's duration), SM activity, throttling (max,
/// GPU-seconds in all and per reason). One mechanism behind both rollups.
struct Periods {
    period_ms: i64,
    /// Also accumulate each running job (`job:ID`, from its nodes).
    jobs: bool,
    start_ms: Option<UnixMs>,
    acc: BTreeMap<String, PeriodAcc>,
}

impl Periods {
    fn new(period_ms: i64, jobs: bool) -> Periods {
        Periods {
            period_ms,
            jobs,
            start_ms: None,
            acc: BTreeMap::new(),
        }
    }

    /// Adds one overview (and its throttling per reason) that stands for `dt_ms` of source
    /// time; returns the finished period (its start and scopes) when a boundary passed.
    fn add(
        &mut self,
        ov: &Overview,
        by_reason: &ReasonCounts,
        dt_ms: i64,
    ) -> Option<(UnixMs, BTreeMap<String, PeriodAcc>)> {
        let start = ov.at_ms - ov.at_ms.rem_euclid(self.period_ms);
        let done = match self.start_ms {
            Some(s) if s != start => Some((s, std::mem::take(&mut self.acc))),
            _ => None,
        };
        self.start_ms = Some(start);
        let dt_s = dt_ms.max(0) as f64 / 1000.0;
        let mut put = |scope: String, power: f64, sm: Option<f64>, thr: u32| {
            let e = self.acc.entry(scope).or_insert_with(|| PeriodAcc {
                power_min: f64::INFINITY,
                power_max: f64::NEG_INFINITY,
                ..PeriodAcc::default()
            });
            e.power_sum += power;
            e.power_min = e.power_min.min(power);
            e.power_max = e.power_max.max(power);
            e.energy_wh += power * dt_s / 3600.0;
            if let Some(s) = sm {
                e.sm_sum += s;
                e.sm_n += 1;
            }
            e.thr_max = e.thr_max.max(thr);
            e.thr_gpu_seconds += f64::from(thr) * dt_s;
            e.samples += 1;
        };
        put(
            "cluster".into(),
            ov.summary.power_watts,
            ov.summary.sm_active_mean,
            ov.summary.gpus_throttling,
        );
        for r in &ov.racks {
            if let Some(p) = r.power_watts {
                put(format!("rack:{}", r.name), p, None, r.gpus_throttling);
            }
        }
        if self.jobs {
            // Per running job, from its nodes: power, mean SM activity, GPUs throttling
            // (the job page's activity band).
            let mut jobs: BTreeMap<u64, (f64, f64, u32, u32)> = BTreeMap::new();
            for n in &ov.nodes {
                for &j in &n.jobs {
                    let e = jobs.entry(j).or_default();
                    e.0 += n.power_watts.unwrap_or(0.0);
                    if let Some(s) = n.sm_active_mean {
                        e.1 += s;
                        e.2 += 1;
                    }
                    e.3 += n.gpus_throttling;
                }
            }
            for (j, (p, sm, smn, thr)) in jobs {
                put(
                    format!("job:{j}"),
                    p,
                    (smn > 0).then(|| sm / f64::from(smn)),
                    thr,
                );
            }
        }
        // Per reason, for the scopes that have power this tick (the cluster always).
        for (scope, counts) in by_reason {
            if let Some(e) = self.acc.get_mut(scope) {
                for (acc, n) in e.thr_s_by_reason.iter_mut().zip(counts) {
                    *acc += f64::from(*n) * dt_s;
                }
            }
        }
        done
    }
}

/// Per-hour rollups of the cluster and each rack.
pub struct HourRollups(Periods);

impl Default for HourRollups {
    fn default() -> Self {
        HourRollups(Periods::new(3_600_000, false))
    }
}

/// GPUs throttled per reason (in the order of `aggregate::REASONS`; a GPU counts under each
/// of its reasons), for the cluster and each rack: counted once per tick by the source and
/// given to both rollups.
#[derive(Default)]
pub struct ReasonCounter {
    /// Node -> rack scope, rebuilt when the nodes change.
    rack_of: std::collections::HashMap<String, String>,
}

/// Scope (`cluster`, `rack:A01`) and its GPUs throttled per reason.
pub type ReasonCounts = Vec<(String, [u32; 5])>;

impl ReasonCounter {
    pub fn count(&mut self, ov: &Overview, r: &Readings) -> ReasonCounts {
        if self.rack_of.len() != ov.nodes.len() {
            self.rack_of = ov
                .nodes
                .iter()
                .map(|n| (n.name.clone(), format!("rack:{}", n.rack)))
                .collect();
        }
        let mut cluster = [0u32; 5];
        let mut racks: std::collections::HashMap<&str, [u32; 5]> = std::collections::HashMap::new();
        for g in &r.gpus {
            let Some(t) = g.throttle.filter(|t| t.is_throttling()) else {
                continue;
            };
            let rack = self.rack_of.get(&g.node).map(String::as_str);
            for (k, (bit, _)) in crate::aggregate::REASONS.iter().enumerate() {
                if t.0 & bit != 0 {
                    cluster[k] += 1;
                    if let Some(rack) = rack {
                        racks.entry(rack).or_default()[k] += 1;
                    }
                }
            }
        }
        let mut out = vec![("cluster".to_string(), cluster)];
        out.extend(racks.into_iter().map(|(k, v)| (k.to_string(), v)));
        out
    }
}

impl HourRollups {
    /// Adds one overview (and its throttling per reason) that stands for `dt_ms` of source
    /// time; returns the finished hour's rollups when an hour boundary passed.
    pub fn add(&mut self, ov: &Overview, by_reason: &ReasonCounts, dt_ms: i64) -> Vec<Rollup1h> {
        let Some((at_ms, scopes)) = self.0.add(ov, by_reason, dt_ms) else {
            return Vec::new();
        };
        scopes
            .into_iter()
            .map(|(scope, a)| Rollup1h {
                scope,
                at_ms,
                power_watts_mean: a.power_mean(),
                power_watts_min: a.power_min,
                power_watts_max: a.power_max,
                energy_wh: a.energy_wh,
                sm_active_mean: a.sm_mean(),
                gpus_throttling_max: a.thr_max,
                throttled_gpu_seconds: a.thr_gpu_seconds,
                throttled_s_by_reason: a.thr_s_by_reason,
                samples: a.samples,
            })
            .collect()
    }
}

/// Per-minute rollups of the cluster, each rack and each running job.
pub struct MinuteRollups(Periods);

impl Default for MinuteRollups {
    fn default() -> Self {
        MinuteRollups(Periods::new(60_000, true))
    }
}

impl MinuteRollups {
    /// Adds one overview (and its throttling per reason, standing for `dt_ms`); returns the
    /// finished minute's rollups when a minute boundary passed.
    pub fn add(&mut self, ov: &Overview, by_reason: &ReasonCounts, dt_ms: i64) -> Vec<Rollup> {
        let Some((at_ms, scopes)) = self.0.add(ov, by_reason, dt_ms) else {
            return Vec::new();
        };
        scopes
            .into_iter()
            .map(|(scope, a)| Rollup {
                scope,
                at_ms,
                power_watts_mean: a.power_mean(),
                sm_active_mean: a.sm_mean(),
                gpus_throttling_max: a.thr_max,
                throttled_s_by_reason: a.thr_s_by_reason,
                samples: a.samples,
            })
            .collect()
    }
}

/// Waits for the next tick of a periodic task; false once `shutdown` is signalled.
pub async fn next_tick(
    ticker: &mut tokio::time::Interval,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    tokio::select! {
        _ = ticker.tick() => {}
        _ = shutdown.changed() => return false,
    }
    !*shutdown.borrow()
}

/// Wall-clock Unix ms: read only here, at the edge, and passed inward.
pub fn wall_now_ms() -> UnixMs {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as UnixMs)
        .unwrap_or(0)
}

/// Settings of the simulator source task.
pub struct SimSource {
    pub sim: Sim,
    pub start_ms: UnixMs,
    pub speed: f64,
    pub interval_ms: u64,
    /// Scrape the simulator's exporters (the embedded default) instead of reading it directly.
    pub ingest: Option<crate::ingest::Telemetry>,
    /// With `ingest`: query this PromQL store (which scrapes the exporters) instead of scraping.
    pub promql: Option<crate::promql::PromQl>,
    /// How often each target is scraped; data older than two of these is stale.
    pub scrape_interval_ms: u64,
    /// Whether the simulator makes up GPU and BMC readings. Off when the telemetry comes
    /// from configured exporters: the simulator then only schedules (and there is no truth).
    pub simulate_telemetry: bool,
    /// Allocated GPUs under this SM activity count as idle in reports.
    pub idle_below_sm: f64,
}

/// Runs the simulator as the live source until `shutdown` turns true.
pub async fn run_sim_source(
    src: SimSource,
    live: Arc<Live>,
    q: StoreQueue,
    mut ops: mpsc::Receiver<crate::scheduler::SimOp>,
    mut shutdown: watch::Receiver<bool>,
) {
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
    } = src;
    let mut reports = crate::reports::Accumulator::new(idle_below_sm);
    q.send(StoreWrite::Inventory(Box::new(sim.inventory().clone())));
    record_events(&q, &live, sim.drain_events());
    let inventory = Arc::new(sim.inventory().clone());
    live.set_inventory(Arc::clone(&inventory));
    let wall_start = Instant::now();
    let mut ticker = tokio::time::interval(Duration::from_millis(interval_ms));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut seq = 0u64;
    let mut rollups = MinuteRollups::default();
    let mut lost_gpu_hours = 0.0f64;
    let mut lost_by_rack: BTreeMap<String, f64> = BTreeMap::new();
    let rack_of: std::collections::HashMap<String, String> = inventory
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.rack.clone()))
        .collect();
    let mut node_states = NodeStates::default();
    let mut hours = HourRollups::default();
    let mut reasons = ReasonCounter::default();
    let mut prev_at_ms: Option<UnixMs> = None;
    loop {
        let sim_now = || start_ms + (wall_start.elapsed().as_millis() as f64 * speed) as i64;
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.changed() => break,
            // After an action: publish its effect now rather than at the next interval.
            _ = live.poked() => {}
            Some(op) = ops.recv() => {
                // Scheduler calls act on the simulator as of now, between ticks.
                sim.advance_to(sim_now());
                crate::scheduler::serve_sim_op(&mut sim, op);
                let events = sim.drain_events();
                note_losses(&mut reports, &live, &events);
                record_events(&q, &live, events);
                continue;
            }
        }
        if *shutdown.borrow() {
            break;
        }
        let began = Instant::now();
        sim.advance_to(sim_now());
        let events = sim.drain_events();
        note_losses(&mut reports, &live, &events);
        record_events(&q, &live, events);
        let readings: Readings = if simulate_telemetry {
            sim.readings()
        } else {
            sim.sched_readings()
        };
        let slurm_nodes = sim.slurm_nodes();
        node_states.observe(
            &q,
            sim.now_ms(),
            &slurm_nodes
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
        live.set_sched(SchedSnapshot {
            at_ms: sim.now_ms(),
            polled_ms: wall_now_ms(),
            interval_ms: interval_ms as i64,
            nodes: slurm_nodes,
            jobs: sim.slurm_jobs(),
        });
        let truth = simulate_telemetry.then(|| sim.truth_with(&readings));
        // Publish the frame first: the simulator's exporters serve it to the scrapes below,
        // so everything this tick shows comes from one instant.
        let frame = live.set_sim_frame(SimFrame {
            inventory: Arc::clone(&inventory),
            readings,
        });
        let mut scraped: Option<Arc<Readings>> = None;
        let view: &Readings = match ingest.as_mut() {
            None => &frame.readings,
            // Scraped by its own task: take what is fresh now.
            Some(crate::ingest::Telemetry::Task(shared)) => {
                let r = &frame.readings;
                let ing = shared.lock().unwrap_or_else(|e| e.into_inner());
                scraped = Some(Arc::new(ing.readings(
                    &inventory,
                    wall_now_ms(),
                    r.at_ms,
                    2 * scrape_interval_ms.max(interval_ms) as i64,
                    r.nodes.clone(),
                    r.jobs.clone(),
                )));
                scraped.as_deref().unwrap_or(r)
            }
            Some(crate::ingest::Telemetry::InTick(ing)) => {
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
                            crate::ingest::RoundStats {
                                targets: crate::ingest::PROMQL_QUERIES,
                                failed: crate::ingest::PROMQL_QUERIES,
                                ..Default::default()
                            }
                        }
                    },
                };
                live.metrics.record_scrape_round(&round);
                live.set_targets(ing.health());
                let r = &frame.readings;
                scraped = Some(Arc::new(ing.readings(
                    &inventory,
                    wall_now_ms(),
                    r.at_ms,
                    2 * scrape_interval_ms.max(interval_ms) as i64,
                    r.nodes.clone(),
                    r.jobs.clone(),
                )));
                scraped.as_deref().unwrap_or(r)
            }
        };
        seq += 1;
        let mut ov =
            crate::aggregate::overview(&inventory, view, seq, interval_ms as i64, wall_now_ms());
        // Throughput lost to throttling: each throttled GPU's clock deficit over the time
        // since the previous tick (source time).
        if let Some(prev) = prev_at_ms {
            let hours = (view.at_ms - prev).max(0) as f64 / 3_600_000.0;
            for g in &view.gpus {
                if let Some(d) = crate::aggregate::clock_deficit(g) {
                    lost_gpu_hours += d * hours;
                    if let Some(rack) = rack_of.get(g.node.as_str()) {
                        *lost_by_rack.entry(rack.clone()).or_default() += d * hours;
                    }
                }
            }
        }
        let tick_ms = prev_at_ms.map(|p| view.at_ms - p).unwrap_or(0);
        prev_at_ms = Some(view.at_ms);
        ov.thermal.lost_gpu_hours = (lost_gpu_hours * 100.0).round() / 100.0;
        ov.thermal.lost_by_rack = lost_by_rack
            .iter()
            .map(|(r, h)| (r.clone(), (h * 100.0).round() / 100.0))
            .collect();
        ov.summary.alerts_firing = live.alerts_firing();
        let by_reason = reasons.count(&ov, view);
        for r in rollups.add(&ov, &by_reason, tick_ms) {
            q.send(StoreWrite::Rollup(r));
        }
        for r in hours.add(&ov, &by_reason, tick_ms) {
            q.send(StoreWrite::Rollup1h(r));
        }
        let deltas = reports.observe(&inventory, view, tick_ms);
        if !deltas.is_empty() {
            q.send(StoreWrite::Report(deltas));
        }
        live.record_window(view, &ov);
        live.set_latest(match scraped {
            Some(s) => Latest::Owned(s),
            None => Latest::Frame(Arc::clone(&frame)),
        });
        // Rollups and the hot window above took exact values; the floor gets steady ones.
        if let Some(prev) = live.current() {
            crate::aggregate::steady(&prev.overview, &mut ov);
        }
        live.publish(ov, truth);
        live.metrics.live_tick_duration_us.store(
            began.elapsed().as_micros() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
    }
    tracing::info!("simulator source stopped");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ov(at_ms: UnixMs, power: f64, thr: u32) -> Overview {
        let mut o = Overview {
            at_ms,
            ..Overview::default()
        };
        o.summary.power_watts = power;
        o.summary.gpus_throttling = thr;
        o
    }

    #[test]
    fn a_minute_keeps_seconds_throttled_per_reason() {
        let mut m = MinuteRollups::default();
        let two_thermal = Readings {
            at_ms: 0,
            gpus: (0..2)
                .map(|i| app::model::GpuReading {
                    node: "n1".into(),
                    index: i,
                    throttle: Some(app::model::ThrottleReasons(
                        app::model::ThrottleReasons::SW_THERMAL,
                    )),
                    ..Default::default()
                })
                .collect(),
            ..Readings::default()
        };
        let mut reasons = ReasonCounter::default();
        let counts = reasons.count(&ov(0, 1000.0, 2), &two_thermal);
        // Three 20 s ticks with two GPUs thermally throttled, then the next minute.
        for t in [20_000, 40_000, 59_000] {
            assert!(m.add(&ov(t, 1000.0, 2), &counts, 20_000).is_empty());
        }
        let done = m.add(&ov(60_000, 1000.0, 0), &counts, 1_000);
        let c = done.iter().find(|r| r.scope == "cluster").expect("cluster");
        // HW thermal, SW thermal, SW power cap, HW slowdown, HW power brake.
        assert_eq!(c.throttled_s_by_reason, [0.0, 120.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn an_hour_rolls_up_mean_min_max_energy_and_throttled_time() {
        let h = 3_600_000;
        let third = h / 3;
        let mut hr = HourRollups::default();
        // `thr` GPUs throttling: the first for HW thermal and HW slowdown at once, the rest
        // for SW power cap.
        let readings = |thr: u32| Readings {
            at_ms: 0,
            gpus: (0..thr)
                .map(|i| app::model::GpuReading {
                    node: "n1".into(),
                    index: i,
                    throttle: Some(app::model::ThrottleReasons(if i == 0 {
                        app::model::ThrottleReasons::HW_THERMAL
                            | app::model::ThrottleReasons::HW_SLOWDOWN
                    } else {
                        app::model::ThrottleReasons::SW_POWER_CAP
                    })),
                    ..Default::default()
                })
                .collect(),
            ..Readings::default()
        };
        let mut reasons = ReasonCounter::default();
        assert!(hr
            .add(
                &ov(0, 1000.0, 0),
                &reasons.count(&ov(0, 0.0, 0), &readings(0)),
                third
            )
            .is_empty());
        assert!(hr
            .add(
                &ov(third, 2000.0, 2),
                &reasons.count(&ov(0, 0.0, 0), &readings(2)),
                third
            )
            .is_empty());
        assert!(hr
            .add(
                &ov(2 * third, 3000.0, 4),
                &reasons.count(&ov(0, 0.0, 0), &readings(4)),
                third
            )
            .is_empty());
        let done = hr.add(
            &ov(h, 500.0, 0),
            &reasons.count(&ov(0, 0.0, 0), &readings(0)),
            third,
        );
        let c = done
            .iter()
            .find(|r| r.scope == "cluster")
            .expect("cluster hour");
        assert_eq!(c.at_ms, 0);
        assert_eq!((c.power_watts_min, c.power_watts_max), (1000.0, 3000.0));
        assert!((c.power_watts_mean - 2000.0).abs() < 1e-9);
        assert!((c.energy_wh - 2000.0).abs() < 1e-6, "{}", c.energy_wh);
        assert_eq!(c.gpus_throttling_max, 4);
        assert!((c.throttled_gpu_seconds - 6.0 * 1200.0).abs() < 1e-6);
        // Per reason (HW thermal, SW thermal, SW power cap, HW slowdown, HW power brake):
        // one GPU for HW thermal and slowdown in two ticks; 1 then 3 for the power cap.
        assert_eq!(
            c.throttled_s_by_reason,
            [2400.0, 0.0, 4.0 * 1200.0, 2400.0, 0.0]
        );
        assert_eq!(c.samples, 3);
        assert_eq!(c.sm_active_mean, None);
    }
}
