//! Lemon nodes: a score per node from the trouble it had (jobs it took down, hardware
//! XIDs, counter steps, outages and time out of service), a ranking with the evidence,
//! and the mark for RMA or deep diagnostics, which follows the score over the trailing
//! [`LEMON_WINDOW_DAYS`] with hysteresis. Pure.

use std::collections::{BTreeMap, HashMap};

use app::model::{Inventory, UnixMs};
use app::reliability::{
    Interruption, Lemon, LemonWeights, LEMON_RMA_AT, LEMON_RMA_CLEAR, LEMON_WINDOW_DAYS,
};

use super::{rules, History};

const DAY_MS: i64 = 86_400_000;
/// How far before a period the lemons' trailing window reaches.
pub const WINDOW_MS: i64 = LEMON_WINDOW_DAYS * DAY_MS;

/// Out-of-service spans per node (drained, draining, down, not responding), each from
/// when it went out to when it came back (`None`: still out), from the node events
/// (ordered by node, then time).
pub fn spans(h: &History) -> BTreeMap<&str, Vec<(UnixMs, Option<UnixMs>)>> {
    let mut out: BTreeMap<&str, Vec<(UnixMs, Option<UnixMs>)>> = BTreeMap::new();
    let mut since: Option<(&str, UnixMs)> = None;
    for e in &h.node_events {
        if let Some((n, s)) = since {
            if n != e.node {
                out.entry(n).or_default().push((s, None));
                since = None;
            }
        }
        let out_now = e.state.is_unavailable() || e.state == app::model::NodeState::Draining;
        match (since, out_now) {
            (None, true) => since = Some((e.node.as_str(), e.at_ms)),
            (Some((n, s)), false) => {
                out.entry(n).or_default().push((s, Some(e.at_ms)));
                since = None;
            }
            _ => {}
        }
    }
    if let Some((n, s)) = since {
        out.entry(n).or_default().push((s, None));
    }
    out
}

/// One node's trouble as points in time, and its out-of-service spans.
#[derive(Default)]
struct Trouble {
    /// Interruptions with a hardware cause the evidence put on it.
    jobs: Vec<UnixMs>,
    /// Hardware-class XIDs, with the code.
    xids: Vec<(UnixMs, u32)>,
    /// Counter steps, with their kind.
    steps: Vec<(UnixMs, String)>,
    spans: Vec<(UnixMs, Option<UnixMs>)>,
}

/// What the node did in `[a, b)`: (jobs, xids, steps, outages begun, hours out).
fn counts(t: &Trouble, a: UnixMs, b: UnixMs) -> (u32, u32, u32, u32, f64) {
    let inside = |x: UnixMs| x >= a && x < b;
    let jobs = t.jobs.iter().filter(|x| inside(**x)).count() as u32;
    let xids = t.xids.iter().filter(|(x, _)| inside(*x)).count() as u32;
    let steps = t.steps.iter().filter(|(x, _)| inside(*x)).count() as u32;
    let outages = t.spans.iter().filter(|(s, _)| inside(*s)).count() as u32;
    let hours = t
        .spans
        .iter()
        .map(|&(s, e)| (e.unwrap_or(b).min(b) - s.max(a)).max(0) as f64 / 3_600_000.0)
        .sum();
    (jobs, xids, steps, outages, hours)
}

fn score((jobs, xids, steps, outages, hours): (u32, u32, u32, u32, f64)) -> f64 {
    f64::from(jobs) * LemonWeights::JOB_TAKEN_DOWN
        + f64::from(xids) * LemonWeights::HARDWARE_XID
        + f64::from(steps) * LemonWeights::COUNTER_STEP
        + f64::from(outages) * LemonWeights::OUTAGE
        + hours / 24.0 * LemonWeights::DAY_OUT
}

/// Whether the mark is on at `end`: walking day by day from `from_ms`, it is set when the
/// trailing window's score reaches [`LEMON_RMA_AT`] and cleared when it falls below
/// [`LEMON_RMA_CLEAR`].
fn marked(t: &Trouble, from_ms: UnixMs, end: UnixMs) -> (bool, f64) {
    let mut on = false;
    let mut at = from_ms;
    loop {
        let at_now = at.min(end);
        let last = score(counts(t, at_now - WINDOW_MS, at_now));
        if !on && last >= LEMON_RMA_AT {
            on = true;
        } else if on && last < LEMON_RMA_CLEAR {
            on = false;
        }
        if at_now >= end {
            return (on, last);
        }
        at += DAY_MS;
    }
}

/// Every node with trouble in `[from_ms, to_ms)` or marked at its end, highest score first. `all` is the list of
/// interruptions from [`WINDOW_MS`] before `from_ms` (so the mark sees the trailing window
/// at the period's start); the history holds the XIDs and steps as far back.
pub fn rank(
    h: &History,
    inv: &Inventory,
    all: &[Interruption],
    from_ms: UnixMs,
    to_ms: UnixMs,
    now_ms: UnixMs,
) -> Vec<Lemon> {
    let end = to_ms.min(now_ms).max(from_ms);
    let mut by_node: BTreeMap<&str, Trouble> = BTreeMap::new();
    for i in all.iter().filter(|i| i.cause.is_hardware()) {
        if let Some(n) = i.node.as_deref() {
            by_node.entry(n).or_default().jobs.push(i.at_ms);
        }
    }
    for x in &h.xids {
        if rules::xid_cause(x.xid).is_some_and(|c| c.is_hardware()) {
            by_node
                .entry(x.node.as_str())
                .or_default()
                .xids
                .push((x.at_ms, x.xid));
        }
    }
    for s in &h.steps {
        by_node
            .entry(s.node.as_str())
            .or_default()
            .steps
            .push((s.at_ms, s.kind.clone()));
    }
    for (n, v) in spans(h) {
        by_node.entry(n).or_default().spans = v;
    }
    let racks: HashMap<&str, &str> = inv
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.rack.as_str()))
        .collect();
    let mut out: Vec<Lemon> = by_node
        .into_iter()
        .filter_map(|(node, t)| {
            let c = counts(&t, from_ms, end);
            let s = score(c);
            let (rma, recent_score) = marked(&t, from_ms, end);
            if s <= 0.0 && !rma {
                return None;
            }
            let (jobs, xids, steps, outages, hours) = c;
            Some(Lemon {
                node: node.to_string(),
                rack: racks.get(node).map(|r| r.to_string()),
                score: s,
                jobs_taken_down: jobs,
                hardware_xids: xids,
                counter_steps: steps,
                outages,
                out_of_service_hours: hours,
                rma,
                recent_score,
                evidence: words(&t, c, from_ms, end),
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.node.cmp(&b.node))
    });
    out
}

/// "7 jobs taken down; XID 48 x7; 2 ECC DBE steps; 1 outage, 3.5 h out of service".
fn words(
    t: &Trouble,
    (jobs, _, _, outages, hours): (u32, u32, u32, u32, f64),
    a: UnixMs,
    b: UnixMs,
) -> String {
    let plural = |n: u32, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut parts = Vec::new();
    if jobs > 0 {
        parts.push(plural(jobs, "job taken down", "jobs taken down"));
    }
    let mut codes: BTreeMap<u32, u32> = BTreeMap::new();
    for (_, x) in t.xids.iter().filter(|(x, _)| *x >= a && *x < b) {
        *codes.entry(*x).or_default() += 1;
    }
    if !codes.is_empty() {
        parts.push(
            codes
                .iter()
                .map(|(x, n)| format!("XID {x} x{n}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    let mut kinds: BTreeMap<&str, u32> = BTreeMap::new();
    for (_, k) in t.steps.iter().filter(|(x, _)| *x >= a && *x < b) {
        *kinds.entry(k.as_str()).or_default() += 1;
    }
    for (k, n) in kinds {
        parts.push(format!("{} x{n}", super::evidence_label(k)));
    }
    if outages > 0 || hours > 0.0 {
        parts.push(format!(
            "{}, {hours:.1} h out of service",
            plural(outages, "outage", "outages")
        ));
    }
    parts.join("; ")
}
