//! GPUs held idle: a running job's GPUs with SM activity under a threshold and no memory
//! in use, without a break, for a while. Pure; the pipeline keeps one [`IdleWatch`] and
//! the `gpus_idle` rule and the pages read what it found.
//!
//! - Activity is DCGM's SM activity (`DCGM_FI_PROF_SM_ACTIVE`), else the GPU utilisation
//!   over 100 (the profiling fields are off in dcgm-exporter's default counters); memory is
//!   `DCGM_FI_DEV_FB_USED`. A GPU missing either is not judged, and its hold starts over.
//! - Which GPUs a job holds: every GPU of its nodes when its GPUs are all of theirs (Slurm's
//!   `--exclusive` or whole-node asks); otherwise which ones is not in the scheduler's
//!   answer, so its GPUs count as idle only when every GPU of its nodes is.
//! - GPU-hours are counted from when each GPU went idle, not from when the hold was met.

use std::collections::HashMap;

use app::model::{GpuReading, JobState, UnixMs};
use app::queue::IdleHeld;

use crate::telemetry::Readings;

/// The thresholds, from `[alerts]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IdleRule {
    /// Activity (0 to 1) under this is idle.
    pub activity_below: f64,
    /// Memory in use at most this (MiB) is none.
    pub memory_mib: f64,
    /// Idle this long, without a break, to be reported.
    pub hold_ms: i64,
}

impl Default for IdleRule {
    fn default() -> Self {
        IdleRule {
            activity_below: 0.01,
            memory_mib: 0.0,
            hold_ms: 30 * 60_000,
        }
    }
}

impl IdleRule {
    /// Whether `g` reads idle: `None` when it does not say.
    pub fn idle(&self, g: &GpuReading) -> Option<bool> {
        let activity = g
            .sm_active_ratio
            .or(g.gpu_util_percent.map(|p| p / 100.0))?;
        let memory = g.fb_used_mib?;
        Some(activity < self.activity_below && memory <= self.memory_mib)
    }
}

/// Since when each GPU held by a running job has read idle: (job, the GPU's place in the
/// readings, which follow the inventory) -> time; a job judged as a whole (its GPUs not
/// all of its nodes') is under `None`. Forgotten with the inventory.
#[derive(Debug, Default)]
pub struct IdleWatch {
    since: HashMap<(u64, Option<usize>), UnixMs>,
    gpus: usize,
}

impl IdleWatch {
    /// One instant's readings: the running jobs with GPUs idle for at least the hold, by id.
    pub fn observe(&mut self, rule: &IdleRule, r: &Readings) -> Vec<IdleHeld> {
        let now = r.at_ms;
        if r.gpus.len() != self.gpus {
            self.since.clear();
            self.gpus = r.gpus.len();
        }
        let mut by_node: HashMap<&str, Vec<(usize, &GpuReading)>> = HashMap::new();
        for (k, g) in r.gpus.iter().enumerate() {
            by_node.entry(g.node.as_str()).or_default().push((k, g));
        }
        let mut seen: HashMap<(u64, Option<usize>), UnixMs> = HashMap::new();
        let mut out = Vec::new();
        for j in r.jobs.iter().filter(|j| j.state == JobState::Running) {
            let gpus: Vec<(usize, &GpuReading)> = j
                .nodes
                .iter()
                .flat_map(|n| by_node.get(n.as_str()).into_iter().flatten().copied())
                .collect();
            if gpus.is_empty() {
                continue;
            }
            let mut idle_since: Vec<UnixMs> = Vec::new();
            if gpus.len() as u32 == j.gpus {
                for &(k, g) in &gpus {
                    if rule.idle(g) == Some(true) {
                        let key = (j.id, Some(k));
                        let since = self.since.get(&key).copied().unwrap_or(now);
                        seen.insert(key, since);
                        idle_since.push(since);
                    }
                }
            } else if gpus.iter().all(|(_, g)| rule.idle(g) == Some(true)) {
                let key = (j.id, None);
                let since = self.since.get(&key).copied().unwrap_or(now);
                seen.insert(key, since);
                idle_since.extend(std::iter::repeat_n(since, j.gpus as usize));
            }
            let held: Vec<UnixMs> = idle_since
                .into_iter()
                .filter(|&s| now - s >= rule.hold_ms)
                .collect();
            if let Some(&first) = held.iter().min() {
                out.push(IdleHeld {
                    job: j.id,
                    gpus: held.len() as u32,
                    of: j.gpus,
                    since_ms: first,
                    gpu_hours: held.iter().map(|&s| (now - s) as f64).sum::<f64>() / 3_600_000.0,
                });
            }
        }
        self.since = seen;
        out.sort_by_key(|h| h.job);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::model::Job;

    fn gpu(node: &str, index: u32, sm: Option<f64>, fb: Option<f64>) -> GpuReading {
        GpuReading {
            node: node.into(),
            index,
            sm_active_ratio: sm,
            fb_used_mib: fb,
            ..GpuReading::default()
        }
    }

    fn job(id: u64, nodes: &[&str], gpus: u32) -> Job {
        Job {
            id,
            name: format!("j{id}"),
            user: "u".into(),
            account: "a".into(),
            partition: "gpu".into(),
            state: JobState::Running,
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            gpus,
            submit_ms: 0,
            start_ms: Some(0),
            end_ms: None,
        }
    }

    fn by_job(v: Vec<IdleHeld>) -> std::collections::BTreeMap<u64, IdleHeld> {
        v.into_iter().map(|h| (h.job, h)).collect()
    }

    fn at(t: UnixMs, gpus: Vec<GpuReading>, jobs: Vec<Job>) -> Readings {
        Readings {
            at_ms: t,
            gpus,
            racks: Vec::new(),
            nodes: Vec::new(),
            jobs,
            index: Default::default(),
        }
    }

    const MIN: i64 = 60_000;

    #[test]
    fn idle_gpus_of_a_job_are_found_after_the_hold_with_hours_from_when_they_went_idle() {
        let rule = IdleRule::default();
        let mut w = IdleWatch::default();
        // Job 1 holds a's 4 GPUs and uses two; job 2 holds b's 4 and uses them all.
        let read = |t: i64, busy_a: u32| {
            let mut g = Vec::new();
            for i in 0..4 {
                let busy = i < busy_a;
                g.push(gpu(
                    "a",
                    i,
                    Some(if busy { 0.8 } else { 0.0 }),
                    Some(if busy { 70_000.0 } else { 0.0 }),
                ));
                g.push(gpu("b", i, Some(0.7), Some(70_000.0)));
            }
            at(t, g, vec![job(1, &["a"], 4), job(2, &["b"], 4)])
        };
        for m in 0..30 {
            assert!(w.observe(&rule, &read(m * MIN, 2)).is_empty(), "minute {m}");
        }
        let found = by_job(w.observe(&rule, &read(30 * MIN, 2)));
        assert_eq!(
            found.get(&1),
            Some(&IdleHeld {
                job: 1,
                gpus: 2,
                of: 4,
                since_ms: 0,
                gpu_hours: 1.0,
            })
        );
        assert!(!found.contains_key(&2));
        // One of them gets work for a tick: its hold starts over; the other stays.
        w.observe(&rule, &read(31 * MIN, 3));
        let found = by_job(w.observe(&rule, &read(32 * MIN, 2)));
        assert_eq!(found[&1].gpus, 1);
        assert_eq!(found[&1].of, 4);
    }

    #[test]
    fn a_gpu_that_does_not_say_or_holds_memory_is_not_idle() {
        let rule = IdleRule {
            hold_ms: 0,
            ..IdleRule::default()
        };
        let mut w = IdleWatch::default();
        let gpus = vec![
            // No SM activity field: utilisation instead.
            GpuReading {
                gpu_util_percent: Some(0.0),
                ..gpu("a", 0, None, Some(0.0))
            },
            // No memory reading: not judged.
            gpu("a", 1, Some(0.0), None),
            // Memory in use (a loaded model waiting on input): not idle.
            gpu("a", 2, Some(0.0), Some(512.0)),
            // Neither activity field.
            gpu("a", 3, None, Some(0.0)),
        ];
        let found = by_job(w.observe(&rule, &at(MIN, gpus, vec![job(1, &["a"], 4)])));
        assert_eq!(found[&1].gpus, 1);
    }

    #[test]
    fn a_job_on_part_of_a_node_is_idle_only_when_the_whole_node_is() {
        let rule = IdleRule {
            hold_ms: 0,
            ..IdleRule::default()
        };
        let mut w = IdleWatch::default();
        let node = |busy: bool| {
            (0..8)
                .map(|i| {
                    let b = busy && i == 5;
                    gpu(
                        "a",
                        i,
                        Some(if b { 0.9 } else { 0.0 }),
                        Some(if b { 1e4 } else { 0.0 }),
                    )
                })
                .collect()
        };
        // Two jobs of 2 GPUs share the node; which GPUs are whose is not known.
        let jobs = || vec![job(1, &["a"], 2), job(2, &["a"], 2)];
        let found = by_job(w.observe(&rule, &at(MIN, node(true), jobs())));
        assert!(found.is_empty(), "{found:?}");
        let found = by_job(w.observe(&rule, &at(2 * MIN, node(false), jobs())));
        assert_eq!(found[&1].gpus, 2);
        assert_eq!(found[&2].gpus, 2);
        // A job no longer running is forgotten.
        let found = by_job(w.observe(&rule, &at(3 * MIN, node(false), vec![job(2, &["a"], 2)])));
        assert_eq!(found.keys().collect::<Vec<_>>(), [&2]);
        assert_eq!(found[&2].since_ms, 2 * MIN);
    }
}
