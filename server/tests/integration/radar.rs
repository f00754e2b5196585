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

/// The floor's marks follow the radar's open alerts: a served simulator at 1,200 x (a tick
/// every 100 ms, 2 simulated minutes), whose first straggler (about 4.4 simulated hours in,
/// some 13 s) marks its node's tile in the live overview and the `/racks` page, and no
/// tile is marked without an open alert behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_floor_marks_the_nodes_the_radar_flags() {
    use app::live::marks::{HUNG, STRAGGLER};
    let cfg = crate::support::test_config(crate::support::sqlite_url(), 64, 1200.0, 100);
    let r = server::serve::start(cfg).await.expect("start");
    crate::support::wait_ready(&r).await;
    let mut flagged: HashSet<String> = HashSet::new();
    let mut hung_jobs: HashSet<u64> = HashSet::new();
    let mut marked_at = None;
    for _ in 0..900 {
        // Alerts first, then the tile: a mark is stamped after its alert is stored.
        for a in r.store.open_alerts().await.expect("open alerts") {
            match a.rule.as_str() {
                "straggler" => {
                    let (_, node, _) = straggler_key(&a.subject).expect("a straggler's subject");
                    flagged.insert(node);
                }
                "job_hung" => {
                    hung_jobs.insert(a.subject["job:".len()..].parse().expect("a job id"));
                }
                _ => {}
            }
        }
        let t = r.live.current().expect("a tick");
        for n in &t.overview.nodes {
            assert!(
                n.marks & STRAGGLER == 0 || flagged.contains(&n.name),
                "{} marked a straggler without an alert (flagged: {flagged:?})",
                n.name
            );
            assert!(
                n.marks & HUNG == 0 || n.jobs.iter().any(|j| hung_jobs.contains(j)),
                "{} marked hung without a hung job",
                n.name
            );
            if n.marks & STRAGGLER != 0 && marked_at.is_none() {
                marked_at = Some(n.name.clone());
            }
        }
        if let Some(node) = &marked_at {
            // The page the server writes carries the mark as a class and in words.
            let html = crate::support::get(r.addr, "/racks").await.text();
            let cell = html
                .split("<li>")
                .find(|c| c.contains(&format!("data-node=\"{node}\"")))
                .expect("the node's cell");
            if cell.contains(" straggler") {
                assert!(cell.contains("a straggling GPU"), "{cell}");
                r.stop().await.expect("stop");
                return;
            }
            // Resolved between the two reads: wait for the next.
            marked_at = None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("no straggler marked in 90 s (flagged: {flagged:?})");
}

/// The simulator's lemon (gpu038) is marked on the floor once its score recommends RMA:
/// at 20,000 x, days of history in seconds, read by the leader's lemon task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_floor_marks_the_lemon() {
    use app::live::marks::LEMON;
    let cfg = crate::support::test_config(crate::support::sqlite_url(), 64, 20_000.0, 200);
    let r = server::serve::start(cfg).await.expect("start");
    crate::support::wait_ready(&r).await;
    for _ in 0..1200 {
        let t = r.live.current().expect("a tick");
        let marked: Vec<&str> = t
            .overview
            .nodes
            .iter()
            .filter(|n| n.marks & LEMON != 0)
            .map(|n| n.name.as_str())
            .collect();
        if !marked.is_empty() {
            assert_eq!(marked, ["gpu038"], "the lemons marked");
            let html = crate::support::get(r.addr, "/racks").await.text();
            let cell = html
                .split("<li>")
                .find(|c| c.contains("data-node=\"gpu038\""))
                .expect("gpu038's cell");
            assert!(cell.contains(" lemon\""), "{cell}");
            assert!(cell.contains("RMA recommended"), "{cell}");
            r.stop().await.expect("stop");
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("gpu038 never marked a lemon in 120 s");
}
