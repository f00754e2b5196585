//! Slurm's start estimates against the starts that followed: for each pending job, the
//! first estimate seen (and when) and the last, written with its real start when it starts.
//! What `/jobs` and `GET /api/jobs/estimates` judge the estimates by.

use std::collections::{HashMap, HashSet};

use app::model::{JobState, UnixMs};

use super::store_queue::StoreWrite;
use crate::scheduler::SchedJob;
use crate::store::StartEstimate;

/// One pending job's estimates so far.
struct Seen {
    partition: String,
    first_seen_ms: UnixMs,
    first_est_ms: UnixMs,
    last_est_ms: UnixMs,
}

/// The pending jobs' estimates between polls (as many as the poll has pending jobs).
#[derive(Default)]
pub struct EstimateWatch {
    pending: HashMap<u64, Seen>,
}

impl EstimateWatch {
    /// Notes each pending job's estimate at `at_ms`; a job seen pending with one and now
    /// running is written with its start. Jobs gone otherwise are forgotten.
    pub fn observe(&mut self, jobs: &[SchedJob], at_ms: UnixMs, writes: &mut Vec<StoreWrite>) {
        let mut pending = HashSet::new();
        for j in jobs {
            let id = j.job.id;
            match j.job.state {
                JobState::Pending => {
                    pending.insert(id);
                    if let Some(e) = j.queue.est_start_ms {
                        self.pending
                            .entry(id)
                            .and_modify(|s| s.last_est_ms = e)
                            .or_insert_with(|| Seen {
                                partition: j.job.partition.clone(),
                                first_seen_ms: at_ms,
                                first_est_ms: e,
                                last_est_ms: e,
                            });
                    }
                }
                JobState::Running => {
                    if let (Some(start_ms), Some(s)) = (j.job.start_ms, self.pending.remove(&id)) {
                        writes.push(StoreWrite::StartEstimate(StartEstimate {
                            job_id: id,
                            partition: s.partition,
                            first_seen_ms: s.first_seen_ms,
                            first_est_ms: s.first_est_ms,
                            last_est_ms: s.last_est_ms,
                            start_ms,
                        }));
                    }
                }
                _ => {}
            }
        }
        self.pending.retain(|id, _| pending.contains(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::model::Job;

    fn job(state: JobState, est: Option<UnixMs>, start: Option<UnixMs>) -> SchedJob {
        SchedJob {
            queue: crate::scheduler::QueueFacts {
                est_start_ms: est,
                ..Default::default()
            },
            ..SchedJob::of(Job {
                id: 7,
                name: "j".into(),
                user: "u".into(),
                account: "a".into(),
                partition: "gpu".into(),
                state,
                nodes: vec![],
                gpus: 8,
                submit_ms: 0,
                start_ms: start,
                end_ms: None,
            })
        }
    }

    #[test]
    fn the_first_and_last_estimates_are_written_with_the_start() {
        let mut w = EstimateWatch::default();
        let mut out = Vec::new();
        w.observe(&[job(JobState::Pending, None, None)], 100, &mut out);
        w.observe(&[job(JobState::Pending, Some(5_000), None)], 200, &mut out);
        w.observe(&[job(JobState::Pending, None, None)], 300, &mut out);
        w.observe(&[job(JobState::Pending, Some(4_000), None)], 400, &mut out);
        assert!(out.is_empty());
        w.observe(&[job(JobState::Running, None, Some(3_500))], 500, &mut out);
        let [StoreWrite::StartEstimate(e)] = out.as_slice() else {
            panic!("{out:?}");
        };
        assert_eq!(
            (
                e.job_id,
                e.first_seen_ms,
                e.first_est_ms,
                e.last_est_ms,
                e.start_ms
            ),
            (7, 200, 5_000, 4_000, 3_500)
        );
        // Written once; a job cancelled while pending is forgotten.
        out.clear();
        w.observe(&[job(JobState::Running, None, Some(3_500))], 600, &mut out);
        w.observe(&[job(JobState::Pending, Some(9_000), None)], 700, &mut out);
        w.observe(&[], 800, &mut out);
        w.observe(&[job(JobState::Running, None, Some(9_500))], 900, &mut out);
        assert!(out.is_empty(), "{out:?}");
    }
}
