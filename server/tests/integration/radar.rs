//! The straggler and hang radar's truth test: a simulated week of the default 64-node
//! cluster, its readings through the alert rules each minute, against what the simulator
//! made (stragglers and hangs) and knows (GPUs slowed by heat): every straggler flagged
//! within 10 minutes of its start, every hang within its 10 minutes of evidence and one
//! sampling minute, and no flag without a slow GPU or a hang behind it.

use std::collections::{HashMap, HashSet, VecDeque};

use server::alerts::{evaluate, AlertConfig, Facts, RuleState};
use server::sim::Sim;

/// 2026-11-10 00:00 UTC.
const T0: i64 = 1_794_268_800_000;
const TICK_MS: i64 = 60_000;
const DAYS: i64 = 7;

type Key = (u64, String, u32);

fn straggler_key(subject: &str) -> Option<Key> {
    // job:1042:gpu017:gpu3
    let mut it = subject.strip_prefix("job:")?.split(':');
    let job = it.next()?.parse().ok()?;
    let node = it.next()?.to_string();
    let gpu = it.next()?.strip_prefix("gpu")?.parse().ok()?;
    Some((job, node, gpu))
}

#[test]
fn stragglers_and_hangs_are_flagged_in_time_and_healthy_jobs_never() {
    let mut sim = Sim::new(64, 11, "radar", T0);
    let inv = sim.inventory().clone();
    let cfg = AlertConfig::default();
    let mut st = RuleState::default();
    // The truth's slow GPUs of the last few minutes: a flag may trail its cause by the
    // hold and a sample.
    let mut recent_slow: VecDeque<HashSet<Key>> = VecDeque::new();
    let mut first_straggler_flag: HashMap<Key, i64> = HashMap::new();
    let mut first_hang_flag: HashMap<u64, i64> = HashMap::new();
    let mut false_stragglers = Vec::new();
    let mut false_hangs = Vec::new();
    for tick in 1..=(DAYS * 86_400_000 / TICK_MS) {
        sim.advance_to(T0 + tick * TICK_MS);
        let now = sim.now_ms();
        let r = sim.readings();
        let ov = server::aggregate::overview(&inv, &r, tick as u64, TICK_MS, now);
        let sched = server::sources::sim::sched(&sim, TICK_MS as u64);
        let facts = Facts {
            readings: Some(&r),
            jobs: &sched.jobs,
            ..Facts::default()
        };
        recent_slow.push_back(sim.slow_gpus(cfg.straggler_ratio).into_iter().collect());
        if recent_slow.len() > 3 {
            recent_slow.pop_front();
        }
        let hung_now: HashSet<u64> = sim
            .slowdowns()
            .iter()
            .filter(|s| s.kind == "hang" && s.from_ms <= now && now <= s.to_ms + TICK_MS)
            .map(|s| s.job)
            .collect();
        for c in evaluate(&cfg, &ov, &facts, &mut st) {
            match c.rule {
                "straggler" => {
                    let k = straggler_key(&c.subject).expect("a straggler's subject");
                    first_straggler_flag.entry(k.clone()).or_insert(now);
                    if !recent_slow.iter().any(|s| s.contains(&k)) {
                        false_stragglers.push((now, c.summary));
                    }
                }
                "job_hung" => {
                    let job: u64 = c.subject["job:".len()..].parse().expect("a job id");
                    first_hang_flag.entry(job).or_insert(now);
                    if !hung_now.contains(&job) {
                        false_hangs.push((now, c.summary));
                    }
                }
                _ => {}
            }
        }
    }
    let made = sim.slowdowns();
    let stragglers: Vec<_> = made
        .iter()
        .filter(|s| s.kind == "straggler" && s.to_ms - s.from_ms >= 10 * 60_000)
        .collect();
    let hangs: Vec<_> = made
        .iter()
        .filter(|s| s.kind == "hang" && s.to_ms - s.from_ms >= cfg.hang_ms + TICK_MS)
        .collect();
    eprintln!(
        "a week: {} stragglers and {} hangs made, {} GPUs flagged as stragglers, {} jobs as hung",
        stragglers.len(),
        hangs.len(),
        first_straggler_flag.len(),
        first_hang_flag.len()
    );
    assert!(stragglers.len() >= 5, "{} stragglers", stragglers.len());
    assert!(!hangs.is_empty(), "no hang in a week");
    assert!(
        false_stragglers.is_empty(),
        "flagged without a slow GPU: {false_stragglers:?}"
    );
    assert!(
        false_hangs.is_empty(),
        "flagged without a hang: {false_hangs:?}"
    );
    for s in &stragglers {
        let k = (
            s.job,
            s.node.clone().unwrap_or_default(),
            s.gpu.unwrap_or_default(),
        );
        let at = first_straggler_flag.get(&k).copied();
        assert!(
            at.is_some_and(|t| t >= s.from_ms && t - s.from_ms <= 10 * 60_000),
            "straggler {s:?} flagged at {at:?}"
        );
    }
    for h in &hangs {
        let at = first_hang_flag.get(&h.job).copied();
        assert!(
            at.is_some_and(|t| t >= h.from_ms && t - h.from_ms <= cfg.hang_ms + TICK_MS),
            "hang {h:?} flagged at {at:?}"
        );
    }
}
