//! One job's badput ledger: what each of its allocated GPU-seconds did, decided tick by
//! tick from the readings and corrected when later facts arrive (a checkpoint seen after
//! its save, a hang confirmed after its hold, an interruption that throws away the work
//! since the last checkpoint). Pure: the accumulator feeds it.
//!
//! Definitions, exactly as computed (each allocated GPU-second is one of them):
//! - *unseen* ("other"): an allocated GPU with no SM activity reading;
//! - *start-up*: from the run's start until the first tick at which at least half of the
//!   job's read GPUs are busy (SM activity at least `idle_below_sm`);
//! - *hung*: a job of two or more nodes whose GPUs all read busy (utilisation) with flat
//!   power and no InfiniBand traffic, held for `hang_ms` (the radar's hang rule); counted
//!   from where the hold began;
//! - *blocking checkpoint save*: idle GPUs at a tick inside a save of the job
//!   (`[started, started + duration)` of a checkpoint record, complete or not);
//! - *computing*: busy GPUs otherwise; of it, *throttling* is the clock deficit of the
//!   throttled ones, *re-execution* the progress made since the end of the job's last
//!   complete checkpoint (or its run's start) that an interruption threw away, and
//!   *productive* the rest;
//! - *idle allocated*: what is left of the allocation.
//!
//! Outside the allocation, *restart wait* is the job's GPUs times the time from an
//! interruption until it runs again. ETTR = productive / (allocated + restart wait).

use std::collections::VecDeque;

use app::model::UnixMs;

use crate::aggregate::hang::HangHold;
use crate::store::ReportSums;

/// How long ticks are kept to be re-read when a checkpoint's record arrives after its save.
pub const RING_MS: i64 = 20 * 60_000;

/// What one tick measured of a job (GPU-seconds over the tick).
#[derive(Clone, Copy, Debug, Default)]
pub struct JobTick {
    pub allocated_gs: f64,
    pub busy_gs: f64,
    /// Clock deficit of the busy throttled GPUs.
    pub deficit_gs: f64,
    pub unseen_gs: f64,
    /// The job's mean GPU power when it looks hung at this instant (see
    /// [`crate::aggregate::hang::hang_signal`]).
    pub hang_power: Option<f64>,
}

#[derive(Clone, Copy, Debug)]
struct PastTick {
    at_ms: UnixMs,
    /// Idle GPU-seconds not yet put to a save.
    idle_gs: f64,
    productive_gs: f64,
}

/// A hang's hold and what was booked while it held, to move to *hung* once confirmed.
#[derive(Clone, Copy, Debug)]
struct Hold {
    hold: HangHold,
    booked: ReportSums,
    /// Idle GPU-seconds while it held (no bucket of their own until confirmed).
    idle_gs: f64,
    confirmed: bool,
}

#[derive(Debug)]
pub struct JobLedger {
    started: bool,
    saves: Vec<(UnixMs, UnixMs)>,
    /// End of the last complete checkpoint's save.
    checkpoint_end_ms: UnixMs,
    /// Productive GPU-seconds since then (what an interruption now would throw away).
    since_gs: f64,
    ring: VecDeque<PastTick>,
    hang: Option<Hold>,
    /// Interrupted at this time and not yet running again.
    pub waiting_since: Option<UnixMs>,
}

impl Default for JobLedger {
    fn default() -> Self {
        JobLedger::new()
    }
}

impl JobLedger {
    pub fn new() -> JobLedger {
        JobLedger {
            started: false,
            saves: Vec::new(),
            checkpoint_end_ms: UnixMs::MIN,
            since_gs: 0.0,
            ring: VecDeque::new(),
            hang: None,
            waiting_since: None,
        }
    }

    /// A run begins at `start_ms` (after an interruption at `waiting_since`, if any):
    /// returns the restart wait to book.
    pub fn run_started(&mut self, start_ms: UnixMs, gpus: u32) -> ReportSums {
        self.started = false;
        self.since_gs = 0.0;
        self.hang = None;
        self.ring.clear();
        let wait = self.waiting_since.take().map_or(0.0, |w| {
            f64::from(gpus) * ((start_ms - w).max(0) as f64 / 1000.0)
        });
        ReportSums {
            restart_wait_gs: wait,
            ..ReportSums::default()
        }
    }

    /// Books one tick at `at_ms`; returns what to add.
    pub fn tick(&mut self, at_ms: UnixMs, t: &JobTick, hang_ms: i64) -> ReportSums {
        let mut out = ReportSums {
            unseen_gs: t.unseen_gs,
            ..ReportSums::default()
        };
        let seen = (t.allocated_gs - t.unseen_gs).max(0.0);
        let busy = t.busy_gs.min(seen);
        if !self.started {
            if seen > 0.0 && busy >= 0.5 * seen {
                self.started = true;
            } else {
                out.startup_gs = seen;
                return out;
            }
        }
        // The hang rule's hold, and the move of what it held to hung once it is confirmed.
        match (t.hang_power, &mut self.hang) {
            (None, _) => self.hang = None,
            (Some(p), Some(h)) => {
                let since = h.hold.since;
                h.hold.observe(at_ms, p);
                if h.hold.since != since {
                    h.booked = ReportSums::default();
                    h.idle_gs = 0.0;
                }
            }
            (Some(p), None) => {
                self.hang = Some(Hold {
                    hold: HangHold::new(at_ms, p),
                    booked: ReportSums::default(),
                    idle_gs: 0.0,
                    confirmed: false,
                })
            }
        }
        if let Some(h) = &mut self.hang {
            if h.confirmed {
                out.hung_gs = seen;
                return out;
            }
            if at_ms - h.hold.since >= hang_ms {
                h.confirmed = true;
                let b = h.booked;
                out.hung_gs = seen + b.checkpoint_gs + b.computing_gs + h.idle_gs;
                out.checkpoint_gs = -b.checkpoint_gs;
                out.computing_gs = -b.computing_gs;
                out.slowed_gs = -b.slowed_gs;
                self.since_gs -= b.computing_gs - b.slowed_gs;
                // Those ticks are no save's idle and no progress now.
                for r in self.ring.iter_mut().filter(|r| r.at_ms >= h.hold.since) {
                    r.idle_gs = 0.0;
                    r.productive_gs = 0.0;
                }
                return out;
            }
        }
        let idle = seen - busy;
        let deficit = t.deficit_gs.min(busy);
        let saving = self.saves.iter().any(|&(s, e)| at_ms >= s && at_ms < e);
        let mut booked = ReportSums {
            computing_gs: busy,
            slowed_gs: deficit,
            ..ReportSums::default()
        };
        let mut left_idle = idle;
        if saving {
            booked.checkpoint_gs = idle;
            left_idle = 0.0;
        }
        let productive = busy - deficit;
        // A tick stands for the time before it: after the save only if it ends later.
        if at_ms > self.checkpoint_end_ms {
            self.since_gs += productive;
        }
        if let Some(h) = &mut self.hang {
            h.booked.add(&booked);
            h.idle_gs += left_idle;
        }
        self.ring.push_back(PastTick {
            at_ms,
            idle_gs: left_idle,
            productive_gs: productive,
        });
        while self.ring.front().is_some_and(|r| r.at_ms < at_ms - RING_MS) {
            self.ring.pop_front();
        }
        out.add(&booked);
        out
    }

    /// A save of this job ran over `[start_ms, end_ms)`: the idle of the ticks already
    /// seen inside it was the save's; a complete one is the point an interruption now
    /// goes back to. Returns what to add.
    pub fn checkpoint(&mut self, start_ms: UnixMs, end_ms: UnixMs, complete: bool) -> ReportSums {
        let mut out = ReportSums::default();
        for r in self
            .ring
            .iter_mut()
            .filter(|r| r.at_ms >= start_ms && r.at_ms < end_ms)
        {
            out.checkpoint_gs += r.idle_gs;
            r.idle_gs = 0.0;
        }
        if let Some(h) = &mut self.hang {
            h.booked.checkpoint_gs += out.checkpoint_gs;
            h.idle_gs -= out.checkpoint_gs;
        }
        self.saves.push((start_ms, end_ms));
        // Saves that ended before the ring began can change nothing any more.
        let oldest = self.ring.front().map_or(end_ms, |r| r.at_ms);
        self.saves.retain(|&(_, e)| e >= oldest.min(end_ms));
        if complete && end_ms > self.checkpoint_end_ms {
            self.checkpoint_end_ms = end_ms;
            self.since_gs = self
                .ring
                .iter()
                .filter(|r| r.at_ms > end_ms)
                .map(|r| r.productive_gs)
                .sum();
        }
        out
    }

    /// The run was interrupted at `at_ms`: the progress since the last complete checkpoint
    /// is re-executed. Returns what to add.
    pub fn interrupted(&mut self, at_ms: UnixMs) -> ReportSums {
        let lost = self.since_gs.max(0.0);
        self.since_gs = 0.0;
        self.started = false;
        self.hang = None;
        self.waiting_since = Some(at_ms);
        ReportSums {
            reexec_gs: lost,
            ..ReportSums::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HANG: i64 = 600_000;

    fn busy(gpus: f64) -> JobTick {
        JobTick {
            allocated_gs: 8.0 * 10.0,
            busy_gs: gpus * 10.0,
            ..JobTick::default()
        }
    }

    fn run(l: &mut JobLedger, from: UnixMs, to: UnixMs, t: JobTick) -> ReportSums {
        let mut s = ReportSums::default();
        let mut at = from;
        while at < to {
            at += 10_000;
            s.add(&l.tick(at, &t, HANG));
        }
        s
    }

    /// Every bucket plus the idle remainder gives the allocation back.
    fn idle(s: &ReportSums, allocated: f64) -> f64 {
        allocated - s.startup_gs - s.unseen_gs - s.checkpoint_gs - s.hung_gs - s.computing_gs
    }

    #[test]
    fn start_up_lasts_until_half_the_gpus_turn_busy() {
        let mut l = JobLedger::new();
        l.run_started(0, 8);
        let s = run(&mut l, 0, 60_000, busy(3.0));
        assert_eq!(s.startup_gs, 8.0 * 60.0);
        let s = run(&mut l, 60_000, 120_000, busy(4.0));
        assert_eq!(s.startup_gs, 0.0);
        assert_eq!(s.computing_gs, 4.0 * 60.0);
        // Once started, a dip is idle, not start-up.
        let s = run(&mut l, 120_000, 130_000, busy(0.0));
        assert_eq!((s.startup_gs, idle(&s, 80.0)), (0.0, 80.0));
    }

    #[test]
    fn a_save_seen_late_takes_its_idle_ticks_and_moves_the_restart_point() {
        let mut l = JobLedger::new();
        l.run_started(0, 8);
        let mut s = run(&mut l, 0, 600_000, busy(8.0));
        // A 30 s save: three idle ticks (the last ends at 630 s, inside [600, 640)).
        s.add(&run(&mut l, 600_000, 630_000, busy(0.0)));
        s.add(&run(&mut l, 630_000, 700_000, busy(8.0)));
        assert_eq!(s.checkpoint_gs, 0.0);
        let late = l.checkpoint(600_000, 640_000, true);
        assert_eq!(late.checkpoint_gs, 3.0 * 80.0);
        // Another record of the same save changes nothing.
        assert_eq!(l.checkpoint(600_000, 640_000, true).checkpoint_gs, 0.0);
        // An interruption re-executes only what came after the save's end: 640..700 s.
        let lost = l.interrupted(700_000);
        assert_eq!(lost.reexec_gs, 6.0 * 80.0);
        // The next run books the wait, and starts over.
        let w = l.run_started(760_000, 8);
        assert_eq!(w.restart_wait_gs, 8.0 * 60.0);
        assert_eq!(run(&mut l, 760_000, 770_000, busy(0.0)).startup_gs, 80.0);
    }

    #[test]
    fn a_save_known_in_advance_books_its_idle_as_it_goes_and_a_busy_save_is_not_blocking() {
        let mut l = JobLedger::new();
        l.run_started(0, 8);
        run(&mut l, 0, 100_000, busy(8.0));
        l.checkpoint(100_000, 150_000, true);
        let s = run(&mut l, 100_000, 150_000, busy(2.0));
        // Ticks at 110..140 s fall inside [100, 150) s.
        assert_eq!(s.checkpoint_gs, 4.0 * 60.0);
        assert_eq!(s.computing_gs, 2.0 * 50.0);
        // The busy GPUs during the save are not progress kept by it.
        assert_eq!(l.interrupted(150_000).reexec_gs, 0.0);
    }

    #[test]
    fn a_hang_is_counted_from_where_its_hold_began_once_confirmed() {
        let mut l = JobLedger::new();
        l.run_started(0, 8);
        let mut s = run(&mut l, 0, 300_000, busy(8.0));
        let kept = s.computing_gs;
        let hung = JobTick {
            allocated_gs: 80.0,
            busy_gs: 0.0,
            hang_power: Some(180.0),
            ..JobTick::default()
        };
        // Not yet ten minutes: idle so far.
        s.add(&run(&mut l, 300_000, 890_000, hung));
        assert_eq!(s.hung_gs, 0.0);
        s.add(&run(&mut l, 890_000, 1_200_000, hung));
        assert_eq!(s.hung_gs, 80.0 * 90.0);
        assert_eq!(s.computing_gs, kept);
        assert_eq!(idle(&s, 80.0 * 120.0), 0.0);
        // The hang threw away the progress before it, not the hung time.
        assert_eq!(l.interrupted(1_200_000).reexec_gs, kept);
    }

    #[test]
    fn a_power_swing_restarts_the_hold_and_throttling_is_not_progress() {
        let mut l = JobLedger::new();
        l.run_started(0, 8);
        let t = |p: f64| JobTick {
            allocated_gs: 80.0,
            busy_gs: 80.0,
            deficit_gs: 8.0,
            hang_power: Some(p),
            ..JobTick::default()
        };
        let mut s = run(&mut l, 0, 500_000, t(300.0));
        s.add(&run(&mut l, 500_000, 1_000_000, t(400.0)));
        assert_eq!(s.hung_gs, 0.0);
        assert_eq!(s.slowed_gs, 8.0 * 100.0);
        assert_eq!(l.interrupted(1_000_000).reexec_gs, 72.0 * 100.0);
    }
}
