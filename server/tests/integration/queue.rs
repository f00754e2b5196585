//! Why jobs wait, on the simulator: every pending job's category, Slurm reason and start
//! estimate in `GET /api/jobs` match what the simulator's scheduler holds it for
//! (`/sim/truth`), and `/jobs` and the job page say so in words.

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
