//! Reliability's truth test: four simulated days of a 32-node cluster with frequent faults
//! of every class, run through the pipeline (which finds the evidence in the readings as
//! it would in a real cluster's) into a real database (SQLite and PostgreSQL), then
//! attributed from the stored history and compared with the simulator's own causes.

use std::collections::HashMap;
use std::sync::Arc;

use app::reliability::Cause;
use server::live::{Live, Pipeline, StoreWrite};
use server::metrics::Metrics;
use server::sim::Sim;
use server::store::Store;

use crate::support;

/// 2026-11-10 00:00 UTC.
const T0: i64 = 1_794_268_800_000;
const TICK_MS: i64 = 60_000;
const DAYS: i64 = 4;

/// The history writes of the run, and the simulator at its end.
fn run() -> (Vec<StoreWrite>, Sim) {
    let mut sim = Sim::new(32, 5, "rel", T0);
    // 256 GPUs, a fault every 50 GPU-hours of runs.
    sim.set_fault_mean_gpu_hours(Some(50.0));
    let inventory = Arc::new(sim.inventory().clone());
    let live = Live::new(Arc::new(Metrics::default()));
    let mut pipeline = Pipeline::new(TICK_MS, 0.05);
    let mut writes = Vec::new();
    for tick in 1..=(DAYS * 86_400_000 / TICK_MS) {
        sim.advance_to(T0 + tick * TICK_MS);
        let mut frame = support::sim_frame(&mut sim, &inventory, TICK_MS);
        let step = pipeline.step(&mut frame, &live, sim.now_ms());
        writes.extend(step.writes.into_iter().filter(|w| {
            matches!(
                w,
                StoreWrite::Inventory(_)
                    | StoreWrite::Job { .. }
                    | StoreWrite::Checkpoint(_)
                    | StoreWrite::Xid { .. }
                    | StoreWrite::Evidence { .. }
                    | StoreWrite::NodeState { .. }
                    | StoreWrite::Report { .. }
            )
        }));
    }
    (writes, sim)
}

async fn check(url: &str, writes: &[StoreWrite], sim: &Sim) {
    let store = Store::connect(url).await.expect("store");
    // Attribution reads no rollups (the page's test below writes them too).
    for w in writes
        .iter()
        .filter(|w| !matches!(w, StoreWrite::Report { .. }))
    {
        w.write_to(&store).await.expect("write");
    }
    let to = T0 + DAYS * 86_400_000;
    let q = app::reports::ReportQuery {
        period: app::reports::Period::Custom,
        from: Some(app::units::date(T0)),
        to: Some(app::units::date(to - 1)),
        ..Default::default()
    };
    let (r, h, _) = server::reliability::build(&store, sim.inventory(), &q, to)
        .await
        .expect("reliability");
    let found = server::reliability::with_window(&h, sim.inventory(), T0, to).0;
    let truth = sim.interruptions();
    assert!(
        truth.len() > 80,
        "{} interruptions in four days",
        truth.len()
    );
    // Every class the simulator makes, there.
    for c in [
        Cause::Gpu,
        Cause::GpuMemory,
        Cause::Network,
        Cause::Host,
        Cause::Software,
        Cause::UserApplication,
    ] {
        assert!(truth.iter().any(|t| t.cause == c), "no {c:?} in the truth");
    }
    let by_key: HashMap<(u64, i64), Cause> = found
        .iter()
        .map(|i| ((i.job_id, i.at_ms), i.cause))
        .collect();
    assert_eq!(
        found.len(),
        truth.len(),
        "as many interruptions as happened"
    );
    let (mut with, mut with_right, mut without, mut without_unknown) = (0, 0, 0, 0);
    let mut wrong = Vec::new();
    for t in truth {
        let got = by_key.get(&(t.job, t.at_ms)).copied();
        if t.evidence {
            with += 1;
            if got == Some(t.cause) {
                with_right += 1;
            } else {
                wrong.push((t.job, t.cause, got));
            }
        } else {
            without += 1;
            without_unknown += usize::from(got == Some(Cause::Unknown));
        }
    }
    eprintln!(
        "{url}: {} interruptions; {with_right} of {with} with evidence attributed right, {without_unknown} of {without} without evidence unknown",
        truth.len()
    );
    assert!(
        with_right * 100 >= with * 95,
        "{with_right} of {with} attributed right; wrong: {wrong:?}"
    );
    assert_eq!(without_unknown, without, "no evidence: unknown");
    assert!(without > 0, "the truth has interruptions without evidence");
    // The page's answer agrees with the list and sums up.
    assert_eq!(r.total as usize, truth.len());
    assert_eq!(
        r.by_cause.iter().map(|c| c.count).sum::<u32>(),
        r.total,
        "causes sum to the total"
    );
    let host = r
        .by_cause
        .iter()
        .find(|c| c.cause == Cause::Host)
        .map_or(0, |c| c.count);
    assert!(host > 0);
    assert!(r.mtbi_hours_per_1000_gpus.is_some_and(|h| h > 0.0));
    assert!(r
        .by_size
        .iter()
        .any(|s| s.interruptions > 0 && s.mtbi_hours.is_some()));
    // The lemon (its GPU's double-bit ECC errors take down every job landing on it) is
    // ranked first, above nodes that had random faults at 40 times Llama 3's rate, and
    // marked for RMA.
    let lemons = sim.lemons();
    assert_eq!(lemons.len(), 1, "{lemons:?}");
    let first = r.lemons.first().expect("a ranking");
    assert_eq!(
        first.node,
        lemons[0],
        "{:?}",
        &r.lemons[..r.lemons.len().min(3)]
    );
    assert!(first.rma && first.jobs_taken_down >= 5, "{first:?}");
    if let Some(second) = r.lemons.get(1) {
        eprintln!(
            "{url}: lemon {} score {:.1}, next {} {:.1}",
            first.node, first.score, second.node, second.score
        );
    }
    // Nodes that stopped answering came back: repairs with a mean time.
    assert!(r
        .repairs
        .iter()
        .any(|n| n.repairs > 0 && n.mttr_hours.is_some()));
}

#[tokio::test]
async fn interruptions_are_attributed_as_the_simulator_caused_them_on_both_databases() {
    let (writes, sim) = run();
    check(&support::sqlite_url(), &writes, &sim).await;
    if let Some(pg) = support::postgres_url().await {
        check(&pg, &writes, &sim).await;
    }
}

/// The page and its CSV over HTTP, without JavaScript, on the history of the run above.
#[tokio::test]
async fn the_page_and_its_csv_show_the_attribution() {
    let (writes, sim) = run();
    let db = support::sqlite_url();
    {
        let store = Store::connect(&db).await.expect("store");
        for w in &writes {
            w.write_to(&store).await.expect("write");
        }
    }
    // The run's 32 nodes, so that the lemon's own page is there, starting two days after
    // the run ended: the lemon's trailing week still holds its faults, and the server's
    // own simulated history (its day before the start) stays out of the run's days.
    let mut cfg = support::test_config(db, 32, 1.0, 200);
    cfg.sim.start_ms = Some(T0 + (DAYS + 2) * 86_400_000);
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    support::add_users(&r.store).await;
    let to = T0 + DAYS * 86_400_000;
    let qs = format!(
        "period=custom&from={}&to={}&group=rack",
        app::units::date(T0),
        app::units::date(to - 1)
    );
    let truth = sim.interruptions();
    let gpu = truth.iter().filter(|t| t.cause == Cause::Gpu).count();
    let lemon = &sim.lemons()[0];
    // A job with at least two complete checkpoints.
    let mut saves: HashMap<u64, u32> = HashMap::new();
    for w in &writes {
        if let StoreWrite::Checkpoint(c) = w {
            if c.complete {
                *saves.entry(c.job_id).or_default() += 1;
            }
        }
    }
    let trained = saves
        .iter()
        .filter(|(_, n)| **n >= 2)
        .map(|(id, _)| *id)
        .min()
        .expect("a job that checkpointed");
    for who in ["operator1", "manager1"] {
        let cookie = support::login(r.addr, who).await;
        let page = support::get_with(
            r.addr,
            &format!("/reliability?{qs}"),
            &[("Accept", "text/html"), ("Cookie", &cookie)],
        )
        .await;
        assert_eq!(page.status, 200, "{who}");
        let html = page.text();
        assert!(html.contains("data-test=\"by-cause\""), "{who}: {html}");
        assert!(
            html.contains(&format!("{} interruptions", truth.len())),
            "{who}: the total"
        );
        // The GPU row's count, as rendered.
        let row = html
            .split("data-cause=\"gpu\"")
            .nth(1)
            .and_then(|s| s.split("<td class=\"num\">").nth(1))
            .and_then(|s| s.split('<').next())
            .unwrap_or("");
        assert_eq!(row.replace("<!>", ""), gpu.to_string(), "{who}: GPU count");
        // The lemon heads its table, marked.
        let table = html
            .split("data-test=\"lemons\"")
            .nth(1)
            .unwrap_or_default();
        let first_row = table.split("<tr data-node=\"").nth(1).unwrap_or_default();
        assert!(
            first_row.starts_with(&format!("{lemon}\" data-rma=\"true\"")),
            "{who}: {first_row}"
        );
        assert!(first_row.contains("RMA / deep diagnostics"));
        // The ledger, its jobs linked, its charts and its CSV.
        let ledger = html
            .split("data-test=\"ledger-jobs\"")
            .nth(1)
            .unwrap_or_default();
        assert!(ledger.contains("<a href=\"/jobs/"), "{who}: {ledger}");
        assert!(html.contains("data-test=\"ettr\">ETTR "), "{who}");
        for chart in ["ettr.svg", "ledger.png"] {
            let c = support::get_with(
                r.addr,
                &format!("/api/reliability/charts/{chart}?{qs}"),
                &[("Cookie", &cookie)],
            )
            .await;
            assert_eq!(c.status, 200, "{who}: {chart}");
        }
        let jobs = support::get_with(
            r.addr,
            &format!("/api/reliability?{qs}&format=csv&table=ledger_jobs"),
            &[("Cookie", &cookie)],
        )
        .await
        .text();
        assert!(
            jobs.starts_with("job_id,job,allocated_gpu_hours,ettr,"),
            "{jobs}"
        );
        assert!(
            jobs.lines().count() > 50,
            "{who}: {} job rows",
            jobs.lines().count()
        );
        let lemons = support::get_with(
            r.addr,
            &format!("/api/reliability?{qs}&format=csv&table=lemons"),
            &[("Cookie", &cookie)],
        )
        .await;
        assert_eq!(lemons.status, 200);
        assert!(
            lemons
                .text()
                .lines()
                .nth(1)
                .is_some_and(|l| l.starts_with(&format!("\"{lemon}\","))),
            "{}",
            lemons.text()
        );
        let csv = support::get_with(
            r.addr,
            &format!("/api/reliability?{qs}&format=csv&table=interruptions"),
            &[("Cookie", &cookie)],
        )
        .await;
        assert_eq!(csv.status, 200);
        assert!(csv
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/csv")));
        assert_eq!(csv.text().lines().count(), truth.len() + 1, "{who}: CSV");
        let bad = support::get_with(
            r.addr,
            &format!("/api/reliability?{qs}&format=csv&table=nope"),
            &[("Cookie", &cookie)],
        )
        .await;
        assert_eq!(bad.status, 400);
        assert!(bad.text().contains("unknown table"));
        // The lemon's page says so, from the last 30 days.
        let node = support::get_with(
            r.addr,
            &format!("/nodes/{lemon}"),
            &[("Accept", "text/html"), ("Cookie", &cookie)],
        )
        .await
        .text();
        assert!(node.contains("data-test=\"lemon-mark\""), "{who}: {node}");
        assert!(node.contains("jobs taken down"), "{who}");
        // A training job that saved checkpoints gets advice on its interval.
        let job = support::get_with(
            r.addr,
            &format!("/jobs/{trained}"),
            &[("Accept", "text/html"), ("Cookie", &cookie)],
        )
        .await
        .text();
        assert!(job.contains("data-test=\"advice-change\""), "{who}: {job}");
        assert!(
            job.contains("Mean time to interruption at its size"),
            "{who}"
        );
        // Its page books the same ETTR as the ledger's row for it, with its buckets.
        let row: Vec<&str> = jobs
            .lines()
            .find(|l| l.starts_with(&format!("\"{trained}\",")))
            .map(|l| l.split(',').collect())
            .unwrap_or_default();
        let want: f64 = row
            .get(3)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{who}: no ledger row for job {trained}"));
        let got: f64 = job
            .split("data-test=\"job-ettr\" data-ettr=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{who}: no ETTR on the job page"));
        assert!(
            (got - want).abs() < 1e-3,
            "{who}: page {got}, ledger {want}"
        );
        assert!(job.contains("data-test=\"job-ledger-buckets\""), "{who}");
        // And its energy: its nodes', its GPUs' from their counters, what power cost.
        let energy = job
            .split("data-test=\"job-energy\"")
            .nth(1)
            .and_then(|s| s.split("</dd>").next())
            .unwrap_or_else(|| panic!("{who}: no energy on the job page"));
        assert!(
            energy.contains(" kWh (GPUs ") && energy.contains(" USD"),
            "{who}: {energy}"
        );
        assert!(job.contains(">re-execution<"), "{who}: the buckets named");
    }
    // A node not marked has no mark on its page.
    let cookie = support::login(r.addr, "operator1").await;
    let now = r.live.source_now();
    let month = support::get_with(
        r.addr,
        &format!(
            "/api/reliability?period=custom&from={}&to={}",
            app::units::date(now - 29 * 86_400_000),
            app::units::date(now)
        ),
        &[("Cookie", &cookie)],
    )
    .await
    .json();
    let r_lemons: Vec<String> = month["lemons"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|l| l["rma"] == true)
        .filter_map(|l| l["node"].as_str().map(String::from))
        .collect();
    assert!(r_lemons.contains(lemon), "{r_lemons:?}");
    let healthy = r
        .live
        .inventory()
        .and_then(|inv| {
            inv.nodes
                .iter()
                .map(|n| n.name.clone())
                .find(|n| !r_lemons.iter().any(|l| l == n))
        })
        .expect("a node that is no lemon");
    let node = support::get_with(
        r.addr,
        &format!("/nodes/{healthy}"),
        &[("Accept", "text/html"), ("Cookie", &cookie)],
    )
    .await
    .text();
    assert!(node.contains("data-test=\"node-page\""), "{node}");
    assert!(!node.contains("data-test=\"lemon-mark\""), "{healthy}");
    r.stop().await.expect("stop");
}
