//! Several replicas on one PostgreSQL, on the real Slurm of the tests: `gantry` (the
//! binary) twice on one database. Checked: one leader (the standby polls nothing and shows
//! the leader's state); an action taken on either replica shows on the other within 2 s;
//! the per-user action limit counts both; the leader killed with SIGKILL, and later one
//! stopped cleanly, is replaced within two poll intervals; across both leader changes the
//! cluster's report rollups hold every second exactly once, and each alert (every node's
//! exporters point at a closed port, so each target is down) is sent to the webhook
//! receiver once, never resolved and fired again. Node gpu014 is this test's.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::crash::{healthy, spawn, Gantry};
use crate::support::{self, add_users, login, metric, post_json};

const NODE: &str = "gpu014";
const POLL_MS: u64 = 1000;
/// The end of 2099, a whole UTC day: report sums up to it come from the daily rows.
const FAR_MS: i64 = 4_102_444_800_000;

async fn term(g: &Gantry) -> u64 {
    metric(g.addr, "gantry_leader_term").await
}

/// Waits until `f` holds, at most `within`; how long it took.
async fn until<F, Fut>(within: Duration, what: &str, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if f().await {
            return t0.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what}: not within {within:?}");
}

/// `gpu014` as a replica's `/api/nodes` shows it: whether it is drained, and the poll time.
async fn shows_drained(g: &Gantry) -> Option<(bool, i64)> {
    let r = support::get(g.addr, "/api/nodes").await;
    if r.status != 200 {
        return None;
    }
    let v = r.json();
    let polled = v["polled_ms"].as_i64()?;
    let n = v["nodes"]
        .as_array()?
        .iter()
        .find(|n| n["name"] == NODE)?
        .clone();
    let raw: Vec<String> = n["raw_state"]
        .as_array()?
        .iter()
        .filter_map(|s| s.as_str().map(str::to_uppercase))
        .collect();
    Some((raw.iter().any(|s| s.starts_with("DRAIN")), polled))
}

async fn cluster_capacity_gs(store: &server::store::Store) -> f64 {
    store
        .report_groups("cluster", 0, FAR_MS)
        .await
        .expect("report sums")
        .into_iter()
        .map(|(_, s)| s.capacity_gs)
        .sum()
}

async fn act(g: &Gantry, cookie: &str, drain: bool) -> u16 {
    let (path, body) = if drain {
        (
            "/api/actions/drain?wait=20",
            json!({"nodes": [NODE], "reason": "replica test"}),
        )
    } else {
        ("/api/actions/resume?wait=20", json!({"nodes": [NODE]}))
    };
    post_json(g.addr, path, Some(cookie), &body).await.status
}

fn terminate(g: &mut Gantry) {
    let _ = Command::new("kill")
        .args(["-TERM", &g.child.id().to_string()])
        .status();
    let _ = g.child.wait();
}

fn wall_ms() -> i64 {
    server::clock::wall_now_ms()
}

#[tokio::test]
async fn replicas_share_one_cluster_and_take_over_without_gap_or_double_count() {
    let Ok(conf) = std::env::var("GANTRY_TEST_SLURM_CONF") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "GANTRY_TEST_SLURM_CONF must be set in CI"
        );
        eprintln!("GANTRY_TEST_SLURM_CONF not set: replica test skipped (run `cargo xtask test`)");
        return;
    };
    let Some(db) = support::postgres_url().await else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("gantry-replicas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.join("gantry.toml");
    let (hook, got) = crate::alerts::receiver().await;
    // Port 9 (discard) is closed here: every target fails at once.
    std::fs::write(
        &config,
        format!(
            "source = \"slurm\"\ngpu_exporter_url = \"http://127.0.0.1:9/{{node}}/dcgm\"\n\
             bmc_exporter_url = \"http://127.0.0.1:9/{{node}}/bmc\"\nscrape_interval_ms = 1000\n\
             [slurm]\nconf = \"{conf}\"\npoll_interval_ms = {POLL_MS}\ntimeout_ms = 3000\n\
             [auth]\nanonymous_read = true\nactions_per_minute = 6\n[alerts]\nwebhook_url = \"{hook}\"\n"
        ),
    )
    .expect("config");
    let deliveries = |event: &str| -> std::collections::BTreeMap<String, usize> {
        let mut m = std::collections::BTreeMap::new();
        for v in got.lock().expect("lock").iter() {
            if v["event"] == event && v["rule"] == "target_down" {
                *m.entry(v["subject"].as_str().unwrap_or("").to_string())
                    .or_default() += 1;
            }
        }
        m
    };
    let store = server::store::Store::connect(&db).await.expect("store");
    add_users(&store).await;
    let _ = Command::new("scontrol")
        .args(["update", &format!("NodeName={NODE}"), "State=RESUME"])
        .env("SLURM_CONF", &conf)
        .output();
    let (log_a, log_b) = (dir.join("a.log"), dir.join("b.log"));
    let logs = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();

    let mut a = spawn(&config, &db, &log_a);
    healthy(&mut a, &log_a).await;
    until(Duration::from_secs(10), "A leads", || async {
        term(&a).await > 0
    })
    .await;
    // Each node's two exporters down: 32 alerts, each sent once.
    until(
        Duration::from_secs(20),
        "32 target_down alerts sent",
        || async { deliveries("firing").len() >= 32 },
    )
    .await;
    let mut b = spawn(&config, &db, &log_b);
    healthy(&mut b, &log_b).await;

    // B stands by: it polls nothing, yet shows the leader's polls within an interval.
    until(
        Duration::from_secs(10),
        "B shows the leader's state",
        || async { shows_drained(&b).await.is_some() },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(3 * POLL_MS)).await;
    assert_eq!(term(&b).await, 0, "B leads too: {}", logs(&log_b));
    let h = support::get(b.addr, "/healthz").await.json();
    assert_eq!(
        (h["role"].as_str(), h["term"].as_u64()),
        (Some("standby"), Some(0))
    );
    let h = support::get(a.addr, "/healthz").await.json();
    assert_eq!(h["role"], "leader");
    assert_eq!(
        metric(b.addr, "gantry_slurm_polls_total").await,
        0,
        "B polled Slurm"
    );
    let (_, polled_a) = shows_drained(&a).await.expect("A's nodes");
    let (_, polled_b) = shows_drained(&b).await.expect("B's nodes");
    assert!(
        // Within a poll, and the replication's own read on a loaded machine (CI saw
        // 1,024 ms once).
        (polled_a - polled_b).abs() <= 2 * POLL_MS as i64,
        "B shows a poll {} ms from A's",
        polled_a - polled_b
    );

    // An action on the standby shows on the leader within 2 s, and back.
    let op_a = login(a.addr, "operator1").await;
    let op_b = login(b.addr, "operator1").await;
    assert_eq!(act(&b, &op_b, true).await, 200, "drain on B");
    let seen_a = until(Duration::from_secs(2), "B's drain on A's pages", || async {
        shows_drained(&a).await.is_some_and(|(d, _)| d)
    })
    .await;
    assert_eq!(act(&a, &op_a, false).await, 200, "resume on A");
    let seen_b = until(
        Duration::from_secs(2),
        "A's resume on B's pages",
        || async { shows_drained(&b).await.is_some_and(|(d, _)| !d) },
    )
    .await;

    // The per-user limit (6 a minute) counts the actions of both replicas.
    for (k, (g, c)) in [(&b, &op_b), (&a, &op_a), (&b, &op_b), (&a, &op_a)]
        .into_iter()
        .enumerate()
    {
        assert_eq!(act(g, c, k % 2 == 0).await, 200, "action {} of 6", k + 3);
    }
    assert_eq!(
        act(&b, &op_b, true).await,
        429,
        "the 7th action in a minute"
    );

    // Two drains of one node at once, one on each replica: they take turns (one drains,
    // the other finds it drained), whoever leads.
    let (op2_a, op2_b) = (
        login(a.addr, "operator2").await,
        login(b.addr, "operator2").await,
    );
    let body = json!({"nodes": [NODE], "reason": "both at once"});
    let (x, y) = tokio::join!(
        post_json(a.addr, "/api/actions/drain?wait=20", Some(&op2_a), &body),
        post_json(b.addr, "/api/actions/drain?wait=20", Some(&op2_b), &body)
    );
    assert_eq!(
        (x.status, y.status),
        (200, 200),
        "{} / {}",
        x.text(),
        y.text()
    );
    let mut ends: Vec<String> = [&x, &y]
        .iter()
        .map(|r| {
            r.json()["outcomes"][0]["status"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    ends.sort();
    assert_eq!(ends, ["already", "ok"], "{} / {}", x.text(), y.text());
    assert_eq!(act(&a, &op2_a, false).await, 200, "resume");

    // Reports flush once a minute: wait for the leader's first, then kill it.
    until(Duration::from_secs(75), "reports accounted", || async {
        store.lease().await.is_ok_and(|l| l.accounted_ms.is_some())
    })
    .await;
    a.child.kill().expect("kill -9");
    let _ = a.child.wait();
    let killed = Instant::now();
    let killed_ms = wall_ms();
    let a1 = store
        .lease()
        .await
        .expect("lease")
        .accounted_ms
        .expect("accounted");
    let s1 = cluster_capacity_gs(&store).await;
    until(Duration::from_secs(5), "B leads", || async {
        term(&b).await > 0
    })
    .await;
    until(Duration::from_secs(5), "B polls", || async {
        shows_drained(&b).await.is_some_and(|(_, p)| p > killed_ms)
    })
    .await;
    let after_kill = killed.elapsed();

    // A again, standing by; B stopped cleanly gives the lease up at once.
    let mut a = spawn(&config, &db, &log_a);
    healthy(&mut a, &log_a).await;
    tokio::time::sleep(Duration::from_millis(2 * POLL_MS)).await;
    assert_eq!(term(&a).await, 0, "A leads beside B: {}", logs(&log_a));
    let stopping = Instant::now();
    let stopping_ms = wall_ms();
    terminate(&mut b);
    until(Duration::from_secs(5), "A leads again", || async {
        term(&a).await > 0
    })
    .await;
    until(Duration::from_secs(5), "A polls", || async {
        shows_drained(&a)
            .await
            .is_some_and(|(_, p)| p > stopping_ms)
    })
    .await;
    let after_stop = stopping.elapsed();
    tokio::time::sleep(Duration::from_millis(3 * POLL_MS)).await;
    terminate(&mut a);
    let a2 = store
        .lease()
        .await
        .expect("lease")
        .accounted_ms
        .expect("accounted");
    let s2 = cluster_capacity_gs(&store).await;
    let nodes = server::slurm::cli::Cli::new(
        None,
        vec![("SLURM_CONF".into(), conf.clone())],
        Duration::from_secs(5),
    );
    let gpus: u32 = server::scheduler::Scheduler::nodes(&nodes)
        .await
        .expect("nodes")
        .iter()
        .filter_map(|n| n.gpus_total)
        .sum();
    let expected = f64::from(gpus) * (a2 - a1) as f64 / 1000.0;
    eprintln!(
        "replicas: an action on one seen on the other in {seen_a:?} and {seen_b:?}; after kill -9 \
         the standby polled in {after_kill:?}, after a clean stop in {after_stop:?}; reports across \
         both: {:.1} GPU-seconds added over {} ms, expected {expected:.1}",
        s2 - s1,
        a2 - a1
    );
    assert!(
        after_kill <= Duration::from_millis(2 * POLL_MS),
        "takeover after kill -9 took {after_kill:?}"
    );
    assert!(
        after_stop <= Duration::from_millis(2 * POLL_MS),
        "takeover after a clean stop took {after_stop:?}"
    );
    assert!(
        (s2 - s1 - expected).abs() < 1e-6 * expected.max(1.0),
        "reports across the leader changes: {} GPU-seconds, expected {expected} ({gpus} GPUs over \
         {} ms): a gap or a double count",
        s2 - s1,
        a2 - a1
    );
    // Through both leader changes, every alert was sent once and never resolved.
    let fired = deliveries("firing");
    assert_eq!(fired.len(), 32, "{fired:?}");
    assert!(
        fired.values().all(|n| *n == 1),
        "alerts sent more than once across leader changes: {fired:?}"
    );
    assert_eq!(
        deliveries("resolved"),
        Default::default(),
        "alerts resolved by a new leader that had not looked yet"
    );
    let _ = Command::new("scontrol")
        .args(["update", &format!("NodeName={NODE}"), "State=RESUME"])
        .env("SLURM_CONF", &conf)
        .output();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A term's report writes are refused once another replica holds a newer term, and the
/// lease cannot be taken while its holder's term runs.
async fn fence_story(db: String) {
    use server::store::{Fence, ReportDelta, ReportSums};
    let store = server::store::Store::connect(&db).await.expect("store");
    let delta = |gs: f64| {
        vec![ReportDelta {
            kind: "cluster",
            key: "all".into(),
            at_ms: 1_796_169_600_000,
            sums: ReportSums {
                capacity_gs: gs,
                ..ReportSums::default()
            },
        }]
    };
    let ttl = 300;
    let t1 = store
        .lease_claim("one", None, ttl, wall_ms())
        .await
        .expect("claim")
        .expect("a free lease is taken");
    assert_eq!(
        store
            .lease_claim("two", None, ttl, wall_ms())
            .await
            .expect("claim"),
        None,
        "taken while its holder's term runs"
    );
    let one = Fence {
        holder: "one".into(),
        term: t1,
    };
    store
        .add_report_deltas_fenced(&delta(10.0), &one, 1000)
        .await
        .expect("the leader writes");
    tokio::time::sleep(Duration::from_millis(2 * ttl as u64)).await;
    let t2 = store
        .lease_claim("two", None, ttl, wall_ms())
        .await
        .expect("claim")
        .expect("an expired lease is taken");
    assert!(t2 > t1, "a new term: {t2} after {t1}");
    let refused = store
        .add_report_deltas_fenced(&delta(5.0), &one, 2000)
        .await;
    assert!(
        matches!(refused, Err(server::store::StoreError::Fenced(t)) if t == t1),
        "the deposed leader's write: {refused:?}"
    );
    let two = Fence {
        holder: "two".into(),
        term: t2,
    };
    store
        .add_report_deltas_fenced(&delta(7.0), &two, 3000)
        .await
        .expect("the new leader writes");
    assert_eq!(
        cluster_capacity_gs(&store).await,
        17.0,
        "only the leaders' deltas"
    );
    let l = store.lease().await.expect("lease");
    assert_eq!(
        (l.holder.as_str(), l.term, l.accounted_ms),
        ("two", t2, Some(3000))
    );
    // The deposed one cannot renew its old term either.
    assert_eq!(
        store
            .lease_claim("one", Some(t1), ttl, wall_ms())
            .await
            .expect("claim"),
        None
    );
}

#[tokio::test]
async fn a_deposed_leaders_report_writes_are_refused_on_sqlite() {
    fence_story(support::sqlite_url()).await;
}

#[tokio::test]
async fn a_deposed_leaders_report_writes_are_refused_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    fence_story(url).await;
}

#[tokio::test]
async fn sqlite_refuses_a_second_serving_process() {
    let db = support::sqlite_url();
    let first = server::serve::start(support::test_config(db.clone(), 4, 1.0, 200))
        .await
        .expect("first");
    let second = server::serve::start(support::test_config(db.clone(), 4, 1.0, 200)).await;
    let Err(e) = second else {
        panic!("a second server on one SQLite file started");
    };
    let msg = e.to_string();
    assert!(
        msg.contains("another gantry process serves") && msg.contains("PostgreSQL"),
        "{msg}"
    );
    first.stop().await.expect("stop");
    // Once the first has stopped, the file is free.
    let again = server::serve::start(support::test_config(db, 4, 1.0, 200))
        .await
        .expect("after the first stopped");
    again.stop().await.expect("stop");
}

/// Two replicas of the simulator on one PostgreSQL: an action sent to the standby (which
/// runs no simulator) is recorded there, answered like the leader's, run by the leader,
/// and its verified end shows on both.
#[tokio::test]
async fn a_simulator_standby_hands_its_actions_to_the_leader() {
    let Some(db) = support::postgres_url().await else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("gantry-sim-replicas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.join("gantry.toml");
    std::fs::write(
        &config,
        "live_interval_ms = 500\n[sim]\nnodes = 16\n[auth]\nanonymous_read = true\n",
    )
    .expect("config");
    let store = server::store::Store::connect(&db).await.expect("store");
    add_users(&store).await;
    let (log_a, log_b) = (dir.join("a.log"), dir.join("b.log"));
    let logs = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let mut a = spawn(&config, &db, &log_a);
    healthy(&mut a, &log_a).await;
    until(Duration::from_secs(10), "A leads", || async {
        term(&a).await > 0
    })
    .await;
    let mut b = spawn(&config, &db, &log_b);
    healthy(&mut b, &log_b).await;
    until(
        Duration::from_secs(10),
        "B shows the leader's state",
        || async { shows_drained(&b).await.is_some() },
    )
    .await;
    assert_eq!(term(&b).await, 0, "B stands by: {}", logs(&log_b));
    let op_b = login(b.addr, "operator1").await;

    // The preview on the standby reads what the leader published.
    let preview = post_json(
        b.addr,
        "/api/actions/preview",
        Some(&op_b),
        &json!({"action": "drain", "nodes": [NODE], "reason": "x"}),
    )
    .await;
    assert_eq!(preview.status, 200, "preview on B: {}", preview.text());

    // Drained through B, answered at once: 202 and where to follow it.
    let drained = post_json(
        b.addr,
        "/api/actions/drain",
        Some(&op_b),
        &json!({"nodes": [NODE], "reason": "sim replica test"}),
    )
    .await;
    assert_eq!(drained.status, 202, "drain on B: {}", drained.text());
    let id = drained.json()["id"].as_i64().expect("the action's id");
    assert_eq!(
        drained.header("location"),
        Some(format!("/api/actions/{id}").as_str())
    );
    // Followed on B to its verified end, which A ran; both show it.
    let mut done = None;
    for _ in 0..60 {
        let s = support::get_with(
            b.addr,
            &format!("/api/actions/{id}?wait=5"),
            &[("Cookie", &op_b)],
        )
        .await
        .json();
        if s["state"] == "done" || s["state"] == "stopped" {
            done = Some(s);
            break;
        }
    }
    let done = done.unwrap_or_else(|| panic!("action {id} never ended: {}", logs(&log_a)));
    assert_eq!(done["state"], "done", "{done}");
    for g in [&a, &b] {
        until(
            Duration::from_secs(5),
            "the drain on both replicas",
            || async { shows_drained(g).await.is_some_and(|(d, _)| d) },
        )
        .await;
    }
    let stored = store.action(id).await.expect("read").expect("the action");
    assert!(
        stored.targets.iter().all(|t| t.status == "ok"),
        "{:?}",
        stored.targets
    );
    terminate(&mut b);
    terminate(&mut a);
    let _ = std::fs::remove_dir_all(&dir);
}
