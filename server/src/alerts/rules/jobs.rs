//! Running jobs from what they report: NCCL latency, checkpoints, GPUs held idle. (A job's
//! GPUs against their peers are the radar's, `radar.rs`.)

use app::model::JobState;

use super::{median, Condition, RuleState, Tick};
use crate::scheduler::SchedJob;

fn running<'a>(t: &Tick<'a>) -> impl Iterator<Item = &'a SchedJob> {
    t.f.jobs.iter().filter(|j| j.job.state == JobState::Running)
}

/// NCCL all-reduce latency over the limit for `nccl_consecutive` steps in a row (a
/// warning): the job's own baseline times `nccl_baseline_factor` once it has one (the
/// median of its first `nccl_baseline_steps`), else the cluster's `nccl_latency_us`.
pub(super) fn nccl_latency(t: &Tick<'_>, _: &mut RuleState, out: &mut Vec<Condition>) {
    let cfg = t.cfg;
    for j in running(t) {
        let id = j.job.id;
        let Some(samples) = t.f.nccl.get(&id) else {
            continue;
        };
        let k = cfg.nccl_consecutive.max(1);
        if samples.len() >= k {
            let last: Vec<f64> = samples[samples.len() - k..].iter().map(|s| s.1).collect();
            let baseline = (samples.len() >= cfg.nccl_baseline_steps + k)
                .then(|| {
                    median(
                        &samples[..cfg.nccl_baseline_steps]
                            .iter()
                            .map(|s| s.1)
                            .collect::<Vec<_>>(),
                    )
                })
                .flatten();
            // Like with like: the job's own baseline once it has one, else the cluster's
            // threshold for small messages.
            let limit = match baseline {
                Some(b) => b * cfg.nccl_baseline_factor,
                None => cfg.nccl_latency_us,
            };
            if last.iter().all(|&l| l > limit) {
                out.push(Condition {
                    rule: "nccl_latency",
                    subject: format!("job:{id}"),
                    severity: "warning",
                    summary: format!(
                        "job {id}: NCCL all-reduce over {limit:.0} us for {k} steps in a row (last {:.0} us){}",
                        last[k - 1],
                        baseline.map(|b| format!("; its baseline is {b:.0} us")).unwrap_or_default()
                    ),
                    link: format!("/jobs/{id}"),
                    drain_node: None,
                });
            }
        }
    }
}

/// A job that has checkpointed, and then not for `checkpoint_overdue_ms` (a warning).
pub(super) fn checkpoint_overdue(t: &Tick<'_>, _: &mut RuleState, out: &mut Vec<Condition>) {
    let now = t.now;
    for j in running(t) {
        let id = j.job.id;
        if let Some(&last) = t.f.last_checkpoint_ms.get(&id) {
            if now - last > t.cfg.checkpoint_overdue_ms {
                out.push(Condition {
                    rule: "checkpoint_overdue",
                    subject: format!("job:{id}"),
                    severity: "warning",
                    summary: format!(
                        "job {id} ({}): no checkpoint for {}",
                        j.job.name,
                        app::units::duration_ms(now - last)
                    ),
                    link: "/jobs".into(),
                    drain_node: None,
                });
            }
        }
    }
}

/// A running job holding GPUs idle past `idle_gpu_ms` (a warning to operators, naming its
/// owner): what the pipeline's [`crate::aggregate::idle::IdleWatch`] found at this tick.
pub(super) fn gpus_idle(t: &Tick<'_>, _: &mut RuleState, out: &mut Vec<Condition>) {
    for h in &t.ov.idle {
        let Some(j) = running(t).find(|j| j.job.id == h.job) else {
            continue;
        };
        out.push(Condition {
            rule: "gpus_idle",
            subject: format!("job:{}", h.job),
            severity: "warning",
            summary: format!(
                "job {} ({}, user {}, account {}): {}; SM activity under {:.0}% and no memory in use. Ask its owner to use or release them",
                h.job,
                j.job.name,
                j.job.user,
                j.job.account,
                h.sentence(t.now),
                t.cfg.idle_gpu_activity * 100.0
            ),
            link: format!("/jobs/{}", h.job),
            drain_node: None,
        });
    }
}
