//! `cargo xtask bench reports`: how long the server takes to answer a 90-day report over
//! 4,096 GPUs, on SQLite and on PostgreSQL (each a peer of the other, in the same run).
//!
//! The 90 days are made by the live sources' own accumulator: 512 simulated nodes (8 GPUs
//! each), 48 jobs of 8 nodes from 12 accounts, rotated daily, two failing each day, one
//! tick per hour. Then each grouping's report (numbers and its three charts) is built
//! several times; the median and the worst are printed against the 250 ms goal.
//!
//! Then reliability over the same 90 days: the history of 48 jobs a day on the same
//! 512 nodes, 12 of them interrupted a day (an XID, an ECC step, a node lost, or an exit
//! code, then requeued and run on), with node outages: `/reliability`'s answer (causes,
//! rates, repairs, lemons) built several times, the store's reads and the attribution
//! timed apart, against the same 250 ms goal; and the badput ledger of the 90 days alone
//! (from the report rollups written first: 4,320 jobs' rows).
//!
//! The GPUs carry energy counters (620 W each), so every report sums their energy from the
//! counters' rises (checked against 4,096 x 620 W x 90 days); and Slurm's start estimates of
//! 90 days of 1,000 job starts a day are judged as `GET /api/jobs/estimates` judges the
//! last seven days' (the store's read and the per-partition quantiles), 7 runs.
//!
//! Usage: `bench_reports SQLITE_URL [POSTGRES_URL]` (release build).

use std::sync::Arc;
use std::time::Instant;

use app::model::{GpuReading, Job, JobState, NodeState};
use app::reports::{GroupBy, Rates, ReportQuery};
use server::reports::Accumulator;
use server::store::{ReportDelta, Store};
use server::telemetry::Readings;

const HOUR: i64 = 3_600_000;
const DAYS: i64 = 90;
const GOAL_MS: f64 = 250.0;
const RUNS: usize = 7;
/// 2026-09-01 00:00 UTC: the 90 days end on 2026-11-29.
const START: i64 = 1_788_220_800_000;

fn hours_of_deltas() -> Vec<Vec<ReportDelta>> {
    let inv = Arc::new(server::sim::layout(512, "bench"));
    let names: Vec<String> = inv.nodes.iter().map(|n| n.name.clone()).collect();
    let mut r = Readings {
        at_ms: START,
        gpus: inv
            .nodes
            .iter()
            .flat_map(|n| {
                n.gpus.iter().map(|g| GpuReading {
                    node: n.name.clone(),
                    index: g.index,
                    power_watts: Some(620.0),
                    sm_clock_mhz: Some(1980.0),
                    sm_active_ratio: Some(0.8),
                    ..GpuReading::default()
                })
            })
            .collect(),
        nodes: names
            .iter()
            .map(|n| server::telemetry::NodeReading::silent(n.clone(), NodeState::Idle))
            .collect(),
        ..Readings::default()
    };
    let mut acc = Accumulator::new(0.05);
    let mut out = Vec::new();
    let mut jobs: Vec<Job> = Vec::new();
    for h in 0..DAYS * 24 {
        let at = START + h * HOUR + HOUR / 2;
        if h % 24 == 0 {
            // A new day: two of yesterday's jobs fail, the rest end, 48 new ones start.
            for j in jobs.iter().take(2) {
                let mut f = j.clone();
                f.state = JobState::Failed;
                acc.job_lost(&f, at, Some(at - 3 * HOUR));
            }
            let day = h / 24;
            jobs = (0..48u64)
                .map(|k| {
                    let first = ((k as usize * 8) + day as usize * 3) % 504;
                    Job {
                        id: (day as u64) * 100 + k,
                        name: format!("train-{k}"),
                        user: format!("user{:02}", k % 30),
                        account: format!("account{:02}", k % 12),
                        partition: ["gpu", "long", "debug"][k as usize % 3].into(),
                        state: JobState::Running,
                        nodes: names[first..first + 8].to_vec(),
                        gpus: 64,
                        submit_ms: at,
                        start_ms: Some(at),
                        end_ms: None,
                    }
                })
                .collect();
        }
        r.at_ms = at;
        r.jobs = jobs.clone();
        // Some idle and some throttled GPUs, varying by hour; energy counters at 620 W.
        for (i, g) in r.gpus.iter_mut().enumerate() {
            g.energy_joules = Some(1e9 + 620.0 * 3600.0 * (h + 1) as f64);
            g.sm_active_ratio = Some(if (i as i64 + h) % 17 == 0 { 0.0 } else { 0.8 });
            g.throttle = ((i as i64 + h) % 23 == 0).then_some(app::model::ThrottleReasons(
                app::model::ThrottleReasons::SW_THERMAL,
            ));
            g.sm_clock_mhz = Some(if g.throttle.is_some() { 1600.0 } else { 1980.0 });
        }
        let d = acc.observe(&inv, &r, HOUR);
        if !d.is_empty() {
            out.push(d);
        }
    }
    out.push(acc.flush());
    out
}

/// 90 days of the history reliability reads, as the pipeline would write it.
fn reliability_history() -> Vec<server::live::StoreWrite> {
    use server::live::StoreWrite;
    let inv = server::sim::layout(512, "bench");
    let names: Vec<String> = inv.nodes.iter().map(|n| n.name.clone()).collect();
    let mut w = vec![StoreWrite::Inventory(Box::new(inv))];
    let job_write = |job: &Job, state: JobState, at_ms: i64, detail: &str| {
        let mut j = job.clone();
        j.state = state;
        StoreWrite::Job {
            job: Box::new(j),
            at_ms,
            detail: detail.to_string(),
        }
    };
    for day in 0..DAYS {
        let t0 = START + day * 24 * HOUR;
        for k in 0..48u64 {
            let first = ((k as usize * 8) + day as usize * 3) % 504;
            let nodes = names[first..first + 8].to_vec();
            let job = Job {
                id: 1_000_000 + day as u64 * 100 + k,
                name: format!("train-{k}"),
                user: format!("user{:02}", k % 30),
                account: format!("account{:02}", k % 12),
                partition: "gpu".into(),
                state: JobState::Running,
                nodes: nodes.clone(),
                gpus: 64,
                submit_ms: t0,
                start_ms: Some(t0 + 60_000),
                end_ms: None,
            };
            w.push(job_write(&job, JobState::Pending, t0, ""));
            w.push(job_write(&job, JobState::Running, t0 + 60_000, ""));
            if k % 4 == 0 {
                // Interrupted at some hour, with the evidence its kind leaves; requeued.
                let at = t0 + (2 + (k as i64 + day) % 18) * HOUR;
                let node = nodes[(k as usize + day as usize) % 8].clone();
                let (state, detail) = match (k / 4 + day as u64) % 4 {
                    0 => {
                        w.push(StoreWrite::Xid {
                            node,
                            gpu: 3,
                            xid: 79,
                            at_ms: at + 20_000,
                        });
                        (JobState::Requeued, "NonZeroExitCode; exit code 1")
                    }
                    1 => {
                        w.push(StoreWrite::Evidence {
                            node,
                            gpu: Some(1),
                            kind: server::live::EVIDENCE_ECC_DBE,
                            at_ms: at - 30_000,
                            amount: 1,
                        });
                        (JobState::Requeued, "NonZeroExitCode; exit code 1")
                    }
                    2 => {
                        w.push(StoreWrite::NodeState {
                            node: node.clone(),
                            at_ms: at - 60_000,
                            state: NodeState::Down,
                            reason: "Not responding".into(),
                        });
                        w.push(StoreWrite::NodeState {
                            node,
                            at_ms: at + 2 * HOUR,
                            state: NodeState::Idle,
                            reason: String::new(),
                        });
                        (JobState::NodeFail, "NodeDown")
                    }
                    _ => (JobState::Failed, "NonZeroExitCode; exit code 1"),
                };
                w.push(job_write(&job, state, at, detail));
                w.push(job_write(&job, JobState::Running, at + 10 * 60_000, ""));
            }
            w.push(job_write(&job, JobState::Completed, t0 + 23 * HOUR, ""));
        }
    }
    w
}

/// The badput ledger of the 90 days alone (cluster, per week, per account, per job) from
/// the rollups `measure` wrote: (median, worst) in ms.
async fn measure_ledger(store: &Store, from: i64, to: i64) -> Result<(f64, f64), String> {
    let mut times = Vec::new();
    let mut jobs = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        let (l, all) = server::reliability::ledger::load(store, from, to)
            .await
            .map_err(|e| e.to_string())?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        let c = &l.cluster;
        if c.allocated_gh <= 0.0 || (c.inside_gh() - c.allocated_gh).abs() > 1e-6 * c.allocated_gh {
            return Err(format!("wrong ledger: {c:?}"));
        }
        jobs = all.len();
    }
    // 48 jobs a day, each its own id.
    if jobs != (DAYS * 48) as usize {
        return Err(format!("wrong ledger: {jobs} jobs, expected {}", DAYS * 48));
    }
    let worst = times.iter().copied().fold(0.0, f64::max);
    let med = median(&mut times);
    println!(
        "  badput ledger, {jobs} jobs, by week and account: median {med:6.1} ms, worst {worst:6.1} ms {}",
        if worst < GOAL_MS { "(goal < 250 ms: met)" } else { "(goal < 250 ms: NOT met)" },
    );
    Ok((med, worst))
}

/// `/reliability` over the 90 days: (median, worst, median of the store's reads) in ms.
async fn measure_reliability(
    url: &str,
    history: &[server::live::StoreWrite],
) -> Result<(f64, f64, f64), String> {
    let store = Store::connect(url)
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let began = Instant::now();
    for w in history {
        w.write_to(&store).await.map_err(|e| e.to_string())?;
    }
    println!(
        "  wrote {} history rows (90 days of jobs, XIDs, steps, outages) in {:.1} s",
        history.len(),
        began.elapsed().as_secs_f64()
    );
    let inv = server::sim::layout(512, "bench");
    let q = ReportQuery::from_pairs([
        ("period", "custom"),
        ("from", "2026-09-01"),
        ("to", "2026-11-29"),
        ("group", "account"),
    ])?;
    let now = START + DAYS * 24 * HOUR;
    let (from, to) = q.window(now)?;
    let (mut times, mut reads, mut pure) = (Vec::new(), Vec::new(), Vec::new());
    let mut total = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        let (r, _, _) = server::reliability::build(&store, &inv, &q, now)
            .await
            .map_err(|e| e.to_string())?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        total = r.total;
        let t = Instant::now();
        let h = server::reliability::History::load(&store, from, to)
            .await
            .map_err(|e| e.to_string())?;
        reads.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        let again = server::reliability::assemble(&h, &inv, &q, from, to, now);
        pure.push(t.elapsed().as_secs_f64() * 1000.0);
        if again.total != total {
            return Err("the answer changed between runs".into());
        }
    }
    let expected = (DAYS * 12) as u32;
    if total != expected {
        return Err(format!(
            "wrong answer: {total} interruptions, expected {expected}"
        ));
    }
    measure_ledger(&store, from, to).await?;
    let worst = times.iter().copied().fold(0.0, f64::max);
    let (med, read, attr) = (median(&mut times), median(&mut reads), median(&mut pure));
    println!(
        "  reliability, {total} interruptions: median {med:6.1} ms, worst {worst:6.1} ms {}; of which the store's reads {read:5.1} ms, attribution and rates {attr:5.1} ms (medians)",
        if worst < GOAL_MS { "(goal < 250 ms: met)" } else { "(goal < 250 ms: NOT met)" },
    );
    Ok((med, worst, read))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn measure(
    url: &str,
    hours: &[Vec<ReportDelta>],
) -> Result<Vec<(GroupBy, f64, f64)>, String> {
    let store = Store::connect(url)
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let began = Instant::now();
    for d in hours {
        store
            .add_report_deltas(d)
            .await
            .map_err(|e| e.to_string())?;
    }
    let rows: usize = hours.iter().map(Vec::len).sum();
    println!(
        "  wrote {rows} hourly group rows (90 days) in {:.1} s",
        began.elapsed().as_secs_f64()
    );
    let rates = Rates::default();
    let now = START + DAYS * 24 * HOUR;
    let mut out = Vec::new();
    for g in GroupBy::ALL {
        let q = ReportQuery::from_pairs([
            ("period", "custom"),
            ("from", "2026-09-01"),
            ("to", "2026-11-29"),
            ("group", g.as_str()),
        ])?;
        let mut times = Vec::with_capacity(RUNS);
        let mut groups = 0;
        for _ in 0..RUNS {
            let t = Instant::now();
            let r = server::reports::build(&store, &q, now, &rates, 4096)
                .await
                .map_err(|e| e.to_string())?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            groups = r.rows.len();
            if (r.total.usage.capacity_gh - 4096.0 * 24.0 * 90.0).abs() > 1.0 {
                return Err(format!(
                    "wrong report: {} GPU-hours, expected {}",
                    r.total.usage.capacity_gh,
                    4096 * 24 * 90
                ));
            }
            // The counters' rises, but the first hour's (no counter before it: estimated).
            let want_kwh = 4096.0 * 0.62 * 24.0 * 90.0;
            let u = &r.total.usage;
            if (u.gpu_energy_kwh - want_kwh).abs() > 1.0
                || (u.energy_estimated_kwh - 4096.0 * 0.62).abs() > 1.0
            {
                return Err(format!(
                    "wrong energy: {} kWh ({} estimated), expected {want_kwh}",
                    u.gpu_energy_kwh, u.energy_estimated_kwh
                ));
            }
        }
        let worst = times.iter().copied().fold(0.0, f64::max);
        let med = median(&mut times);
        // The peer: the same group sums read from the hourly rows (an end bound that is not
        // a whole day makes the store use them), as a report without daily rollups would.
        let (from, to) = q.window(now)?;
        let mut daily = Vec::new();
        let mut hourly = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            store
                .report_groups(g.as_str(), from, to)
                .await
                .map_err(|e| e.to_string())?;
            daily.push(t.elapsed().as_secs_f64() * 1000.0);
            let t = Instant::now();
            store
                .report_groups(g.as_str(), from, to - 1)
                .await
                .map_err(|e| e.to_string())?;
            hourly.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        let (d, h) = (median(&mut daily), median(&mut hourly));
        println!(
            "  by {:<9} {groups:>4} groups: median {med:6.1} ms, worst {worst:6.1} ms {}; sums from days {d:5.1} ms vs hours {h:6.1} ms ({:.0}x)",
            g.as_str(),
            if worst < GOAL_MS { "(goal < 250 ms: met)" } else { "(goal < 250 ms: NOT met)" },
            h / d.max(0.001)
        );
        out.push((g, med, worst));
    }
    Ok(out)
}

/// 90 days of 1,000 job starts a day with Slurm's first and last estimates, then the last
/// seven days' accuracy per partition as `GET /api/jobs/estimates` works it out: the
/// store's read and the quantiles, 7 runs; (median, worst) in ms.
async fn measure_estimates(url: &str) -> Result<(f64, f64), String> {
    let store = Store::connect(url)
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let began = Instant::now();
    let per_day = 1_000u64;
    for day in 0..DAYS as u64 {
        for k in 0..per_day {
            let start = START + (day * 86_400_000 + k * 86_400) as i64;
            let wait = ((k * 7_919) % 7_200) as i64 * 1_000;
            store
                .put_start_estimate(&server::store::StartEstimate {
                    job_id: 10_000_000 + day * per_day + k,
                    partition: ["gpu", "long", "debug"][(k % 3) as usize].into(),
                    first_seen_ms: start - wait,
                    first_est_ms: start - wait / 2 + ((k % 11) as i64 - 5) * 60_000,
                    last_est_ms: start + ((k % 5) as i64 - 2) * 30_000,
                    start_ms: start,
                })
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    println!(
        "  wrote {} start estimates (90 days) in {:.1} s",
        per_day * DAYS as u64,
        began.elapsed().as_secs_f64()
    );
    let now = START + DAYS * 24 * HOUR;
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = Instant::now();
        let runs = store
            .start_estimates_since(now - 7 * 86_400_000)
            .await
            .map_err(|e| e.to_string())?;
        let parts = app::queue::accuracy(runs.iter().map(|r| {
            (
                r.partition.as_str(),
                r.first_est_ms,
                r.last_est_ms,
                r.start_ms,
            )
        }));
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        let n: u64 = parts.iter().map(|p| p.jobs).sum();
        if n != 7 * per_day {
            return Err(format!(
                "estimates: {n} runs judged, expected {}",
                7 * per_day
            ));
        }
    }
    let worst = times.iter().copied().fold(0.0, f64::max);
    let med = median(&mut times);
    println!(
        "  start estimates, last 7 days of 90 ({} runs): median {med:.1} ms, worst {worst:.1} ms {}",
        7 * per_day,
        if worst < GOAL_MS { "(goal < 250 ms: met)" } else { "(goal < 250 ms: NOT met)" }
    );
    Ok((med, worst))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        eprintln!("usage: bench_reports SQLITE_URL [POSTGRES_URL]");
        return std::process::ExitCode::FAILURE;
    }
    let t = Instant::now();
    let hours = hours_of_deltas();
    println!(
        "90 days x 4,096 GPUs through the accumulator (one tick per hour): {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let history = reliability_history();
    let mut results = Vec::new();
    let mut reliability = Vec::new();
    for url in &args {
        let name = if url.starts_with("sqlite") {
            "SQLite"
        } else {
            "PostgreSQL"
        };
        println!("{name}:");
        match measure(url, &hours).await {
            Ok(r) => results.push((name, r)),
            Err(e) => {
                eprintln!("{name}: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
        match measure_reliability(url, &history).await {
            Ok(r) => reliability.push((name, r)),
            Err(e) => {
                eprintln!("{name}: reliability: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
        if let Err(e) = measure_estimates(url).await {
            eprintln!("{name}: estimates: {e}");
            return std::process::ExitCode::FAILURE;
        }
    }
    if let [(a, ra), (b, rb)] = reliability.as_slice() {
        println!("{b} / {a}, reliability medians: {:.2}x", rb.0 / ra.0);
    }
    if let [(a, ra), (b, rb)] = results.as_slice() {
        let sa: f64 = ra.iter().map(|x| x.1).sum();
        let sb: f64 = rb.iter().map(|x| x.1).sum();
        println!("{b} / {a}, sum of medians: {:.2}x", sb / sa);
    }
    std::process::ExitCode::SUCCESS
}
