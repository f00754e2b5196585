//! slurmctld itself, from its diagnostics (`sdiag`): a backfill cycle that takes too long,
//! and an agent queue that stays long.

use super::{Condition, RuleState, Tick};

const SUBJECT: &str = "scheduler:slurmctld";

/// The backfill scheduler's last cycle over `backfill_cycle_seconds` (a warning): past
/// Slurm's `bf_max_time` it stops short of the queue, and jobs that could run wait.
pub(super) fn backfill_slow(t: &Tick<'_>, _: &mut RuleState, out: &mut Vec<Condition>) {
    let Some(h) = t.f.health else { return };
    let Some(last) = h.backfill.last_us else {
        return;
    };
    let limit_us = t.cfg.backfill_cycle_seconds * 1e6;
    if last as f64 > limit_us {
        out.push(Condition {
            rule: "backfill_slow",
            subject: SUBJECT.into(),
            severity: "warning",
            summary: format!(
                "slurmctld's backfill cycle took {:.1} s (over {:.0} s){}",
                last as f64 / 1e6,
                t.cfg.backfill_cycle_seconds,
                h.backfill
                    .depth
                    .map(|d| format!(", {d} jobs deep"))
                    .unwrap_or_default()
            ),
            link: "/jobs".into(),
            drain_node: None,
        });
    }
}

/// slurmctld's agent queue over `agent_queue_max` for `agent_queue_ms` (a warning): the
/// controller cannot reach its nodes as fast as it must.
pub(super) fn agent_queue_high(t: &Tick<'_>, st: &mut RuleState, out: &mut Vec<Condition>) {
    let Some(q) = t.f.health.and_then(|h| h.agent_queue) else {
        return;
    };
    if q > t.cfg.agent_queue_max
        && st.held(
            "agent_queue_high",
            SUBJECT,
            t.ov.at_ms,
            t.cfg.agent_queue_ms,
        )
    {
        out.push(Condition {
            rule: "agent_queue_high",
            subject: SUBJECT.into(),
            severity: "warning",
            summary: format!(
                "slurmctld's agent queue holds {q} RPCs (over {}) for {} min",
                t.cfg.agent_queue_max,
                t.cfg.agent_queue_ms / 60_000
            ),
            link: "/jobs".into(),
            drain_node: None,
        });
    }
}
