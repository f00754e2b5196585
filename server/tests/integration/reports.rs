//! Reports against a scenario whose every GPU-hour is known: two hours of a 4-node,
//! 32-GPU cluster with a busy job that throttles and then fails, a job idle for its first
//! 20 minutes, a drained node and free GPUs. The ticks go through the same accumulator the
//! live sources use, into a real database (SQLite and PostgreSQL), and out through the
//! report, its CSV and its HTTP routes, where the exact expected hours and costs are checked.

use std::sync::Arc;

use app::model::{
    Cooling, Gpu, GpuReading, Inventory, Job, JobState, Node, NodeState, Rack, ThrottleReasons,
};
use app::reports::{Rates, ReportQuery, UNALLOCATED};
use server::reports::Accumulator;
use server::store::Store;
use server::telemetry::{NodeReading, Readings};

use crate::support;

/// 2026-11-20 00:00 UTC: a day of its own (the test server's simulator runs on the 29th).
const T0: i64 = 1_795_132_800_000;
const MIN: i64 = 60_000;

fn inventory() -> Arc<Inventory> {
    // Each rack in a hall of its own (H1, H2), as a fleet's layout would place them.
    let rack = |name: &str| Rack {
        name: name.into(),
        row: name.to_uppercase(),
        hall: format!("H{}", &name[1..]),
        pod: None,
        position: 0,
        power_limit_watts: 40_000.0,
        cooling: Cooling::Air,
        inlet_limit_celsius: 35.0,
        coolant_flow_min_lpm: None,
        coolant_delta_t_max_celsius: None,
        chassis_serial: None,
        power_shelves: None,
        power_shelves_redundant: 0,
        switch_trays: None,
    };
    let node = |i: u32, rack: &str, leaf: &str| Node {
        name: format!("n{i}"),
        rack: rack.into(),
        u_position: i * 4,
        u_height: 4,
        gpus: (0..8)
            .map(|g| Gpu {
                index: g,
                uuid: format!("GPU-{i}-{g}"),
                model: "H100".into(),
                max_power_watts: 700.0,
            })
            .collect(),
        domains: vec![leaf.into()],
    };
    Arc::new(Inventory {
        cluster: "t".into(),
        halls: ["H1", "H2"]
            .map(|h| app::model::Hall {
                name: h.into(),
                power_feed_watts: None,
            })
            .into(),
        rows: vec!["R1".into(), "R2".into()],
        racks: vec![rack("r1"), rack("r2")],
        nodes: vec![
            node(1, "r1", "leaf1"),
            node(2, "r1", "leaf1"),
            node(3, "r2", "leaf2"),
            node(4, "r2", "leaf2"),
        ],
        domains: Vec::new(),
    })
}

fn job(id: u64, account: &str, user: &str, nodes: &[&str]) -> Job {
    Job {
        id,
        name: "train".into(),
        user: user.into(),
        account: account.into(),
        partition: "gpu".into(),
        state: JobState::Running,
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        gpus: 8 * nodes.len() as u32,
        submit_ms: T0,
        start_ms: Some(T0),
        end_ms: None,
    }
}

/// The readings of minute `k` (1..=120): what the cluster did during the minute before.
fn tick(k: i64) -> Readings {
    let job1_running = k <= 90;
    let mut gpus = Vec::new();
    for n in 1..=4 {
        for g in 0..8u32 {
            let mut r = GpuReading {
                node: format!("n{n}"),
                index: g,
                power_watts: Some(500.0),
                sm_clock_mhz: Some(1980.0),
                sm_active_ratio: Some(0.9),
                throttle: Some(ThrottleReasons(0)),
                ..GpuReading::default()
            };
            // Job 2 on n3 sits idle for its first 20 minutes.
            if n == 3 && k <= 20 {
                r.sm_active_ratio = Some(0.01);
            }
            // Minutes 31-40: four GPUs of n1 slowed by a quarter (HW slowdown).
            if n == 1 && g < 4 && (31..=40).contains(&k) {
                r.throttle = Some(ThrottleReasons(ThrottleReasons::HW_SLOWDOWN));
                r.sm_clock_mhz = Some(1485.0);
            }
            // Free GPUs after job 1 failed: idle, but they are not allocated.
            if n <= 2 && !job1_running {
                r.sm_active_ratio = Some(0.0);
            }
            gpus.push(r);
        }
    }
    let mut jobs = vec![job(2, "vision", "bob", &["n3"])];
    if job1_running {
        jobs.push(job(1, "nlp", "alice", &["n1", "n2"]));
    }
    let state = |n: u32| match n {
        4 => NodeState::Drained,
        1 | 2 if job1_running => NodeState::Allocated,
        3 => NodeState::Allocated,
        _ => NodeState::Idle,
    };
    Readings {
        at_ms: T0 + k * MIN,
        gpus,
        nodes: (1..=4)
            .map(|n| NodeReading::silent(format!("n{n}"), state(n)))
            .collect(),
        jobs,
        ..Readings::default()
    }
}

/// Rates that make the arithmetic easy: 1 per GPU-hour of capital, 0.5 per kWh at PUE 1,
/// 1 per rack-hour of overhead, 2 per cloud GPU-hour.
fn rates() -> Rates {
    Rates {
        currency: "EUR".into(),
        gpu_capex: 4.0 * 8760.0,
        amortization_years: 4.0,
        power_price_per_kwh: 0.5,
        pue: 1.0,
        rack_overhead_per_month: 730.0,
        cloud_gpu_hour: 2.0,
        idle_below_sm: 0.05,
        grid_kg_co2_per_kwh: 0.25,
    }
}

/// Plays the scenario into `store` through the live sources' accumulator.
async fn play(store: &Store) {
    let inv = inventory();
    let mut acc = Accumulator::new(rates().idle_below_sm);
    acc.observe(&inv, &tick(0), 0);
    for k in 1..=120 {
        if k == 91 {
            // Job 1 fails at 01:30, its last complete checkpoint ended at 01:00: 16 GPUs x
            // 30 min lost.
            let mut failed = job(1, "nlp", "alice", &["n1", "n2"]);
            failed.state = JobState::Failed;
            let lost = acc.job_lost(&failed, T0 + 90 * MIN, Some(T0 + 60 * MIN));
            assert!((lost - 16.0 * 1800.0).abs() < 1e-9, "{lost}");
        }
        let deltas = acc.observe(&inv, &tick(k), MIN);
        if !deltas.is_empty() {
            store.add_report_deltas(&deltas).await.expect("add");
        }
    }
    store.add_report_deltas(&acc.flush()).await.expect("last");
}

fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-6 * b.abs().max(1.0),
        "{what}: got {a}, expected {b}"
    );
}

fn day(group: &str) -> ReportQuery {
    ReportQuery::from_pairs([("period", "day"), ("at", "2026-11-20"), ("group", group)])
        .expect("query")
}

async fn story(url: String) {
    let store = Store::connect(&url).await.expect("connect");
    play(&store).await;
    let rates = rates();
    let now = T0 + 3 * 86_400_000;

    // The whole cluster: 32 GPUs for 2 h.
    let r = server::reports::build(&store, &day("account"), now, &rates, 32)
        .await
        .expect("report");
    assert_eq!((r.from_ms, r.to_ms), (T0, T0 + 86_400_000));
    let u = r.total.usage;
    close(u.capacity_gh, 64.0, "capacity");
    close(u.allocated_gh, 24.0 + 16.0, "allocated");
    close(u.idle_gh, 8.0 * 20.0 / 60.0, "idle");
    close(u.busy_gh, 24.0 + 8.0 * 100.0 / 60.0, "busy");
    // Two hours of the day have data, from its first hour; the day before has none.
    assert_eq!(r.coverage.covered_ms, Some(2 * 3_600_000));
    assert_eq!(r.coverage.first_ms, Some(T0));
    assert_eq!(
        r.coverage.words(false),
        "Data for 2 h 0 min of the period's 1 d 0 h (8%), from the hour of 2026-11-20 00:00 UTC: Gantry books only what it watched."
    );
    assert_eq!(r.previous, None);
    // The next day compares with this one: its own data none, the day before's whole.
    let next = ReportQuery::from_pairs([
        ("period", "day"),
        ("at", "2026-11-21"),
        ("group", "account"),
    ])
    .expect("query");
    let n = server::reports::build(&store, &next, now, &rates, 32)
        .await
        .expect("report");
    assert_eq!(n.coverage.first_ms, None);
    assert_eq!(n.coverage.words(false), "No data for the period yet.");
    let before = n.previous.expect("the day before");
    assert_eq!(before.key, "2026-11-20 00:00 UTC to 2026-11-21 00:00 UTC");
    close(
        before.usage.allocated_gh,
        40.0,
        "the day before's allocation",
    );
    close(u.free_gh, 16.0 * 0.5, "free");
    close(u.drained_gh, 16.0, "drained");
    close(u.down_gh, 0.0, "down");
    close(u.throttle_lost_gh, 4.0 * 0.25 * 10.0 / 60.0, "throttling");
    close(u.failure_lost_gh, 8.0, "failures");
    close(
        u.goodput_gh,
        40.0 - 8.0 * 20.0 / 60.0 - 4.0 * 0.25 / 6.0 - 8.0,
        "goodput",
    );
    close(u.energy_kwh, 4.0 * 4.0 * 2.0, "energy");
    // No energy counters in these readings: the GPUs' energy is their power, estimated.
    close(u.gpu_energy_kwh, 4.0 * 4.0 * 2.0, "GPU energy");
    close(u.energy_estimated_kwh, 4.0 * 4.0 * 2.0, "estimated");
    close(r.total.cost.co2_kg.unwrap_or(-1.0), 32.0 * 0.25, "CO2");
    // Capital 64 + power 32 kWh x 0.5 + 2 racks x 2 h of overhead.
    close(r.total.cost.capex, 64.0, "capex");
    close(r.total.cost.power, 16.0, "power");
    close(r.total.cost.overhead, 4.0, "overhead");
    close(r.total.cost.total, 84.0, "total cost");
    close(r.total.cost.cloud_same_hours, 80.0, "cloud");

    // Hourly rows (bounds within a day) and daily rows (whole days) hold the same sums.
    let hourly = store
        .report_groups("cluster", T0, T0 + 3 * 3_600_000)
        .await
        .expect("hourly");
    let daily = store
        .report_groups("cluster", T0, T0 + 86_400_000)
        .await
        .expect("daily");
    assert_eq!(hourly.len(), 1);
    close(
        hourly[0].1.capacity_gs,
        daily[0].1.capacity_gs,
        "hours and days",
    );
    close(
        hourly[0].1.failure_lost_gs,
        daily[0].1.failure_lost_gs,
        "hours and days",
    );
    let series = store
        .report_series("cluster", "all", T0, T0 + 86_400_000, 3_600_000)
        .await
        .expect("series");
    assert_eq!(
        series
            .iter()
            .map(|(t, _)| (t - T0) / 3_600_000)
            .collect::<Vec<_>>(),
        [0, 1, 2],
        "minutes 1-59, 60-119 and 120 of the scenario"
    );

    // By account: nlp, vision and the unallocated rest add up to the cluster.
    let by = |key: &str| {
        r.rows
            .iter()
            .chain(r.unallocated.iter())
            .find(|x| x.key == key)
            .unwrap_or_else(|| panic!("no row {key}: {:?}", r.rows))
            .clone()
    };
    assert_eq!(
        r.rows.iter().map(|x| x.key.as_str()).collect::<Vec<_>>(),
        ["nlp", "vision"],
        "largest cost first"
    );
    let nlp = by("nlp");
    close(nlp.usage.allocated_gh, 24.0, "nlp allocated");
    close(nlp.usage.idle_gh, 0.0, "nlp idle");
    close(nlp.usage.failure_lost_gh, 8.0, "nlp failures");
    close(nlp.usage.goodput_gh, 24.0 - 1.0 / 6.0 - 8.0, "nlp goodput");
    close(nlp.usage.energy_kwh, 12.0, "nlp energy");
    // 24 + 6 + 1.5 rack-hours; waste at 31.5 / 24 per GPU-hour.
    close(nlp.cost.total, 31.5, "nlp cost");
    close(nlp.cost.failures, 8.0 * 31.5 / 24.0, "nlp failure cost");
    close(
        nlp.cost.per_goodput_gh.expect("goodput"),
        31.5 / (24.0 - 1.0 / 6.0 - 8.0),
        "nlp cost per goodput hour",
    );
    let vision = by("vision");
    close(vision.usage.allocated_gh, 16.0, "vision allocated");
    close(vision.usage.idle_gh, 8.0 / 3.0, "vision idle");
    close(vision.cost.total, 21.0, "vision cost");
    close(
        vision.cost.idle,
        8.0 / 3.0 * 21.0 / 16.0,
        "vision idle cost",
    );
    let un = by(UNALLOCATED);
    close(un.usage.capacity_gh, 24.0, "unallocated hours");
    close(un.usage.drained_gh, 16.0, "unallocated drained");
    close(un.cost.total, 31.5, "unallocated cost");
    close(
        nlp.cost.total + vision.cost.total + un.cost.total,
        r.total.cost.total,
        "accounts sum to the cluster",
    );

    // By rack: r1 had job 1 and its failure, r2 the idle start and the drained node.
    let r = server::reports::build(&store, &day("rack"), now, &rates, 32)
        .await
        .expect("by rack");
    let rack = |k: &str| {
        r.rows
            .iter()
            .find(|x| x.key == k)
            .unwrap_or_else(|| panic!("no rack {k}"))
            .usage
    };
    close(rack("r1").allocated_gh, 24.0, "r1 allocated");
    close(rack("r1").free_gh, 8.0, "r1 free");
    close(rack("r1").failure_lost_gh, 8.0, "r1 failures");
    close(rack("r2").drained_gh, 16.0, "r2 drained");
    close(rack("r2").idle_gh, 8.0 / 3.0, "r2 idle");
    assert!(r.unallocated.is_none());
    // By hall: each the sum of its racks (here one each), to the cent.
    let h = server::reports::build(&store, &day("hall"), now, &rates, 32)
        .await
        .expect("by hall");
    for (hall, rack_name) in [("H1", "r1"), ("H2", "r2")] {
        let (a, b) = (
            h.rows.iter().find(|x| x.key == hall).expect("hall row"),
            r.rows
                .iter()
                .find(|x| x.key == rack_name)
                .expect("rack row"),
        );
        assert_eq!(a.usage, b.usage, "{hall}");
        close(a.cost.total, b.cost.total, hall);
    }
    // By user and by switch domain.
    let r = server::reports::build(&store, &day("user"), now, &rates, 32)
        .await
        .expect("by user");
    assert!(r.rows.iter().any(|x| x.key == "alice"));
    let r = server::reports::build(&store, &day("domain"), now, &rates, 32)
        .await
        .expect("by domain");
    let leaf2 = r.rows.iter().find(|x| x.key == "leaf2").expect("leaf2");
    close(leaf2.usage.capacity_gh, 32.0, "leaf2 capacity");

    // The charts: three, with titles, one point per hour of the day that has data.
    let r = server::reports::build(&store, &day("account"), now, &rates, 32)
        .await
        .expect("report");
    let names: Vec<&str> = r.charts.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["utilization", "goodput", "cost"]);
    for c in &r.charts {
        assert!(c.svg.starts_with("<svg"), "{}", c.name);
        assert!(c.svg.contains(&format!("<title>{}</title>", c.title)));
        assert!(c.title.contains("2026-11-20"), "{}", c.title);
    }
    assert!(r.charts[0].svg.contains("GPUs (mean)") && r.charts[0].svg.contains("drained"));
    assert!(r.charts[2].svg.contains("cost (EUR)") && r.charts[2].svg.contains("nlp"));

    // The CSV: a header, nlp, vision, unallocated, total, with the same numbers.
    let d = server::reports::data(&store, &day("account"), now, &rates)
        .await
        .expect("data");
    let csv = server::reports::csv(&d, &rates.currency);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 5, "{csv}");
    assert!(lines[0].starts_with("group,capacity_gpu_h") && lines[0].contains("total_EUR"));
    assert!(
        lines[1].starts_with("\"nlp\",24.000,24.000,"),
        "{}",
        lines[1]
    );
    assert!(
        lines[4].starts_with("\"(total)\",64.000,40.000,"),
        "{}",
        lines[4]
    );
    assert!(lines[4].contains(",84.000,"), "{}", lines[4]);

    // A week and a month hold the same hours; the next day has none.
    for (period, at) in [("week", "2026-11-22"), ("month", "2026-11-30")] {
        let q = ReportQuery::from_pairs([("period", period), ("at", at)]).expect("query");
        let r = server::reports::build(&store, &q, now, &rates, 32)
            .await
            .expect("report");
        close(r.total.usage.capacity_gh, 64.0, period);
    }
    let r = server::reports::build(
        &store,
        &day("account").clone_with_at("2026-11-21"),
        now,
        &rates,
        32,
    )
    .await
    .expect("empty day");
    assert_eq!(r.total.usage.capacity_gh, 0.0);
    assert!(r.rows.is_empty());

    // A bad question is an error in words: the last day before the first.
    let bad = ReportQuery::from_pairs([
        ("period", "custom"),
        ("from", "2026-11-20"),
        ("to", "2026-11-19"),
    ])
    .expect("q");
    let e = server::reports::build(&store, &bad, now, &rates, 32)
        .await
        .expect_err("backwards");
    assert!(e.to_string().contains("before the first"), "{e}");
    // A custom period without a last day ends today; without a first, it is that one day.
    let open = ReportQuery::from_pairs([("period", "custom"), ("from", "2026-11-20")]).expect("q");
    assert!(server::reports::build(&store, &open, now, &rates, 32)
        .await
        .is_ok());
    // A date that is not one is refused whichever period would use it.
    let junk = ReportQuery::from_pairs([("period", "day"), ("to", "2026-02-30")]).expect("q");
    assert!(server::reports::build(&store, &junk, now, &rates, 32)
        .await
        .is_err());
}

trait WithAt {
    fn clone_with_at(&self, at: &str) -> ReportQuery;
}

impl WithAt for ReportQuery {
    fn clone_with_at(&self, at: &str) -> ReportQuery {
        ReportQuery {
            at: Some(at.into()),
            ..self.clone()
        }
    }
}

#[tokio::test]
async fn reports_match_the_scenario_exactly_on_sqlite() {
    story(support::sqlite_url()).await;
}

#[tokio::test]
async fn reports_match_the_scenario_exactly_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    story(url).await;
}

/// Over HTTP: managers and admins read reports, CSV and chart downloads; viewers and
/// operators do not; a bad period is a 400 with the reason.
#[tokio::test]
async fn reports_over_http_are_for_managers() {
    let mut cfg = support::test_config(support::sqlite_url(), 16, 1.0, 200);
    cfg.auth.anonymous_read = false;
    cfg.reports = rates();
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    support::add_users(&r.store).await;
    play(&r.store).await;
    let q = "/api/reports?period=day&at=2026-11-20&group=account";

    let viewer = support::login(r.addr, "viewer1").await;
    let operator = support::login(r.addr, "operator1").await;
    for who in [&viewer, &operator] {
        let resp = support::get_with(r.addr, q, &[("cookie", who)]).await;
        assert_eq!(resp.status, 403, "{}", resp.text());
        let page = support::get_with(r.addr, "/reports", &[("cookie", who)]).await;
        assert_eq!(page.status, 403);
    }
    assert_eq!(support::get(r.addr, q).await.status, 401);

    let manager = support::login(r.addr, "manager1").await;
    let resp = support::get_with(r.addr, q, &[("cookie", &manager)]).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    let j = resp.json();
    let total = &j["total"]["usage"];
    close(
        total["capacity_gh"].as_f64().unwrap_or(0.0),
        64.0,
        "capacity",
    );
    close(
        total["failure_lost_gh"].as_f64().unwrap_or(0.0),
        8.0,
        "failures",
    );
    close(
        j["total"]["cost"]["total"].as_f64().unwrap_or(0.0),
        84.0,
        "cost",
    );
    assert_eq!(j["rates"]["currency"], "EUR");

    let csv = support::get_with(r.addr, &format!("{q}&format=csv"), &[("cookie", &manager)]).await;
    assert_eq!(csv.status, 200);
    assert!(csv
        .header("content-type")
        .is_some_and(|c| c.starts_with("text/csv")));
    assert!(csv
        .header("content-disposition")
        .is_some_and(|c| c.contains("gantry-report-account-2026-11-20-2026-11-20.csv")));
    assert!(csv.text().contains("\"nlp\",24.000,"));

    let admin = support::login(r.addr, "admin1").await;
    let png = support::get_with(
        r.addr,
        "/api/reports/charts/utilization.png?period=day&at=2026-11-20",
        &[("cookie", &admin)],
    )
    .await;
    assert_eq!(png.status, 200);
    assert_eq!(png.header("content-type"), Some("image/png"));
    assert!(
        png.body.starts_with(b"\x89PNG\r\n\x1a\n"),
        "a PNG signature"
    );
    let svg = support::get_with(
        r.addr,
        "/api/reports/charts/cost.svg?period=day&at=2026-11-20",
        &[("cookie", &admin)],
    )
    .await;
    assert_eq!(svg.status, 200);
    assert!(svg.text().contains("Cost by account"));
    let missing =
        support::get_with(r.addr, "/api/reports/charts/pie.svg", &[("cookie", &admin)]).await;
    assert_eq!(missing.status, 404);

    // The page renders on the server with the numbers in it.
    let page = support::get_with(
        r.addr,
        "/reports?period=day&at=2026-11-20&group=account",
        &[("cookie", &manager), ("accept", "text/html")],
    )
    .await;
    assert_eq!(page.status, 200);
    let html = page.text();
    assert!(html.contains("data-test=\"report-table\""), "no table");
    assert!(html.contains("EUR 84.00"), "total cost on the page");
    assert!(html.contains("<title>GPUs by state, 2026-11-20 to 2026-11-20 (UTC)</title>"));

    for bad in [
        "/api/reports?period=fortnight",
        "/api/reports?period=day&at=2026-02-30",
        "/api/reports?period=custom&from=2026-01-01&to=2027-12-31",
        "/api/reports?group=galaxy",
        "/api/reports?format=xls",
    ] {
        let resp = support::get_with(r.addr, bad, &[("cookie", &manager)]).await;
        assert_eq!(resp.status, 400, "{bad}: {}", resp.text());
        assert!(resp.json()["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }
    r.stop().await.expect("stop");
}

/// The simulator's ticks feed the report rollups: after a few simulated minutes the day's
/// report has every GPU's hours, and accounts plus the unallocated row add up to them.
#[tokio::test]
async fn the_live_simulator_feeds_reports() {
    // 120x: two simulated minutes per second, 16 nodes of 8 GPUs.
    let cfg = support::test_config(support::sqlite_url(), 16, 120.0, 250);
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    let q = ReportQuery::from_pairs([("period", "day"), ("group", "account")]).expect("q");
    let mut last = None;
    for _ in 0..60 {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        let now = r.live.source_now();
        let rep = server::reports::build(&r.store, &q, now, &Rates::default(), 0)
            .await
            .expect("report");
        if rep.total.usage.capacity_gh >= 128.0 * 3.0 / 60.0 {
            last = Some(rep);
            break;
        }
    }
    let rep = last.expect("three simulated minutes of 128 GPUs reach the report within 15 s");
    let u = rep.total.usage;
    let parts: f64 = rep
        .rows
        .iter()
        .chain(rep.unallocated.iter())
        .map(|x| x.usage.capacity_gh)
        .sum();
    close(
        parts,
        u.capacity_gh,
        "accounts and unallocated sum to the cluster",
    );
    close(
        u.allocated_gh + u.free_gh + u.drained_gh + u.down_gh,
        u.capacity_gh,
        "states partition the hours",
    );
    assert!(u.allocated_gh > 0.0 && u.energy_kwh > 0.0, "{u:?}");
    assert!(!rep.rows.is_empty(), "the simulator's jobs have accounts");
    r.stop().await.expect("stop");
}
