//! Why jobs wait, and the scheduler's health. On the simulator: every pending job's
//! category, Slurm reason and start estimate in `GET /api/jobs` match what the simulator's
//! scheduler holds it for (`/sim/truth`), and `/jobs` and the job page say so in words. On
//! the real Slurm (`cargo xtask test` starts it): its reasons and estimates, and `sdiag`.

use std::time::Duration;

use crate::slurm::{cluster, sbatch, slurm_config};
use crate::support::{self, get};

/// The category each of the simulator's reasons falls in.
fn kind_of(reason: &str) -> &'static str {
    match reason {
        "Resources" => "resources",
        "Priority" => "priority",
        "Dependency" => "dependency",
        "QOSMaxGRESPerUser" => "limit",
        "JobHeldUser" | "BeginTime" => "held",
        other => panic!("the simulator gave an unexpected reason {other}"),
    }
}

#[tokio::test]
async fn every_pending_job_says_why_it_waits_as_the_simulator_holds_it() {
    // A frozen simulation: the queue holds still between the reads.
    let cfg = support::test_config(support::sqlite_url(), 64, 1e-6, 300);
    let r = server::serve::start(cfg).await.expect("gantry");
    support::wait_ready(&r).await;
    let mut api = serde_json::Value::Null;
    for _ in 0..100 {
        api = get(r.addr, "/api/jobs").await.json();
        if api["waits"].as_object().is_some_and(|w| !w.is_empty()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let truth = get(r.addr, "/sim/truth").await.json();
    let pending = truth["truth"]["pending"]
        .as_array()
        .expect("pending")
        .clone();
    let waits = api["waits"].as_object().expect("waits");
    assert_eq!(waits.len(), pending.len(), "{api:#}");
    let mut kinds = std::collections::BTreeSet::new();
    for p in &pending {
        let id = p["job"].as_u64().expect("id").to_string();
        let w = &waits[&id];
        let reason = p["reason"].as_str().expect("reason");
        assert_eq!(w["reason"], reason, "job {id}");
        assert_eq!(w["kind"], kind_of(reason), "job {id}: {w:#}");
        assert_eq!(w["est_start_ms"], p["est_start_ms"], "job {id}");
        kinds.insert(kind_of(reason));
    }
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        ["dependency", "held", "limit", "priority", "resources"],
        "the backlog has each of Slurm's common waits"
    );
    // The evidence: the sweep's user runs two nodes' GPUs, its QOS's limit.
    let limited = waits
        .values()
        .find(|w| w["kind"] == "limit")
        .expect("a limited job");
    assert!(
        limited["words"]
            .as_str()
            .is_some_and(|w| w.contains("user grace runs 16 GPUs in 2 jobs now")),
        "{limited:#}"
    );
    let head = pending
        .iter()
        .find(|p| p["reason"] == "Resources")
        .expect("a job at the top");
    let head_id = head["job"].as_u64().expect("id");
    let words = waits[&head_id.to_string()]["words"]
        .as_str()
        .expect("words")
        .to_string();
    assert!(words.starts_with("Waiting for "), "{words}");

    // /jobs: one row per job with its category; the filter keeps only that category.
    let html = get(r.addr, "/jobs").await.text();
    let limit_rows = html.matches(r#"data-wait="limit""#).count();
    let limits = waits.values().filter(|w| w["kind"] == "limit").count();
    assert_eq!(limit_rows, limits, "{html}");
    let only = get(r.addr, "/jobs?wait=limit").await.text();
    assert_eq!(only.matches(r#"data-test="job-row""#).count(), limits);
    assert_eq!(only.matches(r#"data-wait="limit""#).count(), limits);
    // The job page says it in words, with Slurm's estimate in UTC.
    let page = get(r.addr, &format!("/jobs/{head_id}")).await.text();
    assert!(page.contains("Why it waits: GPUs"), "{page}");
    let est = head["est_start_ms"]
        .as_i64()
        .expect("the head has an estimate");
    let when = app::units::utc(est);
    assert!(
        page.contains(&format!("Slurm estimates {when}.")),
        "{when} in {page}"
    );
    // The scheduler's own health: the simulator's counters, its queue the truth's.
    let health = get(r.addr, "/api/scheduler").await.json();
    let h = &health["health"]["health"];
    assert_eq!(
        h["jobs_pending"], truth["truth"]["jobs_pending"],
        "{health:#}"
    );
    assert_eq!(
        h["jobs_running"], truth["truth"]["jobs_running"],
        "{health:#}"
    );
    assert!(
        h["main"]["count"].as_u64().is_some_and(|c| c > 0),
        "{health:#}"
    );
    assert!(h["backfilled_jobs"].as_u64().is_some(), "{health:#}");
    assert!(
        h["jobs_started"].as_u64() >= truth["truth"]["jobs_running"].as_u64(),
        "{health:#}"
    );
    assert_eq!(health["stale"], false);
    assert!(html.contains(r#"data-test="sched-health""#), "{html}");
    r.stop().await.expect("stop");
}

/// Why jobs wait on a real Slurm: a job held by its owner, one that follows it, one over
/// its partition's time limit, and one for a node another job holds: each in its category
/// in `GET /api/jobs`, and the last with the start Slurm's own answer estimates.
#[tokio::test]
async fn pending_jobs_say_why_they_wait_on_a_real_slurm() {
    use crate::support;
    if cluster().is_none() {
        return;
    }
    let (conf, mut cfg) = slurm_config();
    cfg.auth.anonymous_read = true;
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    let common = ["--chdir=/tmp", "--wrap", "sleep 600"];
    let batch = |extra: &[&str]| {
        let args: Vec<&str> = extra.iter().chain(common.iter()).copied().collect();
        sbatch(&conf, &args)
    };
    // gpu013: no other real-Slurm test asks for it.
    let holder = batch(&["-w", "gpu013", "--exclusive", "--time=10"]);
    let held = batch(&["-N1", "--hold", "--time=5"]);
    let follows = batch(&["-N1", &format!("--dependency=afterok:{held}"), "--time=5"]);
    let too_long = batch(&["-p", "debug", "-N1", "--time=02:00:00"]);
    let waits_for_node = batch(&["-w", "gpu013", "--exclusive", "--time=5"]);
    let _cancel = Scancel(
        conf.clone(),
        vec![holder, held, follows, too_long, waits_for_node],
    );
    let want = [
        (held, "held", "JobHeldUser"),
        (follows, "dependency", "Dependency"),
        (too_long, "limit", "PartitionTimeLimit"),
    ];
    let mut last = serde_json::Value::Null;
    let mut ok = false;
    // Backfill estimates starts every 30 s (bf_interval): up to a minute and a half.
    for _ in 0..180 {
        last = support::get(r.addr, "/api/jobs").await.json();
        let w = |id: u64| last["waits"][id.to_string()].clone();
        let fixed = want
            .iter()
            .all(|(id, kind, reason)| w(*id)["kind"] == *kind && w(*id)["reason"] == *reason);
        let node = w(waits_for_node);
        let est_ok = node["est_start_ms"].as_i64().is_some()
            && matches!(node["kind"].as_str(), Some("resources" | "priority"));
        if fixed && est_ok {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(ok, "{last:#}");
    // The estimate is Slurm's own: squeue's start_time for the job, read apart from Gantry,
    // the same before and after a poll of Gantry's that came after the first read (Slurm
    // moves its estimates as its schedulers run).
    let slurm_start = || {
        let out = std::process::Command::new("squeue")
            .args(["--json", "-j", &waits_for_node.to_string()])
            .env("SLURM_CONF", &conf)
            .output()
            .expect("squeue");
        let raw: serde_json::Value = serde_json::from_slice(&out.stdout).expect("squeue json");
        // 22.05's --json lists every job whatever the filter.
        raw["jobs"]
            .as_array()
            .and_then(|a| a.iter().find(|j| j["job_id"] == waits_for_node))
            .and_then(|j| j["start_time"].as_i64())
            .expect("start_time")
    };
    let mut compared = false;
    for _ in 0..20 {
        let (before, t0) = (slurm_start(), server::clock::wall_now_ms());
        tokio::time::sleep(Duration::from_millis(1200)).await;
        last = support::get(r.addr, "/api/jobs").await.json();
        if before != slurm_start() || last["polled_ms"].as_i64().unwrap_or(0) < t0 {
            continue;
        }
        let w = &last["waits"][waits_for_node.to_string()];
        assert_eq!(w["est_start_ms"].as_i64(), Some(before * 1000), "{w:#}");
        compared = true;
        break;
    }
    assert!(
        compared,
        "Slurm's estimate never held still for a comparison"
    );
    // The words name the dependency and the owner's way out.
    assert!(
        last["waits"][follows.to_string()]["words"]
            .as_str()
            .is_some_and(|s| s.contains(&format!("afterok:{held}"))),
        "{last:#}"
    );
    assert!(
        last["waits"][too_long.to_string()]["words"]
            .as_str()
            .is_some_and(|s| s.contains("its partition's run-time limit")),
        "{last:#}"
    );
    r.stop().await.expect("stop");
}

/// Cancels its jobs when dropped, whether the test passed or not.
struct Scancel(String, Vec<u64>);

impl Drop for Scancel {
    fn drop(&mut self) {
        let _ = std::process::Command::new("scancel")
            .args(self.1.iter().map(u64::to_string))
            .env("SLURM_CONF", &self.0)
            .status();
    }
}

/// The scheduler's health on a real Slurm: Gantry's `/api/scheduler` is slurmctld's own
/// `sdiag`, read by this test before and after Gantry's read: the same counting start and
/// thread count, RPC and cycle counts between the two, and Gantry's RPCs those of the user
/// it runs as.
#[tokio::test]
async fn the_scheduler_health_is_sdiags_on_a_real_slurm() {
    use crate::support;
    if cluster().is_none() {
        return;
    }
    let (conf, mut cfg) = slurm_config();
    cfg.auth.anonymous_read = true;
    cfg.slurm.diag_interval_ms = 1_000;
    let sdiag = || {
        let out = std::process::Command::new("sdiag")
            .env("SLURM_CONF", &conf)
            .output()
            .expect("sdiag");
        server::slurm::diag::parse_text(&String::from_utf8_lossy(&out.stdout)).expect("sdiag")
    };
    let before = sdiag();
    let t0 = server::clock::wall_now_ms();
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    let mut got = serde_json::Value::Null;
    for _ in 0..100 {
        got = support::get(r.addr, "/api/scheduler").await.json();
        if got["health"]["polled_ms"].as_i64().is_some_and(|p| p >= t0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = sdiag();
    let h = &got["health"]["health"];
    assert!(h.is_object(), "{got:#}");
    assert_eq!(h["since_ms"].as_i64(), after.since_ms, "{got:#}");
    assert_eq!(
        h["server_threads"].as_u64().is_some(),
        after.server_threads.is_some()
    );
    let between = |v: &serde_json::Value, lo: Option<u64>, hi: Option<u64>| {
        let v = v.as_u64().expect("a count");
        lo.is_some_and(|lo| lo <= v) && hi.is_some_and(|hi| v <= hi)
    };
    assert!(
        between(
            &h["rpcs_total"],
            Some(before.rpcs_total),
            Some(after.rpcs_total)
        ),
        "{} not in {}..{}",
        h["rpcs_total"],
        before.rpcs_total,
        after.rpcs_total
    );
    assert!(
        between(&h["main"]["count"], before.main.count, after.main.count),
        "{got:#}"
    );
    let me = server::slurm::cli::process_user().expect("a user");
    assert_eq!(h["gantry_user"], me.as_str());
    assert!(h["gantry_rpcs"].as_u64().is_some_and(|n| n > 0), "{got:#}");
    assert_eq!(got["stale"], false);
    let html = support::get(r.addr, "/jobs").await.text();
    assert!(html.contains(r#"data-test="sched-health""#), "{html}");
    r.stop().await.expect("stop");
}

/// Slurm's estimates against the starts that followed, on the simulator at speed: each
/// run that waited with an estimate is kept with its start, which is the start the job
/// history has; the estimate was in the future when first seen; `/api/jobs/estimates`
/// is the kept runs' errors per partition; `/jobs` shows them.
async fn estimates_are_judged_by_the_starts(url: String) {
    let cfg = support::test_config(url, 64, 600.0, 200);
    let r = server::serve::start(cfg).await.expect("gantry");
    support::wait_ready(&r).await;
    let mut runs = Vec::new();
    for _ in 0..600 {
        runs = r.store.start_estimates_since(0).await.expect("estimates");
        if runs.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(runs.len() >= 3, "{} runs kept with estimates", runs.len());
    for e in &runs {
        assert_eq!(e.partition, "gpu");
        let events = r.store.job_events(e.job_id).await.expect("events");
        assert!(
            events
                .iter()
                .any(|ev| ev.state == app::model::JobState::Running && ev.at_ms == e.start_ms),
            "job {} started at {} by its history: {events:?}",
            e.job_id,
            e.start_ms
        );
        assert!(e.first_est_ms >= e.first_seen_ms, "{e:?}");
    }
    let api = get(r.addr, "/api/jobs/estimates").await.json();
    let gpu = &api["partitions"][0];
    assert_eq!(gpu["partition"], "gpu", "{api:#}");
    let kept = r
        .store
        .start_estimates_since(api["since_ms"].as_i64().expect("since"))
        .await
        .expect("estimates");
    assert!(gpu["jobs"].as_u64() >= Some(runs.len() as u64), "{api:#}");
    assert!(gpu["jobs"].as_u64() <= Some(kept.len() as u64), "{api:#}");
    let html = get(r.addr, "/jobs").await.text();
    assert!(html.contains(r#"data-test="estimate-row""#), "{html}");
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn estimates_are_judged_by_the_starts_on_sqlite() {
    estimates_are_judged_by_the_starts(support::sqlite_url()).await;
}

#[tokio::test]
async fn estimates_are_judged_by_the_starts_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    estimates_are_judged_by_the_starts(url).await;
}

/// GPUs held idle on a real Slurm: a job on gpu012's eight GPUs, of which the exporters
/// the test serves show four at work and four idle with no memory in use, and a job on
/// gpu011 whose GPUs all work. Once the hold passes, `GET /api/jobs` names the first with
/// 4 of 8 and not the second, and `/jobs` lists it.
#[tokio::test]
async fn gpus_held_idle_on_a_real_slurm() {
    let Some(cli) = cluster() else {
        return;
    };
    let (conf, mut cfg) = slurm_config();
    let nodes = cli.nodes().await.expect("nodes");
    let inv = server::sources::slurm::inventory_from_nodes("truth", &nodes);
    let mut readings = crate::slurm::known_readings(&inv);
    for g in &mut readings.gpus {
        let idle = g.node == "gpu012" && g.index >= 4;
        g.fb_used_mib = Some(if idle { 0.0 } else { 70_000.0 });
        if idle {
            g.sm_active_ratio = Some(0.0);
            g.gpu_util_percent = Some(0.0);
        }
    }
    let exporters = crate::slurm::serve_exporters(inv, readings).await;
    crate::slurm::scrape_from(&mut cfg, exporters);
    cfg.alerts.idle_gpu_ms = 2_000;
    cfg.auth.anonymous_read = true;
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    let submit = |node: &str, name: &str| {
        sbatch(
            &conf,
            &[
                "-N1",
                "-w",
                node,
                "--gres=gpu:h100:8",
                "-p",
                "gpu",
                "--output=/dev/null",
                "-J",
                name,
                "--wrap",
                "sleep 120",
            ],
        )
    };
    let (idle_job, busy_job) = (
        submit("gpu012", "gantry-idle"),
        submit("gpu011", "gantry-busy"),
    );
    let mut got = serde_json::Value::Null;
    let mut found = None;
    for _ in 0..300 {
        got = get(r.addr, "/api/jobs").await.json();
        let running = |id: u64| {
            got["jobs"].as_array().is_some_and(|v| {
                v.iter()
                    .any(|j| j["job"]["id"] == id && j["job"]["state"] == "running")
            })
        };
        if let Some(h) = got["idle"]
            .as_array()
            .and_then(|v| v.iter().find(|h| h["job"] == idle_job))
        {
            if running(busy_job) {
                found = Some(h.clone());
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cancel = || {
        let _ = std::process::Command::new("scancel")
            .args([idle_job.to_string(), busy_job.to_string()])
            .env("SLURM_CONF", &conf)
            .status();
    };
    let Some(h) = found else {
        cancel();
        panic!("job {idle_job} not found holding GPUs idle: {got:#}");
    };
    assert_eq!(
        (h["gpus"].as_u64(), h["of"].as_u64()),
        (Some(4), Some(8)),
        "{h}"
    );
    assert!(h["gpu_hours"].as_f64().is_some_and(|x| x > 0.0), "{h}");
    assert!(
        got["idle"]
            .as_array()
            .is_some_and(|v| v.iter().all(|h| h["job"] != busy_job)),
        "{got:#}"
    );
    let html = get(r.addr, "/jobs").await.text();
    // The job page says what its ledger covers, from the start Slurm itself reports
    // (squeue's %S, in UTC), whether or not a minute is booked yet.
    let started = std::process::Command::new("squeue")
        .args(["-h", "-j", &idle_job.to_string(), "-o", "%S"])
        .env("SLURM_CONF", &conf)
        .env("TZ", "UTC")
        .output()
        .expect("squeue");
    let page = get(r.addr, &format!("/jobs/{idle_job}")).await.text();
    cancel();
    assert!(
        html.contains(&format!(r#"data-test="idle-row" data-job="{idle_job}""#)),
        "{html}"
    );
    let started = String::from_utf8_lossy(&started.stdout)
        .trim()
        .replace('T', " ");
    assert_eq!(started.len(), 19, "squeue's start: {started:?}");
    assert!(
        page.contains(&format!("first run from {} UTC", &started[..16])),
        "{started} in {page}"
    );
    assert!(
        page.contains("It has held ") || page.contains("Covers "),
        "{page}"
    );
    r.stop().await.expect("stop");
}

/// On a real Slurm, `/reports` says how much of the day has data: the cluster's booked
/// GPU-hours over the GPUs Slurm lists, from the hour Gantry began, on the page as in the
/// API; nothing before it started counts.
#[tokio::test]
async fn report_coverage_on_a_real_slurm() {
    let Some(cli) = cluster() else {
        return;
    };
    let (_conf, mut cfg) = slurm_config();
    let nodes = cli.nodes().await.expect("nodes");
    let inv = server::sources::slurm::inventory_from_nodes("truth", &nodes);
    let gpus = inv.gpu_count();
    assert!(gpus > 0, "Slurm lists GPUs");
    let readings = crate::slurm::known_readings(&inv);
    let exporters = crate::slurm::serve_exporters(inv, readings).await;
    crate::slurm::scrape_from(&mut cfg, exporters);
    let began = server::clock::wall_now_ms();
    let r = server::serve::start(cfg).await.expect("start");
    support::add_users(&r.store).await;
    support::wait_ready(&r).await;
    let cookie = support::login(r.addr, "manager1").await;
    let auth = [("Cookie", cookie.as_str())];
    // The rollups book a minute once it is over.
    let mut api = serde_json::Value::Null;
    for _ in 0..200 {
        api = support::get_with(r.addr, "/api/reports?period=day", &auth)
            .await
            .json();
        if api["coverage"]["covered_ms"].as_i64().unwrap_or(0) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let c: app::reports::Coverage =
        serde_json::from_value(api["coverage"].clone()).expect("coverage");
    let covered = c.covered_ms.expect("the cluster's size is known");
    let now = api["now_ms"].as_i64().expect("now");
    assert!(covered > 0, "{api:#}");
    // Booked GPU-hours over Slurm's GPUs, never more than Gantry has been running.
    let capacity = api["total"]["usage"]["capacity_gh"]
        .as_f64()
        .expect("capacity");
    assert_eq!(
        covered,
        (capacity / gpus as f64 * 3_600_000.0).round() as i64
    );
    assert!(
        covered <= now - began + 1_000,
        "{covered} ms in {} ms",
        now - began
    );
    // The hour it began booking: the hour it started (or the next, had it started in an
    // hour's last minute).
    let hour = began - began.rem_euclid(3_600_000);
    let first = c.first_ms.expect("a first hour");
    assert!(first == hour || first == hour + 3_600_000, "{api:#}");
    assert!(first <= now, "{api:#}");
    let page = support::get_with(r.addr, "/reports?period=day", &auth)
        .await
        .text();
    assert!(page.contains(&c.words(true)), "{} in {page}", c.words(true));
    r.stop().await.expect("stop");
}
