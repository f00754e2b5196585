//! The workload: a few multi-day training runs from the start of history, then random
//! jobs (8 to 256 GPUs, 20 minutes to 12 hours) arriving often enough to keep the cluster
//! about 85% busy, and, shortly before the present, a backlog that gives the queue each of
//! Slurm's common waits (resources, priority, a dependency, a QOS limit, a hold).

use app::model::{Job, JobState, UnixMs};

use super::queue::{Qos, SimQueue};
use super::{Sim, SimEvent, SimJob, HOUR_MS, MIN_MS};

const SWEEP: Ask = Ask {
    user: Some("grace"),
    account: Some("research"),
    qos: Qos::Sweep,
    after: None,
    held: false,
};

/// Who submits a job and how, beside its size and length.
struct Ask {
    user: Option<&'static str>,
    account: Option<&'static str>,
    qos: Qos,
    after: Option<u64>,
    held: bool,
}

const PLAIN: Ask = Ask {
    user: None,
    account: None,
    qos: Qos::Normal,
    after: None,
    held: false,
};

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
            let high = Ask {
                qos: Qos::High,
                ..PLAIN
            };
            self.submit(name, size, duration, true, high);
        }
        // A long sweep of one user, two nodes at a time (its QOS's limit), from the start:
        // the rest of it, submitted later, waits on the limit.
        if n >= 16 {
            for _ in 0..2 {
                self.submit("lr-sweep", 1, 30 * HOUR_MS, false, SWEEP);
            }
        }
    }

    /// Shortly before the present: more of the sweep (past its QOS's GPUs per user), a large run that
    /// holds the top of the queue, two more behind it, one that follows the first long
    /// run, one held by its owner. Only on clusters of 16 nodes or more.
    pub(super) fn submit_backlog(&mut self, start_ms: UnixMs) {
        let n = self.nodes.len();
        if n < 16 {
            return;
        }
        self.advance_to(start_ms - 20 * MIN_MS);
        for _ in 0..4 {
            let duration = (30 + self.rng.below(31) as i64) * MIN_MS;
            self.submit("lr-sweep", 1, duration, false, SWEEP);
        }
        let big = max_random_job_nodes(n);
        let high = Ask {
            user: Some("alice"),
            account: Some("llm-pretrain"),
            qos: Qos::High,
            ..PLAIN
        };
        self.submit("moe-1t-pretrain", big, 10 * HOUR_MS, true, high);
        for name in ["dpo-70b", "long-context-sft"] {
            self.submit(name, big, 8 * HOUR_MS, true, PLAIN);
        }
        let first_long_run = self
            .active
            .iter()
            .find(|j| j.job.name == "llama-405b-pretrain")
            .map(|j| j.job.id);
        if let Some(after) = first_long_run {
            let follow = Ask {
                user: Some("bob"),
                account: Some("eval"),
                after: Some(after),
                ..PLAIN
            };
            self.submit("eval-405b-final", 2, 2 * HOUR_MS, false, follow);
        }
        let held = Ask {
            user: Some("dave"),
            held: true,
            ..PLAIN
        };
        self.submit("ablation-held", 1, HOUR_MS, true, held);
        self.schedule();
    }

    fn submit(
        &mut self,
        name: &str,
        nodes_needed: usize,
        duration_ms: i64,
        training: bool,
        ask: Ask,
    ) {
        let id = self.next_job_id;
        self.next_job_id += 1;
        self.count_submitted();
        let users = ["alice", "bob", "carol", "dave", "erin", "frank"];
        let accounts = ["llm-pretrain", "llm-finetune", "research", "eval"];
        let user = users[self.rng.below(users.len() as u64) as usize];
        let account = if training && name.contains("pretrain") {
            accounts[0]
        } else {
            accounts[1 + self.rng.below(3) as usize]
        };
        let user = ask.user.unwrap_or(user);
        let account = ask.account.unwrap_or(account);
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
            held: ask.held,
            eligible_ms: 0,
            excluded: Vec::new(),
            q: SimQueue::new(duration_ms, ask.qos, ask.after),
            startup_until_ms: 0,
            truth: Default::default(),
            idle: None,
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
        self.submit(name, want, duration, training, PLAIN);
        // Some one-node jobs leave GPUs idle (a training job only by running too few ranks:
        // one whose owner walked away would still checkpoint).
        if want == 1 {
            if let Some(j) = self.active.last_mut() {
                j.idle = super::idle::IdlePlan::of(self.seed, j.job.id, self.gpn)
                    .filter(|p| !training || p.after_ms == 0);
            }
        }
    }
}

/// Nodes per random job (8 to 256 GPUs), small jobs more common.
pub(super) const RANDOM_JOB_NODES: [usize; 10] = [1, 1, 1, 2, 2, 4, 4, 8, 16, 32];

/// Nodes held by the multi-day runs (an eighth and two sixteenths of the cluster) and the
/// long sweep (two).
pub(super) fn long_run_nodes(nodes: usize) -> usize {
    nodes / 8 + 2 * (nodes / 16) + if nodes >= 16 { 2 } else { 0 }
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
