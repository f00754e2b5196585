//! The one owner of live state, and the one pipeline that every source feeds.
//!
//! A source task (one per kind of cluster, in `sources/`) produces a [`Frame`] once per
//! live interval: scheduler state plus readings of one instant. [`Pipeline`] owns everything that follows, for every
//! source alike: the overview, throttling losses, rollups, report deltas, node state
//! changes, the hot window, and the publication (the delta serialized once, shared by every
//! client). History goes to the store through a bounded queue drained by one writer task
//! ([`store_queue`]), so a slow database never delays live views; what the queue cannot take
//! is counted and logged, not hidden.

mod estimates;
mod pipeline;
mod rollups;
mod store_queue;
pub mod window;

pub use pipeline::{Event, Frame, Pipeline, Step, EVIDENCE_ECC_DBE, EVIDENCE_IB_LINK_DOWN};
pub use rollups::{HourRollups, MinuteRollups, ReasonCounter, ReasonCounts};
pub use store_queue::{spawn_store_writer, spawn_store_writer_fenced, StoreQueue, StoreWrite};

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, RwLock};

use app::live::Overview;
use app::model::{Inventory, UnixMs};
use tokio::sync::broadcast;

use crate::clock::wall_now_ms;
use crate::metrics::Metrics;
use crate::sim::SimTruth;
use crate::telemetry::Readings;

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
    /// The overview as JSON, made once, by the first stream that needs a snapshot of this
    /// tick (a storm of new streams would otherwise serialize it once each).
    pub overview_json: std::sync::OnceLock<Arc<str>>,
}

impl Tick {
    /// [`Tick::overview_json`], made on first use.
    pub fn overview_json(&self) -> Arc<str> {
        Arc::clone(self.overview_json.get_or_init(|| {
            serde_json::to_string(&*self.overview)
                .unwrap_or_default()
                .into()
        }))
    }
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
    pub nodes: Vec<crate::scheduler::SchedNode>,
    pub jobs: Vec<crate::scheduler::SchedJob>,
    /// slurmctld's newest diagnostics (read less often than the poll), if it gives them.
    pub health: Option<Arc<HealthPoll>>,
}

/// One read of the scheduler's own health, and when it was taken (wall clock).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HealthPoll {
    pub polled_ms: UnixMs,
    /// How often it is read.
    pub every_ms: i64,
    pub health: app::queue::SchedHealth,
}

impl HealthPoll {
    pub fn stale_at(&self, now_ms: UnixMs) -> bool {
        app::queue::health_stale(self.polled_ms, self.every_ms, now_ms)
    }

    pub fn view(&self) -> app::queue::HealthView {
        app::queue::HealthView {
            polled_ms: self.polled_ms,
            every_ms: self.every_ms,
            health: self.health.clone(),
        }
    }
}

/// What the floor marks on its nodes ([`app::live::marks`]) from outside the pipeline:
/// the lemons of the recent reliability, and the radar's open alerts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FloorMarks {
    pub lemons: std::collections::HashSet<String>,
    pub stragglers: std::collections::HashSet<String>,
    pub hung_jobs: std::collections::HashSet<u64>,
    /// Per rack, its worst open incident (the alert task sets them).
    pub rack_incidents: std::collections::HashMap<String, app::live::RackIncident>,
    /// Per node, the worst open incident's severity and how many hit it.
    pub node_incidents: std::collections::HashMap<String, (String, u32)>,
}

impl FloorMarks {
    /// Sets every node tile's marks: a node running a hung job is marked hung.
    pub fn stamp(&self, ov: &mut Overview) {
        use app::live::marks::{HUNG, LEMON, STRAGGLER};
        for n in &mut ov.nodes {
            let mut k = 0;
            if self.lemons.contains(&n.name) {
                k |= LEMON;
            }
            if self.stragglers.contains(&n.name) {
                k |= STRAGGLER;
            }
            if n.jobs.iter().any(|j| self.hung_jobs.contains(j)) {
                k |= HUNG;
            }
            n.marks = k;
        }
        for r in &mut ov.racks {
            r.incident = self.rack_incidents.get(&r.name).cloned();
        }
        crate::aggregate::halls::stamp_incidents(&mut ov.halls, &ov.racks);
    }

    /// Per node, the worst of `incidents` (critical first, as grouped) and how many hit it.
    pub fn nodes_of(
        incidents: &[app::views::Incident],
    ) -> std::collections::HashMap<String, (String, u32)> {
        let mut out: std::collections::HashMap<String, (String, u32)> =
            std::collections::HashMap::new();
        for i in incidents {
            for n in &i.nodes {
                out.entry(n.clone())
                    .and_modify(|e| e.1 += 1)
                    .or_insert_with(|| (i.severity.clone(), 1));
            }
        }
        out
    }

    /// Per rack, the worst of `incidents` (critical first, as grouped) and how many hit it.
    pub fn racks_of(
        incidents: &[app::views::Incident],
    ) -> std::collections::HashMap<String, app::live::RackIncident> {
        let mut out: std::collections::HashMap<String, app::live::RackIncident> =
            std::collections::HashMap::new();
        for i in incidents {
            for rack in &i.racks {
                out.entry(rack.clone())
                    .and_modify(|r| r.count += 1)
                    .or_insert_with(|| app::live::RackIncident {
                        severity: i.severity.clone(),
                        words: i.cause.summary.chars().take(120).collect(),
                        link: i.place_link.clone(),
                        count: 1,
                    });
            }
        }
        out
    }

    /// The radar's marks from open alerts: `straggler` on `job:{id}:{node}:gpu{i}` marks
    /// the node, `job_hung` on `job:{id}` the job.
    pub fn radar_of<'a>(
        open: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (
        std::collections::HashSet<String>,
        std::collections::HashSet<u64>,
    ) {
        let mut stragglers = std::collections::HashSet::new();
        let mut hung = std::collections::HashSet::new();
        for (rule, subject) in open {
            let Some(rest) = subject.strip_prefix("job:") else {
                continue;
            };
            match rule {
                "straggler" => {
                    if let Some((node, _gpu)) = rest
                        .split_once(':')
                        .and_then(|(_, r)| r.rsplit_once(":gpu"))
                    {
                        stragglers.insert(node.to_string());
                    }
                }
                "job_hung" => {
                    if let Ok(id) = rest.parse() {
                        hung.insert(id);
                    }
                }
                _ => {}
            }
        }
        (stragglers, hung)
    }
}

/// Checkpoints recorded between two frames that the pipeline books (a standby's, which no
/// pipeline reads, stop here).
pub const MAX_CHECKPOINTS_IN: usize = 4096;

/// Live state, shared by the HTTP layer and the source task.
pub struct Live {
    inventory: RwLock<Option<Arc<Inventory>>>,
    latest: RwLock<Option<Arc<Latest>>>,
    sched: RwLock<Option<Arc<SchedSnapshot>>>,
    waits: RwLock<Arc<std::collections::HashMap<u64, app::queue::Wait>>>,
    /// Newest complete checkpoint end per job (sources, ingest and the scanner note them).
    last_checkpoint: Mutex<std::collections::HashMap<u64, UnixMs>>,
    /// Checkpoints recorded outside the source loop (the scanner, the ingest API), for the
    /// pipeline to book at its next frame; at most [`MAX_CHECKPOINTS_IN`].
    checkpoints_in: Mutex<Vec<app::model::Checkpoint>>,
    /// Alerts firing now (for the header's badge), set by the alert task.
    alerts_firing: std::sync::atomic::AtomicU32,
    alerts_critical: std::sync::atomic::AtomicU32,
    /// What the floor marks on nodes, set from outside the pipeline, stamped each tick.
    marks: RwLock<Arc<FloorMarks>>,
    /// Wakes the source early (after an action) so browsers see the effect at once.
    poke: tokio::sync::Notify,
    current: RwLock<Option<Arc<Tick>>>,
    sim_frame: RwLock<Option<Arc<SimFrame>>>,
    targets: RwLock<Arc<Vec<crate::telemetry::scrape::TargetHealth>>>,
    /// The last hour at 10 s resolution, per GPU, node, rack and cluster.
    window: Mutex<crate::live::window::HotWindow>,
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
            waits: RwLock::default(),
            poke: tokio::sync::Notify::new(),
            alerts_firing: std::sync::atomic::AtomicU32::new(0),
            alerts_critical: std::sync::atomic::AtomicU32::new(0),
            marks: RwLock::new(Arc::default()),
            last_checkpoint: Mutex::new(std::collections::HashMap::new()),
            checkpoints_in: Mutex::new(Vec::new()),
            current: RwLock::new(None),
            sim_frame: RwLock::new(None),
            targets: RwLock::new(Arc::new(Vec::new())),
            window: Mutex::new(crate::live::window::HotWindow::new(
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

    /// Keeps a poll, and why each of its pending jobs waits (worked out here, once per
    /// poll, for every browser).
    pub fn set_sched(&self, s: Arc<SchedSnapshot>) {
        let inv = self.inventory();
        let racks: std::collections::HashMap<&str, &str> = inv
            .as_ref()
            .map(|i| {
                i.nodes
                    .iter()
                    .map(|n| (n.name.as_str(), n.rack.as_str()))
                    .collect()
            })
            .unwrap_or_default();
        let waits = crate::scheduler::pending::explain(&s.jobs, &s.nodes, &|n| {
            racks.get(n).map(|r| r.to_string())
        });
        if let Ok(mut g) = self.waits.write() {
            *g = Arc::new(waits);
        }
        if let Ok(mut g) = self.sched.write() {
            *g = Some(s);
        }
    }

    /// Why each pending job of the last poll waits, by job id.
    pub fn waits(&self) -> Arc<std::collections::HashMap<u64, app::queue::Wait>> {
        self.waits
            .read()
            .map(|g| Arc::clone(&g))
            .unwrap_or_default()
    }

    /// A checkpoint the store now holds, recorded outside the source loop (the scanner, the
    /// ingest API): noted at once when complete, and booked in its job's ledger by the
    /// pipeline's next frame, as the simulator's checkpoints are. On a replica that runs no
    /// pipeline, or past [`MAX_CHECKPOINTS_IN`] between two frames, it is only noted.
    pub fn checkpoint_recorded(&self, c: app::model::Checkpoint) {
        if c.complete {
            self.checkpoint_seen(c.job_id, c.started_ms.saturating_add(c.duration_ms));
        }
        if let Ok(mut v) = self.checkpoints_in.lock() {
            if v.len() < MAX_CHECKPOINTS_IN {
                v.push(c);
            }
        }
    }

    /// The checkpoints recorded since the last call, for the pipeline.
    pub(crate) fn take_checkpoints(&self) -> Vec<app::model::Checkpoint> {
        self.checkpoints_in
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
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

    /// Open critical incidents whose cause is not silenced.
    pub fn alerts_critical(&self) -> u32 {
        self.alerts_critical
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn set_alerts_critical(&self, n: u32) {
        self.alerts_critical
            .store(n, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn floor_marks(&self) -> Arc<FloorMarks> {
        self.marks
            .read()
            .map(|m| Arc::clone(&m))
            .unwrap_or_default()
    }

    /// The nodes the recent reliability marks for RMA (the lemon task sets them).
    pub fn set_lemons(&self, lemons: std::collections::HashSet<String>) {
        self.update_marks(|m| m.lemons = lemons);
    }

    /// The radar's open alerts: nodes with a straggling GPU, and hung jobs (the alert task
    /// sets them).
    pub fn set_radar_marks(
        &self,
        stragglers: std::collections::HashSet<String>,
        hung_jobs: std::collections::HashSet<u64>,
    ) {
        self.update_marks(|m| {
            m.stragglers = stragglers;
            m.hung_jobs = hung_jobs;
        });
    }

    /// Per rack and node, the worst open incident (the alert task sets them).
    pub fn set_incident_marks(&self, incidents: &[app::views::Incident]) {
        let racks = FloorMarks::racks_of(incidents);
        let nodes = FloorMarks::nodes_of(incidents);
        self.update_marks(|m| {
            m.rack_incidents = racks;
            m.node_incidents = nodes;
        });
    }

    fn update_marks(&self, f: impl FnOnce(&mut FloorMarks)) {
        if let Ok(mut m) = self.marks.write() {
            let mut next = FloorMarks::clone(&m);
            f(&mut next);
            if next != **m {
                *m = Arc::new(next);
            }
        }
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

    pub fn set_sim_frame(&self, frame: SimFrame) -> Arc<SimFrame> {
        let frame = Arc::new(frame);
        if let Ok(mut f) = self.sim_frame.write() {
            *f = Some(Arc::clone(&frame));
        }
        frame
    }

    /// A series of the hot window since `from_ms`; `None` if the window has no such series.
    pub fn history(
        &self,
        scope: &crate::live::window::Scope,
        metric: crate::live::window::Metric,
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
    pub fn targets(&self) -> Arc<Vec<crate::telemetry::scrape::TargetHealth>> {
        self.targets
            .read()
            .map(|t| Arc::clone(&t))
            .unwrap_or_default()
    }

    pub fn set_targets(&self, t: Vec<crate::telemetry::scrape::TargetHealth>) {
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
            overview_json: std::sync::OnceLock::new(),
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
