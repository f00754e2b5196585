//! The simulator's queue, as slurmctld's with `priority/multifactor` and `sched/backfill`:
//! pending jobs in priority order (age, fair-share, job size, partition, QOS), each started
//! now only where that delays no job above it (the reservations of higher-priority jobs are
//! planned from running jobs' time limits, not their true ends, as Slurm plans them). A job
//! that cannot start waits with Slurm's reason: `Resources` for the first, `Priority` for
//! the rest, `Dependency` until the job it follows ends, `QOSMaxGRESPerUser` past its QOS's
//! GPUs per user, `JobHeldUser` while held, `BeginTime` until a requeued job may start; and
//! with backfill's start estimate where the plan has one.

use app::model::{JobState, NodeState, UnixMs};
use serde::Serialize;

use super::faults::{self, PlannedFault};
use super::{Sim, SimEvent, HOUR_MS, MIN_MS};

/// Slurm's `PriorityMaxAge` (7 days) and the weights of a site's `slurm.conf`.
const MAX_AGE_MS: i64 = 7 * 24 * HOUR_MS;
const WEIGHT_AGE: f64 = 1000.0;
const WEIGHT_FAIRSHARE: f64 = 2000.0;
const WEIGHT_JOB_SIZE: f64 = 500.0;
const WEIGHT_PARTITION: f64 = 1000.0;
const WEIGHT_QOS: f64 = 2000.0;
/// The partition's `MaxTime`.
pub(super) const PARTITION_MAX_TIME_MS: i64 = 7 * 24 * HOUR_MS;
/// Pending jobs backfill looks at per pass (`bf_max_job_test`, lowered for the simulator).
const BACKFILL_DEPTH: usize = 200;

/// A job's QOS: its priority factor, and its GPUs per user (`MaxTRESPerUser=gres/gpu=`)
/// as nodes' worth of GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Qos {
    Normal,
    High,
    /// Hyper-parameter sweeps: two nodes' GPUs per user at a time.
    Sweep,
}

impl Qos {
    pub(super) fn name(self) -> &'static str {
        match self {
            Qos::Normal => "normal",
            Qos::High => "high",
            Qos::Sweep => "sweep",
        }
    }
    fn factor(self) -> f64 {
        match self {
            Qos::High => 1.0,
            Qos::Normal => 0.1,
            Qos::Sweep => 0.0,
        }
    }
    fn max_nodes_per_user(self) -> Option<usize> {
        (self == Qos::Sweep).then_some(2)
    }
}

/// A simulated job's place in the queue.
#[derive(Clone, Debug)]
pub(super) struct SimQueue {
    pub time_limit_ms: i64,
    pub qos: Qos,
    /// `--dependency=afterok:<id>`, until that job completes.
    pub after: Option<u64>,
    /// Slurm's reason while it waits, and backfill's start estimate.
    pub reason: &'static str,
    pub est_start_ms: Option<UnixMs>,
    pub priority: u64,
}

impl SimQueue {
    /// A job that will run `duration_ms`: its owner asks the next whole hour and one more,
    /// at most the partition's limit.
    pub(super) fn new(duration_ms: i64, qos: Qos, after: Option<u64>) -> SimQueue {
        let hours = (duration_ms + HOUR_MS - 1) / HOUR_MS + 1;
        SimQueue {
            time_limit_ms: (hours * HOUR_MS).min(PARTITION_MAX_TIME_MS),
            qos,
            after,
            reason: "None",
            est_start_ms: None,
            priority: 0,
        }
    }
}

/// A pending job as `/sim/truth` tells it: the reason the simulator's scheduler holds it
/// for, its estimate and priority.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TruthPending {
    pub job: u64,
    pub reason: String,
    pub est_start_ms: Option<UnixMs>,
    pub priority: u64,
    pub qos: &'static str,
}

/// The simulator's scheduler counters, as slurmctld's `sdiag` keeps them. A pass's time
/// is modelled (20 µs and 12 µs per job looked at), not measured: the figures follow the
/// queue's depth deterministically.
#[derive(Clone, Debug, Default)]
pub(super) struct SchedStats {
    since_ms: UnixMs,
    cycles: u64,
    last_us: u64,
    max_us: u64,
    sum_us: u64,
    last_depth: u64,
    last_queue: u64,
    backfilled: u64,
    submitted: u64,
    started: u64,
}

impl SchedStats {
    pub(super) fn new(since_ms: UnixMs) -> SchedStats {
        SchedStats {
            since_ms,
            ..Default::default()
        }
    }
}

/// Free nodes over time, as backfill plans: now's free nodes, plus those running jobs give
/// back at the end of their time limits, minus the reservations made so far.
struct Plan {
    /// (time, change in free nodes), unsorted.
    steps: Vec<(UnixMs, i64)>,
    free_now: i64,
}

impl Plan {
    /// The earliest time from `now` at which `need` nodes stay free for `limit_ms`: one
    /// pass over the free levels in time order (a level too low rules out every start
    /// whose window holds it).
    fn earliest(&self, now: UnixMs, need: i64, limit_ms: i64) -> Option<UnixMs> {
        let mut later: Vec<(UnixMs, i64)> = self
            .steps
            .iter()
            .filter(|(t, _)| *t > now)
            .copied()
            .collect();
        later.sort_unstable_by_key(|s| s.0);
        let base = self.free_now
            + self
                .steps
                .iter()
                .filter(|(t, _)| *t <= now)
                .map(|s| s.1)
                .sum::<i64>();
        let mut levels: Vec<(UnixMs, i64)> = vec![(now, base)];
        for (t, d) in later {
            match levels.last_mut() {
                Some(last) if last.0 == t => last.1 += d,
                Some(last) => {
                    let free = last.1 + d;
                    levels.push((t, free));
                }
                None => {}
            }
        }
        let mut i = 0;
        while i < levels.len() {
            if levels[i].1 < need {
                i += 1;
                continue;
            }
            let end = levels[i].0.saturating_add(limit_ms);
            let mut k = i + 1;
            while k < levels.len() && levels[k].0 < end && levels[k].1 >= need {
                k += 1;
            }
            if k >= levels.len() || levels[k].0 >= end {
                return Some(levels[i].0);
            }
            i = k + 1;
        }
        None
    }

    fn reserve(&mut self, from: UnixMs, limit_ms: i64, need: i64) {
        self.steps.push((from, -need));
        self.steps.push((from + limit_ms, need));
    }
}

impl Sim {
    /// A job's multifactor priority now.
    fn priority_of(&self, j: usize, t: UnixMs) -> u64 {
        let sj = &self.active[j];
        let age = ((t - sj.job.submit_ms).max(0) as f64 / MAX_AGE_MS as f64).min(1.0);
        let fairshare = match sj.job.account.as_str() {
            "llm-pretrain" => 0.5,
            "llm-finetune" => 0.6,
            "research" => 0.4,
            _ => 0.8,
        };
        let size = sj.nodes_needed as f64 / self.nodes.len().max(1) as f64;
        (WEIGHT_AGE * age
            + WEIGHT_FAIRSHARE * fairshare
            + WEIGHT_JOB_SIZE * size
            + WEIGHT_PARTITION
            + WEIGHT_QOS * sj.q.qos.factor())
        .round() as u64
    }

    /// One scheduling pass: pending jobs in priority order, each started now where it fits
    /// and delays no reservation of a job above it, else given its reason and estimate.
    pub(super) fn schedule(&mut self) {
        let t = self.t_ms;
        let mut order: Vec<(u64, u64, usize)> = Vec::new();
        for j in 0..self.active.len() {
            let pending = self.active[j].job.state == JobState::Pending;
            if !pending {
                continue;
            }
            let p = self.priority_of(j, t);
            let sj = &mut self.active[j];
            sj.q.priority = p;
            sj.q.est_start_ms = None;
            if sj.held {
                sj.q.reason = "JobHeldUser";
            } else if sj.eligible_ms > t {
                sj.q.reason = "BeginTime";
            } else {
                order.push((p, sj.job.id, j));
            }
        }
        let cycle_us = 20 + 12 * order.len().min(BACKFILL_DEPTH) as u64;
        let st = &mut self.sched_stats;
        st.cycles += 1;
        st.last_us = cycle_us;
        st.max_us = st.max_us.max(cycle_us);
        st.sum_us += cycle_us;
        st.last_depth = order.len().min(BACKFILL_DEPTH) as u64;
        st.last_queue = order.len() as u64;
        if order.is_empty() {
            return;
        }
        order.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut plan = Plan {
            free_now: self
                .nodes
                .iter()
                .filter(|n| n.state == NodeState::Idle && n.job.is_none())
                .count() as i64,
            steps: self
                .active
                .iter()
                .filter(|sj| sj.job.state == JobState::Running)
                .map(|sj| {
                    let start = sj.job.start_ms.unwrap_or(t);
                    // A run past its limit is about to end (Slurm would kill it).
                    (
                        (start + sj.q.time_limit_ms).max(t + MIN_MS),
                        sj.node_idx.len() as i64,
                    )
                })
                .collect(),
        };
        let mut nodes_of_user: std::collections::HashMap<(String, Qos), usize> = Default::default();
        for sj in self
            .active
            .iter()
            .filter(|sj| sj.job.state == JobState::Running)
        {
            *nodes_of_user
                .entry((sj.job.user.clone(), sj.q.qos))
                .or_default() += sj.nodes_needed;
        }
        let mut blocked = false;
        for (n_seen, &(_, id, j)) in order.iter().enumerate() {
            if let Some(dep) = self.active[j].q.after {
                if self.active.iter().any(|o| o.job.id == dep) {
                    self.active[j].q.reason = "Dependency";
                    continue;
                }
                self.active[j].q.after = None;
            }
            let sj = &self.active[j];
            let need = sj.nodes_needed;
            let key = (sj.job.user.clone(), sj.q.qos);
            if let Some(cap) = sj.q.qos.max_nodes_per_user() {
                if nodes_of_user.get(&key).copied().unwrap_or(0) + need > cap {
                    self.active[j].q.reason = "QOSMaxGRESPerUser";
                    continue;
                }
            }
            if n_seen >= BACKFILL_DEPTH {
                self.active[j].q.reason = "Priority";
                continue;
            }
            let limit = sj.q.time_limit_ms;
            let earliest = plan.earliest(t, need as i64, limit);
            if earliest == Some(t) {
                let excluded = &self.active[j].excluded;
                if let Some(picked) = self.pick_nodes(need, self.active[j].segment, excluded) {
                    plan.reserve(t, limit, need as i64);
                    *nodes_of_user.entry(key).or_default() += need;
                    debug_assert_eq!(self.active[j].job.id, id);
                    if blocked {
                        self.sched_stats.backfilled += 1;
                    }
                    self.start(j, picked);
                    continue;
                }
            }
            let sj = &mut self.active[j];
            sj.q.reason = if blocked { "Priority" } else { "Resources" };
            blocked = true;
            // Where the plan has room later, the job holds it (backfill's reservation);
            // a job that fits by count but not by place has no estimate.
            if let Some(e) = earliest.filter(|&e| e > t) {
                sj.q.est_start_ms = Some(e);
                plan.reserve(e, limit, need as i64);
            }
        }
    }

    /// Starts pending job `j` on `picked` now.
    fn start(&mut self, j: usize, picked: Vec<usize>) {
        let t = self.t_ms;
        let id = self.active[j].job.id;
        for &i in &picked {
            self.nodes[i].job = Some(id);
            self.nodes[i].state = NodeState::Allocated;
        }
        let names: Vec<String> = picked
            .iter()
            .map(|&i| self.inv.nodes[i].name.clone())
            .collect();
        let faulty = picked
            .iter()
            .find_map(|&i| self.nodes[i].fault.as_ref().map(|f| (i, f.gpu, f.onset_ms)));
        let fail_delay = (10 + self.rng.below(31) as i64) * MIN_MS;
        self.sched_stats.started += 1;
        let sj = &mut self.active[j];
        sj.job.state = JobState::Running;
        sj.job.start_ms = Some(t);
        sj.job.nodes = names;
        sj.node_idx = picked;
        sj.next_ckpt_ms = t + sj.ckpt_interval_ms;
        sj.q.reason = "None";
        sj.q.est_start_ms = None;
        self.ledger_run_started(j, t);
        let sj = &mut self.active[j];
        let ecc = faulty.map(|(i, gpu, onset)| PlannedFault {
            at_ms: onset.max(t) + fail_delay,
            fault: faults::Fault::Memory { xid: 48 },
            node: Some(i),
            gpu: Some(gpu),
        });
        self.events.push(SimEvent::JobStarted {
            job: sj.job.clone(),
        });
        let random = self.draw_fault(j, t);
        // Whichever strikes first.
        self.active[j].fault = match (ecc, random) {
            (Some(a), Some(b)) => Some(if b.at_ms < a.at_ms { b } else { a }),
            (a, b) => a.or(b),
        };
        self.draw_slowdowns(j, t);
    }

    /// Idle nodes for a job of `need` nodes, from the racks with the most free first; with
    /// a segment, whole segments each inside one rack (the NVL72 profile's block), as
    /// slurmctld places `--segment` jobs, or none.
    pub(super) fn pick_nodes(
        &self,
        need: usize,
        segment: Option<usize>,
        excluded: &[usize],
    ) -> Option<Vec<usize>> {
        let free: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].state == NodeState::Idle && self.nodes[i].job.is_none())
            .filter(|i| !excluded.contains(i))
            .collect();
        if free.len() < need {
            return None;
        }
        // Group free nodes by rack (= leaf switch, or block); fill from the fullest.
        let racks = self.inv.racks.len();
        let mut by_rack: Vec<Vec<usize>> = vec![Vec::new(); racks];
        for &i in &free {
            by_rack[self.nodes[i].rack].push(i);
        }
        let mut order: Vec<usize> = (0..racks).collect();
        order.sort_by_key(|&r| (std::cmp::Reverse(by_rack[r].len()), r));
        let group = segment.unwrap_or(1).max(1);
        let mut out = Vec::with_capacity(need);
        for r in order {
            let whole = by_rack[r].len() / group * group;
            for &i in &by_rack[r][..whole] {
                if out.len() == need {
                    break;
                }
                out.push(i);
            }
        }
        if out.len() < need {
            return None;
        }
        out.sort_unstable();
        Some(out)
    }

    /// Jobs that follow `id` (`afterok`) when it ended other than completed: Slurm cancels
    /// them (`--kill-on-invalid-dep=yes`).
    pub(super) fn cancel_dependents(&mut self, id: u64, state: JobState, t: UnixMs) {
        if state == JobState::Completed {
            return;
        }
        while let Some(j) = self
            .active
            .iter()
            .position(|sj| sj.q.after == Some(id) && sj.job.state == JobState::Pending)
        {
            let mut sj = self.active.remove(j);
            sj.job.state = JobState::Cancelled;
            sj.job.end_ms = Some(t);
            self.events.push(SimEvent::JobEnded {
                job: sj.job,
                detail: "DependencyNeverSatisfied".into(),
            });
        }
    }

    /// Counts a submission.
    pub(super) fn count_submitted(&mut self) {
        self.sched_stats.submitted += 1;
    }

    /// Its scheduler's health as `sdiag` would print it (one scheduler: its passes are
    /// both the main and the backfill cycles; no RPCs, no agents).
    pub fn sched_health(&self) -> app::queue::SchedHealth {
        let st = &self.sched_stats;
        let count = |s: JobState| self.active.iter().filter(|j| j.job.state == s).count() as u64;
        let cycles = app::queue::Cycles {
            last_us: Some(st.last_us),
            mean_us: Some(st.sum_us.checked_div(st.cycles).unwrap_or(0)),
            max_us: Some(st.max_us),
            count: Some(st.cycles),
            depth: Some(st.last_depth),
            queue: Some(st.last_queue),
        };
        app::queue::SchedHealth {
            at_ms: Some(self.t_ms),
            since_ms: Some(st.since_ms),
            server_threads: Some(1),
            agent_queue: Some(0),
            dbd_agent_queue: Some(0),
            jobs_submitted: Some(st.submitted),
            jobs_started: Some(st.started),
            jobs_pending: Some(count(JobState::Pending)),
            jobs_running: Some(count(JobState::Running)),
            main: cycles.clone(),
            backfill: cycles,
            backfilled_jobs: Some(st.backfilled),
            ..Default::default()
        }
    }

    /// Pending jobs as the simulator's scheduler holds them, for `/sim/truth`.
    pub(super) fn truth_pending(&self) -> Vec<TruthPending> {
        self.active
            .iter()
            .filter(|sj| sj.job.state == JobState::Pending)
            .map(|sj| TruthPending {
                job: sj.job.id,
                reason: sj.q.reason.to_string(),
                est_start_ms: sj.q.est_start_ms,
                priority: sj.q.priority,
                qos: sj.q.qos.name(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-29 16:00:00 UTC.
    const T0: i64 = 1_795_968_000_000;

    #[test]
    fn the_plan_finds_the_first_window_that_stays_free() {
        // 2 free now; 4 more at 10, 2 taken at 20..50 by a reservation.
        let mut p = Plan {
            free_now: 2,
            steps: vec![(10, 4)],
        };
        p.reserve(20, 30, 2);
        assert_eq!(p.earliest(0, 2, 100), Some(0));
        assert_eq!(p.earliest(0, 3, 5), Some(10), "fits between 10 and 20");
        assert_eq!(p.earliest(0, 5, 5), Some(10));
        assert_eq!(p.earliest(0, 5, 15), Some(50), "20..50 leaves only 4");
        assert_eq!(p.earliest(0, 7, 1), None, "never 7 free");
    }

    #[test]
    fn the_backlog_waits_for_each_of_slurms_common_reasons() {
        for (profile, seed) in [
            (super::super::Profile::Hgx, 1),
            (super::super::Profile::Hgx, 9),
            (super::super::Profile::Nvl72, 3),
        ] {
            let sim = Sim::with_profile(profile, 64, seed, "c", T0);
            let pending = sim.truth_pending();
            let reasons: std::collections::BTreeSet<&str> =
                pending.iter().map(|p| p.reason.as_str()).collect();
            for want in [
                "Resources",
                "Priority",
                "Dependency",
                "QOSMaxGRESPerUser",
                "JobHeldUser",
            ] {
                assert!(
                    reasons.contains(want),
                    "{profile:?} seed {seed}: no {want} in {pending:#?}"
                );
            }
            for p in &pending {
                assert!(
                    crate::scheduler::pending::kind_of(&p.reason).is_some(),
                    "{p:?}"
                );
                assert!(p.est_start_ms.is_none_or(|e| e > T0), "{p:?}");
            }
            let head = pending
                .iter()
                .find(|p| p.reason == "Resources")
                .expect("a head");
            assert!(
                head.est_start_ms.is_some(),
                "the head has backfill's estimate: {head:?}"
            );
            // Slurm's view of them says the same.
            let jobs = sim.slurm_jobs();
            for p in &pending {
                let j = jobs.iter().find(|j| j.job.id == p.job).expect("listed");
                assert_eq!(j.state_reason.as_deref(), Some(p.reason.as_str()));
                assert_eq!(j.queue.est_start_ms, p.est_start_ms);
            }
        }
    }
}
