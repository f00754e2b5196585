//! The one pipeline: everything that follows a source's frame, for every source.
//!
//! A source (simulator, Slurm over the CLI or slurmrestd, with configured exporters or a
//! PromQL store) produces a [`Frame`] for one instant and hands it to [`Pipeline::run`]. It
//! never calls the steps itself, so no source can skip one: node state changes, the
//! overview, GPU-hours lost to throttling, minute and hour rollups, report deltas, the hot
//! window and the publication all happen here, once. [`Pipeline::step`] is the part with no
//! effect beyond the pipeline itself, so a test can feed the same frames through two
//! sources and compare what comes out.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use app::live::Overview;
use app::model::{Checkpoint, Inventory, Job, NodeState, UnixMs};

use super::rollups::{HourRollups, MinuteRollups, ReasonCounter};
use super::store_queue::{StoreQueue, StoreWrite};
use super::{Latest, Live, SchedSnapshot};
use crate::aggregate;
use crate::clock::wall_now_ms;
use crate::reports::{loses_work, Accumulator};
use crate::scheduler::SchedNode;
use crate::sim::SimTruth;
use crate::telemetry::Readings;

/// Something a source saw happen, for history (and, when a job lost work, for reports).
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A job's new state (or its first sight) at `at_ms`, with the scheduler's words.
    Job {
        job: Job,
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
}

/// What every source produces for one instant.
pub struct Frame {
    /// What exists: the readings and the scheduler's state are of this inventory.
    pub inventory: Arc<Inventory>,
    /// The readings of the instant (`at_ms` on the source's clock, simulated or wall).
    pub readings: Latest,
    /// The scheduler's state as polled at that instant (node reasons included).
    pub sched: Arc<SchedSnapshot>,
    /// What happened since the previous frame, in order.
    pub events: Vec<Event>,
    /// The simulator's ground truth of the instant; none for a real cluster.
    pub truth: Option<SimTruth>,
}

/// What one step produced: the overview with exact values (before it is steadied for the
/// floor) and the history it writes, in order.
#[derive(Debug)]
pub struct Step {
    pub overview: Overview,
    pub writes: Vec<StoreWrite>,
}

/// The state that lives from one frame to the next, whatever the source.
pub struct Pipeline {
    interval_ms: i64,
    seq: u64,
    inventory: Option<Arc<Inventory>>,
    prev_at_ms: Option<UnixMs>,
    throttling: ThrottleLosses,
    node_states: NodeStates,
    evidence: EvidenceWatch,
    reasons: ReasonCounter,
    estimates: super::estimates::EstimateWatch,
    idle: aggregate::idle::IdleWatch,
    idle_rule: aggregate::idle::IdleRule,
    minutes: MinuteRollups,
    hours: HourRollups,
    reports: Accumulator,
    /// Where reports stood when this pipeline took over (see [`Pipeline::resume`]).
    resume: Option<(UnixMs, i64)>,
}

impl Pipeline {
    /// A pipeline publishing every `interval_ms`; allocated GPUs under `idle_below_sm` SM
    /// activity count as idle in reports.
    pub fn new(interval_ms: i64, idle_below_sm: f64) -> Pipeline {
        Pipeline {
            interval_ms,
            seq: 0,
            inventory: None,
            prev_at_ms: None,
            throttling: ThrottleLosses::default(),
            node_states: NodeStates::default(),
            evidence: EvidenceWatch::default(),
            reasons: ReasonCounter::default(),
            estimates: Default::default(),
            idle: Default::default(),
            idle_rule: Default::default(),
            minutes: MinuteRollups::default(),
            hours: HourRollups::default(),
            reports: Accumulator::new(idle_below_sm),
            resume: None,
        }
    }

    /// Continues from a predecessor (a previous process, or the leader this one took over
    /// from) whose reports were accounted through `accounted_ms`: if the first frame comes
    /// within `max_gap_ms` after it, that frame stands for the time since, so a takeover
    /// leaves no gap and counts nothing twice. A longer gap stays a gap (nobody saw it).
    pub fn resume(&mut self, accounted_ms: UnixMs, max_gap_ms: i64) {
        self.resume = Some((accounted_ms, max_gap_ms));
    }

    /// The hang rule's hold, which the badput ledger's hung time follows.
    pub fn set_hang_ms(&mut self, hang_ms: i64) {
        self.reports.set_hang_ms(hang_ms);
    }

    /// What a GPU held idle is (the `gpus_idle` rule's thresholds).
    pub fn set_idle_rule(&mut self, rule: aggregate::idle::IdleRule) {
        self.idle_rule = rule;
    }

    /// The last writes at a clean stop: report deltas gathered since the last flush.
    pub fn finish(&mut self, q: &StoreQueue) {
        let deltas = self.reports.flush();
        if let (false, Some(through_ms)) = (deltas.is_empty(), self.prev_at_ms) {
            q.send(StoreWrite::Report { deltas, through_ms });
        }
    }

    /// One frame's overview and history. Reads `live` only for what other tasks keep there
    /// (checkpoints they saw, alerts firing) and notes the frame's complete checkpoints in it.
    pub fn step(&mut self, frame: &mut Frame, live: &Live, published_ms: UnixMs) -> Step {
        let mut writes = Vec::new();
        self.place(&frame.inventory, &mut writes);
        for c in live.take_checkpoints() {
            self.checkpoint(&c, live);
        }
        let events = std::mem::take(&mut frame.events);
        self.events(events, live, &mut writes);
        self.node_states
            .observe(frame.sched.at_ms, &frame.sched.nodes, &mut writes);
        self.estimates
            .observe(&frame.sched.jobs, frame.sched.at_ms, &mut writes);
        let r = frame.readings.readings();
        self.evidence.observe(r, &mut writes);
        self.seq += 1;
        let mut ov = aggregate::overview(
            &frame.inventory,
            r,
            self.seq,
            self.interval_ms,
            published_ms,
        );
        // What each reading stands for: the source time since the previous frame (or,
        // first, since where a predecessor's reports stopped, if that was recent).
        let resumed = match (self.prev_at_ms, self.resume.take()) {
            (None, Some((a, gap))) if r.at_ms > a && r.at_ms - a <= gap => Some(a),
            _ => None,
        };
        let before = self.prev_at_ms.or(resumed);
        let dt_ms = before.map_or(0, |p| r.at_ms - p);
        if before.is_some() {
            self.throttling.add(r, dt_ms);
        }
        self.prev_at_ms = Some(r.at_ms);
        self.throttling.write(&mut ov);
        ov.segments = crate::cluster::segments::summary(&crate::cluster::segments::segments(
            &frame.inventory,
            &frame.sched.nodes,
            &frame.sched.jobs,
        ));
        ov.idle = self.idle.observe(&self.idle_rule, r);
        ov.summary.alerts_firing = live.alerts_firing();
        ov.summary.alerts_critical = live.alerts_critical();
        live.floor_marks().stamp(&mut ov);
        let by_reason = self.reasons.count(&ov, r);
        writes.extend(
            self.minutes
                .add(&ov, &by_reason, dt_ms)
                .into_iter()
                .map(StoreWrite::Rollup),
        );
        writes.extend(
            self.hours
                .add(&ov, &by_reason, dt_ms)
                .into_iter()
                .map(StoreWrite::Rollup1h),
        );
        self.reports.set_held_idle(&ov.idle);
        let deltas = self.reports.observe(&frame.inventory, r, dt_ms);
        // A flush holds every frame before this one.
        if let (false, Some(through_ms)) = (deltas.is_empty(), before) {
            writes.push(StoreWrite::Report { deltas, through_ms });
        }
        Step {
            overview: ov,
            writes,
        }
    }

    /// Runs one frame through every step and publishes it: history queued, live state set,
    /// the tick published.
    pub fn run(&mut self, mut frame: Frame, live: &Live, q: &StoreQueue) {
        if live
            .inventory()
            .is_none_or(|i| !Arc::ptr_eq(&i, &frame.inventory))
        {
            live.set_inventory(Arc::clone(&frame.inventory));
        }
        let Step {
            overview: mut ov,
            writes,
        } = self.step(&mut frame, live, wall_now_ms());
        for w in writes {
            q.send(w);
        }
        let Frame {
            readings,
            sched,
            truth,
            ..
        } = frame;
        live.set_sched(sched);
        live.record_window(readings.readings(), &ov);
        live.set_latest(readings);
        // Rollups and the hot window above took exact values; the floor gets steady ones.
        if let Some(prev) = live.current() {
            aggregate::steady(&prev.overview, &mut ov);
        }
        live.publish(ov, truth);
    }

    /// Records events seen between frames (the simulator's answer to an action), at once.
    pub fn record(&mut self, events: Vec<Event>, live: &Live, q: &StoreQueue) {
        let mut writes = Vec::new();
        self.events(events, live, &mut writes);
        for w in writes {
            q.send(w);
        }
    }

    /// Takes an inventory before the first frame (so history written before it has one).
    pub fn start(&mut self, inventory: &Arc<Inventory>, live: &Live, q: &StoreQueue) {
        let mut writes = Vec::new();
        self.place(inventory, &mut writes);
        live.set_inventory(Arc::clone(inventory));
        for w in writes {
            q.send(w);
        }
    }

    fn place(&mut self, inventory: &Arc<Inventory>, writes: &mut Vec<StoreWrite>) {
        if self
            .inventory
            .as_ref()
            .is_some_and(|i| Arc::ptr_eq(i, inventory))
        {
            return;
        }
        writes.push(StoreWrite::Inventory(Box::new((**inventory).clone())));
        self.throttling.place(inventory);
        self.inventory = Some(Arc::clone(inventory));
    }

    /// What follows a checkpoint, whichever way it came (a source's event, the scanner, the
    /// ingest API): its save booked in the job's ledger, a complete one noted as the job's
    /// newest.
    fn checkpoint(&mut self, c: &app::model::Checkpoint, live: &Live) {
        self.reports
            .checkpoint(c.job_id, c.started_ms, c.duration_ms, c.complete);
        if c.complete {
            live.checkpoint_seen(c.job_id, c.started_ms.saturating_add(c.duration_ms));
        }
    }

    /// Events in order: a complete checkpoint is noted before the events after it, so a
    /// job that fails later in the same batch loses only the work since that checkpoint.
    fn events(&mut self, events: Vec<Event>, live: &Live, writes: &mut Vec<StoreWrite>) {
        for e in events {
            match e {
                Event::Checkpoint(c) => {
                    self.checkpoint(&c, live);
                    writes.push(StoreWrite::Checkpoint(c));
                }
                Event::Job { job, at_ms, detail } => {
                    if loses_work(job.state) {
                        self.reports
                            .job_lost(&job, at_ms, live.last_checkpoint(job.id));
                    }
                    writes.push(StoreWrite::Job {
                        job: Box::new(job),
                        at_ms,
                        detail,
                    });
                }
                Event::Xid {
                    node,
                    gpu,
                    xid,
                    at_ms,
                } => writes.push(StoreWrite::Xid {
                    node,
                    gpu,
                    xid,
                    at_ms,
                }),
            }
        }
    }
}

/// GPU-hours lost to throttling since start: each throttled GPU's clock deficit over the
/// source time its reading stands for, in all and per rack.
#[derive(Default)]
struct ThrottleLosses {
    gpu_hours: f64,
    by_rack: BTreeMap<String, f64>,
    rack_of: HashMap<String, String>,
}

impl ThrottleLosses {
    fn place(&mut self, inv: &Inventory) {
        self.rack_of = inv
            .nodes
            .iter()
            .map(|n| (n.name.clone(), n.rack.clone()))
            .collect();
    }

    fn add(&mut self, r: &Readings, dt_ms: i64) {
        let hours = dt_ms.max(0) as f64 / 3_600_000.0;
        for g in &r.gpus {
            if let Some(d) = aggregate::clock_deficit(g) {
                self.gpu_hours += d * hours;
                if let Some(rack) = self.rack_of.get(g.node.as_str()) {
                    *self.by_rack.entry(rack.clone()).or_default() += d * hours;
                }
            }
        }
    }

    fn write(&self, ov: &mut Overview) {
        let round = |h: f64| (h * 100.0).round() / 100.0;
        ov.thermal.lost_gpu_hours = round(self.gpu_hours);
        ov.thermal.lost_by_rack = self
            .by_rack
            .iter()
            .map(|(r, h)| (r.clone(), round(*h)))
            .collect();
    }
}

/// Hardware evidence as the readings show it, written when it changes: a GPU's last XID
/// (DCGM's gauge) turning to a new value, a GPU's double-bit ECC counter stepping up, a
/// node's InfiniBand link-down counter stepping up. The first reading of a GPU or node only
/// sets the baseline (when an XID already there happened is unknown); a missing reading
/// changes nothing; a counter that goes down (a reset) sets a new baseline. Every source's
/// readings go through here, so the simulator's faults are found as a real cluster's are.
#[derive(Default)]
struct EvidenceWatch(HashMap<String, NodeEvidence>);

#[derive(Default)]
struct NodeEvidence {
    /// Per GPU index: the last XID (0 for none) and the double-bit ECC count last seen.
    gpus: Vec<(Option<u32>, Option<u64>)>,
    ib_link_downed: Option<u64>,
}

impl EvidenceWatch {
    fn observe(&mut self, r: &Readings, writes: &mut Vec<StoreWrite>) {
        let at_ms = r.at_ms;
        for g in &r.gpus {
            // A GPU that reports nothing (its node is off, its exporter failed).
            if g.power_watts.is_none() && g.ecc_dbe_total.is_none() && g.last_xid.is_none() {
                continue;
            }
            let node = match self.0.get_mut(g.node.as_str()) {
                Some(n) => n,
                None => self.0.entry(g.node.clone()).or_default(),
            };
            let i = g.index as usize;
            if node.gpus.len() <= i {
                node.gpus.resize(i + 1, (None, None));
            }
            let (xid, dbe) = &mut node.gpus[i];
            let now = g.last_xid.unwrap_or(0);
            if let Some(before) = *xid {
                if now != 0 && now != before {
                    writes.push(StoreWrite::Xid {
                        node: g.node.clone(),
                        gpu: g.index,
                        xid: now,
                        at_ms,
                    });
                }
            }
            *xid = Some(now);
            if let Some(count) = g.ecc_dbe_total {
                if let Some(before) = *dbe {
                    if count > before {
                        writes.push(StoreWrite::Evidence {
                            node: g.node.clone(),
                            gpu: Some(g.index),
                            kind: EVIDENCE_ECC_DBE,
                            at_ms,
                            amount: count - before,
                        });
                    }
                }
                *dbe = Some(count);
            }
        }
        for n in &r.nodes {
            let name = &n.name;
            let Some(count) = n.ib_link_downed_total else {
                continue;
            };
            let node = match self.0.get_mut(name.as_str()) {
                Some(n) => n,
                None => self.0.entry(name.clone()).or_default(),
            };
            if let Some(before) = node.ib_link_downed {
                if count > before {
                    writes.push(StoreWrite::Evidence {
                        node: name.clone(),
                        gpu: None,
                        kind: EVIDENCE_IB_LINK_DOWN,
                        at_ms,
                        amount: count - before,
                    });
                }
            }
            node.ib_link_downed = Some(count);
        }
    }
}

/// Evidence kinds as the store keeps them.
pub const EVIDENCE_ECC_DBE: &str = "ecc_dbe";
pub const EVIDENCE_IB_LINK_DOWN: &str = "ib_link_down";

/// Each node's last scheduler state; a change (and the first sight of a node) is written.
#[derive(Default)]
struct NodeStates(HashMap<String, NodeState>);

impl NodeStates {
    fn observe(&mut self, at_ms: UnixMs, nodes: &[SchedNode], writes: &mut Vec<StoreWrite>) {
        for n in nodes {
            if self.0.get(&n.name) != Some(&n.state) {
                self.0.insert(n.name.clone(), n.state);
                writes.push(StoreWrite::NodeState {
                    node: n.name.clone(),
                    at_ms,
                    state: n.state,
                    reason: n.reason.clone().unwrap_or_default(),
                });
            }
        }
    }
}
