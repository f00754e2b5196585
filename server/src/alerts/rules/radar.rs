//! The straggler and hang radar: each running job of two or more nodes, its GPUs against
//! their own peers. A synchronous job runs at its slowest GPU's pace, so one GPU
//! persistently below its peers' SM activity is a straggler; a job whose GPUs all look busy
//! while their power is flat and its nodes' InfiniBand traffic is nil is hung (spinning in
//! a collective that will never complete). Pure, like the rules around it.

use std::collections::{HashMap, HashSet};

use app::model::{GpuReading, JobState, UnixMs};

use super::{median, AlertConfig, Condition, RuleState, Tick};

/// Peers are compared only while the job computes: its median SM activity at least this
/// (a checkpoint save or a start-up idles every GPU alike).
pub const COMPUTING_SM: f64 = 0.2;
pub use crate::aggregate::hang::{
    hang_signal, ib_quiet, HangHold, HANG_IB_BYTES_PER_SECOND, HANG_POWER_BAND, HANG_UTIL_PERCENT,
};

/// The radar's rules on the readings: `straggler` (a warning per GPU) and `job_hung`
/// (critical).
pub(super) fn evaluate(t: &Tick<'_>, st: &mut RuleState, out: &mut Vec<Condition>) {
    let Some(r) = t.f.readings else { return };
    let (cfg, jobs, now) = (t.cfg, t.f.jobs, t.now);
    let mut by_node: HashMap<&str, Vec<&GpuReading>> = HashMap::new();
    for g in &r.gpus {
        by_node.entry(g.node.as_str()).or_default().push(g);
    }
    let ib: HashMap<&str, Option<f64>> = r
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.ib_bytes_per_second))
        .collect();
    let mut hung_now = HashSet::new();
    for j in jobs
        .iter()
        .filter(|j| j.job.state == JobState::Running && j.job.nodes.len() >= 2)
    {
        let id = j.job.id;
        let gpus: Vec<&GpuReading> = j
            .job
            .nodes
            .iter()
            .flat_map(|n| by_node.get(n.as_str()).into_iter().flatten().copied())
            .collect();
        if gpus.len() < 2 {
            continue;
        }
        stragglers(cfg, id, &gpus, now, st, out);
        let quiet = j
            .job
            .nodes
            .iter()
            .all(|n| ib_quiet(ib.get(n.as_str()).copied().flatten()));
        let Some(mean) = hang_signal(&gpus, quiet) else {
            continue;
        };
        hung_now.insert(id);
        let h = st.hangs.entry(id).or_insert(HangHold::new(now, mean));
        h.observe(now, mean);
        if now - h.since >= cfg.hang_ms {
            out.push(Condition {
                rule: "job_hung",
                subject: format!("job:{id}"),
                severity: "critical",
                summary: format!(
                    "job {id} ({}): GPUs busy with flat power ({mean:.0} W each) and no InfiniBand traffic for over {} min: hung; requeue it from its last checkpoint",
                    j.job.name,
                    cfg.hang_ms / 60_000
                ),
                link: format!("/jobs/{id}"),
                drain_node: None,
            });
        }
    }
    st.hangs.retain(|id, _| hung_now.contains(id));
}

/// GPUs of job `id` under `straggler_ratio` of their peers' median SM activity, held for
/// `straggler_ms`.
fn stragglers(
    cfg: &AlertConfig,
    id: u64,
    gpus: &[&GpuReading],
    now: UnixMs,
    st: &mut RuleState,
    out: &mut Vec<Condition>,
) {
    let sms: Vec<f64> = gpus.iter().filter_map(|g| g.sm_active_ratio).collect();
    let Some(med) = median(&sms).filter(|m| *m >= COMPUTING_SM && sms.len() >= 2) else {
        // Paused (a checkpoint save): the stragglers' holds carry over it.
        let prefix = format!("job:{id}:");
        for k in st.since.keys() {
            if k.0 == "straggler" && k.1.starts_with(&prefix) {
                st.seen.insert(k.clone());
            }
        }
        return;
    };
    for g in gpus {
        let Some(sm) = g.sm_active_ratio else {
            continue;
        };
        let ratio = sm / med;
        if ratio >= cfg.straggler_ratio {
            continue;
        }
        let subject = format!("job:{id}:{}:gpu{}", g.node, g.index);
        if st.held("straggler", &subject, now, cfg.straggler_ms) {
            out.push(Condition {
                rule: "straggler",
                subject,
                severity: "warning",
                summary: format!(
                    "job {id}: {} GPU {} at {:.0}% of its peers' SM activity for over {} min; the job runs at its pace, about {:.1}x slower",
                    g.node,
                    g.index,
                    ratio * 100.0,
                    cfg.straggler_ms / 60_000,
                    1.0 / ratio.max(0.01)
                ),
                link: format!("/jobs/{id}"),
                drain_node: None,
            });
        }
    }
}
