//! When an alert opens, stays open, resolves and reopens. Pure: the conditions true at one
//! evaluation in, the store's steps out; times are source time (the rules' clock).
//!
//! - A condition not seen while its inputs are missing ([`super::rules::has_data`]) is
//!   unknown: the alert stays open, marked "no data", and its count of clear evaluations
//!   starts again.
//! - An alert resolves after its condition was clear, with data, for
//!   `resolve_after_evaluations` evaluations in a row and, if critical, for at least
//!   `critical_clear_ms`.
//! - A condition back within `reopen_within_ms` of its resolution reopens the same alert
//!   (one more flap), not a new one. Resolutions are remembered in memory: after a restart
//!   or a change of leader, a condition back is a new alert.
//! - An open alert's summary follows its condition (the jobs it hits, the reading now), as
//!   Prometheus re-renders annotations: rewritten when it changed, at most once per
//!   [`SUMMARY_EVERY_MS`] for one alert, so a reading in the words costs no write per tick.

use std::collections::HashMap;

use app::model::UnixMs;

use super::rules::{AlertConfig, Condition};

/// The least time between two rewrites of one open alert's summary (source time).
pub const SUMMARY_EVERY_MS: UnixMs = 10_000;

/// A rule and a subject.
pub type Key = (String, String);

/// What the task records in the store, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// A new alert.
    Fire(Condition),
    /// A resolved alert whose condition came back within the hold.
    Reopen {
        id: i64,
        cond: Condition,
    },
    Resolve {
        id: i64,
        key: Key,
    },
    /// An open alert's condition became unknown (`true`) or known again (`false`).
    NoData {
        id: i64,
        missing: bool,
    },
    /// An open alert's condition now reads differently.
    Summary {
        id: i64,
        summary: String,
    },
}

#[derive(Debug)]
struct Open {
    id: i64,
    critical: bool,
    /// Clear evaluations in a row, and the first one's time.
    clear: u32,
    clear_since: Option<UnixMs>,
    no_data: bool,
    /// Found open at start (another process fired it): kept while the task settles.
    inherited: bool,
    /// The summary recorded, and when it was (source time; 0 if adopted).
    summary: String,
    summary_ms: UnixMs,
}

/// The open alerts and the recently resolved ones.
#[derive(Debug, Default)]
pub struct Lifecycle {
    open: HashMap<Key, Open>,
    /// Resolved within the hold: id, and when (source time).
    resolved: HashMap<Key, (i64, UnixMs)>,
}

impl Lifecycle {
    /// An alert the store has open at start.
    pub fn adopt(&mut self, a: &app::views::AlertItem) {
        self.open.insert(
            (a.rule.clone(), a.subject.clone()),
            Open {
                id: a.id,
                critical: a.severity == "critical",
                clear: 0,
                clear_since: None,
                no_data: a.no_data_since_ms.is_some(),
                inherited: true,
                summary: a.summary.clone(),
                summary_ms: 0,
            },
        );
    }

    /// `c` is recorded at `now`, as alert `id` (after [`Step::Fire`] or [`Step::Reopen`]).
    pub fn opened(&mut self, c: &Condition, id: i64, now: UnixMs) {
        self.open.insert(
            (c.rule.to_string(), c.subject.clone()),
            Open {
                id,
                critical: c.severity == "critical",
                clear: 0,
                clear_since: None,
                no_data: false,
                inherited: false,
                summary: c.summary.clone(),
                summary_ms: now,
            },
        );
    }

    /// The open alerts' keys.
    pub fn open_keys(&self) -> impl Iterator<Item = &Key> {
        self.open.keys()
    }

    /// One evaluation at `now`: `conds` true, `has_data(rule, subject)` telling whether a
    /// condition not among them is known to be clear. While `settling`, alerts found open
    /// at start are kept whatever they show.
    pub fn step(
        &mut self,
        cfg: &AlertConfig,
        now: UnixMs,
        conds: Vec<Condition>,
        settling: bool,
        has_data: impl Fn(&str, &str) -> bool,
    ) -> Vec<Step> {
        let mut steps = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for c in conds {
            let key = (c.rule.to_string(), c.subject.clone());
            if let Some(o) = self.open.get_mut(&key) {
                o.clear = 0;
                o.clear_since = None;
                if o.no_data {
                    o.no_data = false;
                    steps.push(Step::NoData {
                        id: o.id,
                        missing: false,
                    });
                }
                if o.summary != c.summary && now - o.summary_ms >= SUMMARY_EVERY_MS {
                    o.summary.clone_from(&c.summary);
                    o.summary_ms = now;
                    steps.push(Step::Summary {
                        id: o.id,
                        summary: c.summary,
                    });
                }
                seen.insert(key);
                continue;
            }
            match self.resolved.remove(&key) {
                Some((id, at)) if now - at <= cfg.reopen_within_ms => {
                    steps.push(Step::Reopen { id, cond: c })
                }
                _ => steps.push(Step::Fire(c)),
            }
            seen.insert(key);
        }
        let mut gone = Vec::new();
        for (key, o) in self.open.iter_mut() {
            if seen.contains(key) || (settling && o.inherited) {
                continue;
            }
            if !has_data(&key.0, &key.1) {
                o.clear = 0;
                o.clear_since = None;
                if !o.no_data {
                    o.no_data = true;
                    steps.push(Step::NoData {
                        id: o.id,
                        missing: true,
                    });
                }
                continue;
            }
            if o.no_data {
                o.no_data = false;
                steps.push(Step::NoData {
                    id: o.id,
                    missing: false,
                });
            }
            o.clear += 1;
            let since = *o.clear_since.get_or_insert(now);
            if o.clear >= cfg.resolve_after_evaluations
                && (!o.critical || now - since >= cfg.critical_clear_ms)
            {
                gone.push(key.clone());
            }
        }
        gone.sort();
        for key in gone {
            if let Some(o) = self.open.remove(&key) {
                steps.push(Step::Resolve {
                    id: o.id,
                    key: key.clone(),
                });
                self.resolved.insert(key, (o.id, now));
            }
        }
        self.resolved
            .retain(|_, (_, at)| now - *at <= cfg.reopen_within_ms);
        steps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(rule: &'static str, subject: &str, severity: &'static str) -> Condition {
        Condition {
            rule,
            subject: subject.to_string(),
            severity,
            summary: format!("{rule} on {subject}"),
            link: String::new(),
            drain_node: None,
        }
    }

    /// Runs `life` through evaluations a second apart from `t`, recording what is fired
    /// and reopened under fresh ids; the steps of each.
    struct Run {
        life: Lifecycle,
        cfg: AlertConfig,
        t: UnixMs,
        next_id: i64,
    }

    impl Run {
        fn new() -> Run {
            Run {
                life: Lifecycle::default(),
                cfg: AlertConfig::default(),
                t: 1_000_000,
                next_id: 1,
            }
        }

        fn eval(&mut self, conds: Vec<Condition>, data: bool) -> Vec<Step> {
            self.t += 1_000;
            let steps = self.life.step(&self.cfg, self.t, conds, false, |_, _| data);
            for s in &steps {
                match s {
                    Step::Fire(c) => {
                        self.life.opened(c, self.next_id, self.t);
                        self.next_id += 1;
                    }
                    Step::Reopen { id, cond } => self.life.opened(cond, *id, self.t),
                    _ => {}
                }
            }
            steps
        }
    }

    #[test]
    fn a_missing_reading_never_resolves() {
        let mut run = Run::new();
        let leak = cond("coolant_leak", "rack:B02", "critical");
        assert_eq!(
            run.eval(vec![leak.clone()], true),
            [Step::Fire(leak.clone())]
        );
        // Ten evaluations without the rack's readings: open, marked once.
        let mut steps = Vec::new();
        for _ in 0..10 {
            steps.extend(run.eval(vec![], false));
        }
        assert_eq!(
            steps,
            [Step::NoData {
                id: 1,
                missing: true
            }]
        );
        // The reading is back and the leak with it: the same alert, unmarked.
        assert_eq!(
            run.eval(vec![leak.clone()], true),
            [Step::NoData {
                id: 1,
                missing: false
            }]
        );
        assert_eq!(run.eval(vec![leak], true), []);
    }

    #[test]
    fn resolves_after_consecutive_clear_evaluations_and_a_minute_if_critical() {
        let mut run = Run::new();
        let warn = cond("rack_power_high", "rack:B02", "warning");
        let crit = cond("ecc_double_bit", "node:gpu038", "critical");
        run.eval(vec![warn.clone(), crit.clone()], true);
        // Clear twice, then seen again: the count starts over.
        assert!(run.eval(vec![crit.clone()], true).is_empty());
        assert!(run.eval(vec![crit.clone()], true).is_empty());
        assert!(run.eval(vec![warn.clone(), crit.clone()], true).is_empty());
        // Clear, with a missing reading in between: the count starts over too.
        assert!(run.eval(vec![crit.clone()], true).is_empty());
        run.eval(vec![crit.clone()], false);
        assert_eq!(
            run.eval(vec![crit.clone()], true),
            [Step::NoData {
                id: 1,
                missing: false
            }]
        );
        assert!(run.eval(vec![crit.clone()], true).is_empty());
        // The third clear evaluation in a row resolves the warning.
        let steps = run.eval(vec![crit.clone()], true);
        assert_eq!(
            steps,
            [Step::Resolve {
                id: 1,
                key: ("rack_power_high".into(), "rack:B02".into())
            }]
        );
        // The critical one: three clear evaluations are not enough within a minute.
        let mut resolved_after = None;
        for i in 1..=70 {
            let steps = run.eval(vec![], true);
            if !steps.is_empty() {
                assert_eq!(
                    steps,
                    [Step::Resolve {
                        id: 2,
                        key: ("ecc_double_bit".into(), "node:gpu038".into())
                    }]
                );
                resolved_after = Some(i);
                break;
            }
        }
        // Clear at the first evaluation (t), resolved when t + 60 s is reached.
        assert_eq!(resolved_after, Some(61));
    }

    #[test]
    fn back_within_the_hold_reopens_the_same_alert() {
        let mut run = Run::new();
        run.cfg.reopen_within_ms = 30_000;
        let xid = cond("xid", "node:gpu007", "warning");
        run.eval(vec![xid.clone()], true);
        for _ in 0..3 {
            run.eval(vec![], true);
        }
        // Back 10 s after its resolution: the same row.
        for _ in 0..9 {
            assert!(run.eval(vec![], true).is_empty());
        }
        assert_eq!(
            run.eval(vec![xid.clone()], true),
            [Step::Reopen {
                id: 1,
                cond: xid.clone()
            }]
        );
        // Resolved again, back after the hold: a new alert.
        for _ in 0..3 {
            run.eval(vec![], true);
        }
        for _ in 0..31 {
            assert!(run.eval(vec![], true).is_empty());
        }
        assert_eq!(run.eval(vec![xid.clone()], true), [Step::Fire(xid)]);
    }

    #[test]
    fn an_open_alerts_summary_follows_its_condition_at_most_every_ten_seconds() {
        let mut run = Run::new();
        let mut link = cond("nvlink_links_down", "rack:R1", "warning");
        link.summary = "rack R1: 1 link down; no running job on them".into();
        run.eval(vec![link.clone()], true);
        // Unchanged: nothing to write.
        assert_eq!(run.eval(vec![link.clone()], true), []);
        // A job starts on the cut tray 2 s after the alert opened: written once 10 s on.
        link.summary = "rack R1: 1 link down; running jobs: 7".into();
        let mut written = Vec::new();
        for i in 2..=12 {
            for s in run.eval(vec![link.clone()], true) {
                written.push((i, s));
            }
        }
        assert_eq!(
            written,
            [(
                10,
                Step::Summary {
                    id: 1,
                    summary: link.summary.clone()
                }
            )]
        );
        // Reopened within the hold: the new words go with the reopening.
        for _ in 0..3 {
            run.eval(vec![], true);
        }
        link.summary = "rack R1: 2 links down; no running job on them".into();
        assert_eq!(
            run.eval(vec![link.clone()], true),
            [Step::Reopen { id: 1, cond: link }]
        );
    }

    #[test]
    fn alerts_found_open_are_kept_while_settling() {
        let mut life = Lifecycle::default();
        let cfg = AlertConfig {
            resolve_after_evaluations: 1,
            ..AlertConfig::default()
        };
        life.adopt(&app::views::AlertItem {
            id: 9,
            rule: "target_down".into(),
            subject: "target:http://x".into(),
            severity: "warning".into(),
            ..Default::default()
        });
        for t in 0..5 {
            assert!(life.step(&cfg, t, Vec::new(), true, |_, _| true).is_empty());
        }
        assert_eq!(
            life.step(&cfg, 5, Vec::new(), false, |_, _| true),
            [Step::Resolve {
                id: 9,
                key: ("target_down".into(), "target:http://x".into())
            }]
        );
    }
}
