//! The workload: a few multi-day training runs from the start of history, then random
//! jobs (8 to 256 GPUs, 20 minutes to 12 hours) arriving often enough to keep the cluster
//! about 85% busy.

use app::model::{Job, JobState};

use super::{Sim, SimEvent, SimJob, HOUR_MS, MIN_MS};

impl Sim {
    /// A few multi-day training runs, present from the start of history.
    pub(super) fn submit_long_runs(&mut self) {
        let n = self.nodes.len();
        let sizes = [n / 8, n / 16, n / 16];
        let names = [
            "llama-405b-pretrain",
            "mixtral-8x22b-pretrain",
            "code-70b-continued-pretrain",
        ];
        for (size, name) in sizes.into_iter().zip(names) {
            if size == 0 {
                continue;
            }
            let duration = (3 * 24 + self.rng.below(48) as i64) * HOUR_MS;
            self.submit(name, size, duration, true);
        }
    }

    fn submit(&mut self, name: &str, nodes_needed: usize, duration_ms: i64, training: bool) {
        let id = self.next_job_id;
        self.next_job_id += 1;
        let users = ["alice", "bob", "carol", "dave", "erin", "frank"];
        let accounts = ["llm-pretrain", "llm-finetune", "research", "eval"];
        let user = users[self.rng.below(users.len() as u64) as usize];
        let account = if training && name.contains("pretrain") {
            accounts[0]
        } else {
            accounts[1 + self.rng.below(3) as usize]
        };
        let gpus = (nodes_needed * self.gpn) as u32;
        // On NVL72 racks multi-node jobs ask for segments (`--segment`): the largest size
        // up to 16 (CoreWeave's advice) that divides their node count.
        let segment = (self.profile == super::Profile::Nvl72 && nodes_needed > 1)
            .then(|| {
                (1..=16.min(nodes_needed))
                    .rev()
                    .find(|s| nodes_needed.is_multiple_of(*s))
            })
            .flatten();
        // Checkpoint every 30 to 60 minutes; the save takes about 45 s at 256 GPUs.
        let ckpt_interval_ms = (30 + self.rng.below(31) as i64) * MIN_MS;
        self.active.push(SimJob {
            job: Job {
                id,
                name: name.into(),
                user: user.into(),
                account: account.into(),
                partition: "gpu".into(),
                state: JobState::Pending,
                nodes: Vec::new(),
                gpus,
                submit_ms: self.t_ms,
                start_ms: None,
                end_ms: None,
            },
            nodes_needed,
            segment,
            node_idx: Vec::new(),
            duration_ms,
            // 0.45 to 0.9: a full rack of busy nodes runs near, not past, a 40 kW limit.
            intensity: 0.45 + 0.45 * self.rng.unit(),
            training,
            ckpt_interval_ms,
            next_ckpt_ms: 0,
            ckpt_until_ms: 0,
            prev_ckpt_end_ms: 0,
            checkpoints: 0,
            step: 0,
            fault: None,
            straggle: None,
            hang_from_ms: None,
            restart_count: 0,
            held: false,
            eligible_ms: 0,
            excluded: Vec::new(),
            startup_until_ms: 0,
            truth: Default::default(),
        });
        self.events.push(SimEvent::JobSubmitted {
            job: self.active[self.active.len() - 1].job.clone(),
        });
    }

    pub(super) fn submit_random(&mut self) {
        let choices = RANDOM_JOB_NODES;
        let want = choices[self.rng.below(choices.len() as u64) as usize]
            .min(max_random_job_nodes(self.nodes.len()));
        let kinds = [
            ("llama-70b-sft", true),
            ("rlhf-ppo", true),
            ("mistral-7b-lora", true),
            ("eval-harness", false),
            ("vision-encoder-pretrain", true),
            ("data-dedup-embed", false),
        ];
        let (name, training) = kinds[self.rng.below(kinds.len() as u64) as usize];
        let (lo, hi) = random_duration_bounds_ms();
        let duration = (lo.ln() + (hi.ln() - lo.ln()) * self.rng.unit()).exp() as i64;
        self.submit(name, want, duration, training);
    }
}

/// Nodes per random job (8 to 256 GPUs), small jobs more common.
pub(super) const RANDOM_JOB_NODES: [usize; 10] = [1, 1, 1, 2, 2, 4, 4, 8, 16, 32];

/// Nodes held by the multi-day runs: an eighth and two sixteenths of the cluster.
pub(super) fn long_run_nodes(nodes: usize) -> usize {
    nodes / 8 + 2 * (nodes / 16)
}

/// The largest random job: half of what the long runs and broken nodes leave.
pub(super) fn max_random_job_nodes(nodes: usize) -> usize {
    (nodes.saturating_sub(long_run_nodes(nodes) + 3) / 2).max(1)
}

/// Random jobs run log-uniformly between 20 minutes and 12 hours.
fn random_duration_bounds_ms() -> (f64, f64) {
    (20.0 * MIN_MS as f64, 12.0 * HOUR_MS as f64)
}

pub(super) fn mean_random_duration_ms() -> f64 {
    let (lo, hi) = random_duration_bounds_ms();
    (hi - lo) / (hi / lo).ln()
}
