//! The Slurm CLI transport against a real Slurm (16 nodes on this machine, started by
//! `cargo xtask test`, which passes its configuration in GANTRY_TEST_SLURM_CONF).

use std::time::Duration;

use app::model::{JobState, NodeState};
use server::scheduler::Invalid;
use server::slurm::cli::{Cli, CliError};

use crate::exporters::write_two_racks;
pub(crate) use crate::exporters::{known_readings, scrape_from, serve_exporters};

pub(crate) fn cluster() -> Option<Cli> {
    let Ok(conf) = std::env::var("GANTRY_TEST_SLURM_CONF") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "GANTRY_TEST_SLURM_CONF must be set in CI"
        );
        eprintln!(
            "GANTRY_TEST_SLURM_CONF not set: real-Slurm test skipped (run `cargo xtask test`)"
        );
        return None;
    };
    Some(Cli::new(
        None,
        vec![("SLURM_CONF".into(), conf)],
        Duration::from_secs(10),
    ))
}

pub(crate) fn sbatch(conf: &str, args: &[&str]) -> u64 {
    let out = std::process::Command::new("sbatch")
        .arg("--parsable")
        .args(args)
        .env("SLURM_CONF", conf)
        .output()
        .expect("sbatch");
    assert!(
        out.status.success(),
        "sbatch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .split(';')
        .next()
        .and_then(|s| s.parse().ok())
        .expect("job id")
}

async fn node(cli: &Cli, name: &str) -> server::scheduler::SchedNode {
    cli.nodes()
        .await
        .expect("nodes")
        .into_iter()
        .find(|n| n.name == name)
        .expect("node listed")
}

/// Polls until `f` holds (Slurm applies some changes asynchronously).
async fn until<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..100 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for: {what}");
}

#[tokio::test]
async fn drain_resume_and_requeue_on_a_real_slurm() {
    let Some(cli) = cluster() else { return };
    let conf = std::env::var("GANTRY_TEST_SLURM_CONF").unwrap_or_default();

    // Reads: every node, with GPUs from GRES.
    let nodes = cli.nodes().await.expect("nodes");
    assert_eq!(nodes.len(), 16);
    let n5 = nodes.iter().find(|n| n.name == "gpu005").expect("gpu005");
    assert_eq!(n5.gpus_total, Some(8));
    assert_eq!(
        nodes
            .iter()
            .find(|n| n.name == "gpu014")
            .and_then(|n| n.gpus_total),
        Some(4)
    );

    // A job on gpu005 with all its GPUs.
    let job = sbatch(
        &conf,
        &[
            "-N1",
            "-w",
            "gpu005",
            "--gres=gpu:h100:8",
            "-p",
            "gpu",
            // No slurm-N.out in the working directory.
            "--output=/dev/null",
            "--wrap",
            "sleep 600",
        ],
    );
    until("the job runs", || async {
        cli.jobs()
            .await
            .expect("jobs")
            .iter()
            .any(|j| j.job.id == job && j.job.state == JobState::Running)
    })
    .await;
    let j = cli
        .jobs()
        .await
        .expect("jobs")
        .into_iter()
        .find(|j| j.job.id == job)
        .expect("job");
    assert_eq!(
        (j.job.nodes.clone(), j.job.gpus),
        (vec!["gpu005".to_string()], 8)
    );

    // Drain with hostile text: passed as one argument, stored verbatim, nothing executed.
    let marker = std::env::temp_dir().join(format!("gantry-pwned-{}", std::process::id()));
    let reason = format!(
        "gantry-test: XID 79 $(touch {m}); `touch {m}` ; rm -rf / \"dq\" 'sq' = & |",
        m = marker.display()
    );
    cli.drain("gpu005", &reason).await.expect("drain");
    let n = node(&cli, "gpu005").await;
    assert_eq!(
        n.state,
        NodeState::Draining,
        "DRAIN on a node with a job is draining: {:?}",
        n.raw_state
    );
    assert_eq!(n.reason.as_deref(), Some(reason.as_str()));
    assert!(!marker.exists(), "the reason was executed");

    // Refused before anything runs.
    assert!(matches!(
        cli.drain("gpu005; reboot", "x").await,
        Err(CliError::Invalid(Invalid::BadNodeName(_)))
    ));
    assert!(matches!(
        cli.drain("gpu005", "two\nlines").await,
        Err(CliError::Invalid(Invalid::BadReason(_)))
    ));
    // Slurm's own refusals come back with its words.
    let e = cli
        .drain("gpu999", "maintenance")
        .await
        .expect_err("unknown node");
    assert!(matches!(e, CliError::Failed { .. }), "{e}");

    // Resume: the drain is gone (a brief NOT_RESPONDING after RESUME is Slurm's design).
    cli.resume("gpu005").await.expect("resume");
    until("gpu005 is no longer draining", || async {
        let n = node(&cli, "gpu005").await;
        matches!(n.state, NodeState::Allocated | NodeState::Mixed) && n.reason.is_none()
    })
    .await;

    // Requeue: back to pending, its restart count up by one.
    cli.requeue(job, false, &[]).await.expect("requeue");
    until("the job is requeued", || async {
        cli.jobs()
            .await
            .expect("jobs")
            .iter()
            .any(|j| j.job.id == job && j.restart_count == 1 && j.job.state != JobState::Running)
    })
    .await;
    // A pending job cannot be requeued: Slurm says why.
    let e = cli.requeue(job, false, &[]).await.expect_err("pending");
    assert!(e.to_string().contains("scontrol failed"), "{e}");

    let _ = std::process::Command::new("scancel")
        .arg(job.to_string())
        .env("SLURM_CONF", &conf)
        .status();
}

/// A requeue that keeps its job off the node blamed for its failure: Gantry holds it,
/// sets Slurm's `ExcNodeList`, releases it, and verifies both the restart and the list in
/// what Slurm shows (`scontrol show job`, `squeue --json`'s `excluded_nodes`).
#[tokio::test]
async fn a_requeue_excludes_the_blamed_node_on_a_real_slurm() {
    use crate::support::{self, add_users, login, post_json};
    use serde_json::json;
    if cluster().is_none() {
        return;
    }
    let (conf, cfg) = slurm_config();
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    add_users(&r.store).await;
    let op = login(r.addr, "operator1").await;
    // gpu015: no other real-Slurm test uses it.
    let job = sbatch(
        &conf,
        &[
            "-N1",
            "-w",
            "gpu015",
            "-p",
            "gpu",
            "--chdir=/tmp",
            "--wrap",
            "sleep 600",
        ],
    );
    let mut running = false;
    for _ in 0..200 {
        running = r.live.sched().is_some_and(|s| {
            s.jobs
                .iter()
                .any(|j| j.job.id == job && j.job.state == JobState::Running)
        });
        if running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        running,
        "job {job} never ran: {}",
        scontrol_show(&conf, "job", &job.to_string())
    );
    // An unknown node is refused before anything is recorded.
    let bad = post_json(
        r.addr,
        "/api/actions/requeue",
        Some(&op),
        &json!({"jobs": [job], "reason": "x", "exclude": ["gpu999"]}),
    )
    .await;
    assert_eq!(bad.status, 404, "{}", bad.text());
    let p = post_json(
        r.addr,
        "/api/actions/preview",
        Some(&op),
        &json!({"action": "requeue", "jobs": [job], "exclude": ["gpu015"]}),
    )
    .await;
    assert!(
        p.json()["summary"]
            .as_str()
            .is_some_and(|s| s.contains("never run on gpu015 again")),
        "{}",
        p.text()
    );
    let rq = post_json(
        r.addr,
        "/api/actions/requeue?wait=20",
        Some(&op),
        &json!({"jobs": [job], "reason": "XID 79 on gpu015", "exclude": ["gpu015"]}),
    )
    .await;
    let body = rq.json();
    assert_eq!(body["outcomes"][0]["status"], "ok", "{body:#}");
    assert!(
        body["outcomes"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("excluding gpu015")),
        "{body:#}"
    );
    let shown = scontrol_show(&conf, "job", &job.to_string());
    assert!(shown.contains("ExcNodeList=gpu015"), "{shown}");
    assert!(shown.contains("Restarts=1"), "{shown}");
    // Requeued, not held: released after its list was set.
    assert!(!shown.contains("Reason=JobHeldUser"), "{shown}");
    let _ = std::process::Command::new("scancel")
        .arg(job.to_string())
        .env("SLURM_CONF", &conf)
        .status();
    r.stop().await.expect("stop");
}

/// The test cluster's `slurm.conf`, and a Gantry configuration polling it every 500 ms
/// with sign-in required.
pub(crate) fn slurm_config() -> (String, server::config::Config) {
    let conf = std::env::var("GANTRY_TEST_SLURM_CONF").unwrap_or_default();
    let mut cfg = crate::support::test_config(crate::support::sqlite_url(), 16, 1.0, 200);
    cfg.auth.anonymous_read = false;
    cfg.source = server::config::SourceKind::Slurm;
    cfg.slurm.conf = Some(conf.clone().into());
    cfg.slurm.poll_interval_ms = 500;
    (conf, cfg)
}

fn scontrol_show(conf: &str, what: &str, id: &str) -> String {
    let out = std::process::Command::new("scontrol")
        .args(["show", what, id])
        .env("SLURM_CONF", conf)
        .output()
        .expect("scontrol");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The whole path an operator takes: Gantry polls the real Slurm, a job submitted by a
/// non-root user shows up, a viewer cannot act, an operator drains, resumes and requeues
/// through Gantry's HTTP API, and Slurm itself is read back to prove each effect.
#[tokio::test]
async fn operators_act_on_a_real_slurm_through_gantry() {
    use crate::support::{self, add_users, login, post_json};
    use serde_json::json;
    if cluster().is_none() {
        return;
    }
    let (conf, mut cfg) = slurm_config();
    // A layout for some nodes: the rest show up in an "unplaced" rack, not hidden.
    let layout = std::env::temp_dir().join(format!("gantry-layout-{}.toml", std::process::id()));
    std::fs::write(
        &layout,
        "[[rack]]\nname = \"R1\"\nrow = \"A\"\npower_limit_kw = 40\nnodes = \"gpu[001-008]\"\n\
         [[rack]]\nname = \"R2\"\nrow = \"A\"\npower_limit_kw = 40\nnodes = \"gpu[010-012]\"\n",
    )
    .expect("layout file");
    cfg.slurm.layout = Some(layout.clone());
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    add_users(&r.store).await;
    let op = login(r.addr, "operator1").await;
    let viewer = login(r.addr, "viewer1").await;
    let inv = r.live.inventory().expect("inventory");
    let racks: Vec<&str> = inv.racks.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(racks, ["R1", "R2", "unplaced"]);
    assert_eq!(inv.nodes.iter().filter(|n| n.rack == "unplaced").count(), 5);
    assert_eq!(inv.gpu_count(), 12 * 8 + 4 * 4);

    // Bulk drain of a rack for maintenance: every node of it, one preview, each verified.
    let p = post_json(
        r.addr,
        "/api/actions/preview",
        Some(&op),
        &json!({"action": "drain", "rack": "R2"}),
    )
    .await;
    assert_eq!(
        p.json()["targets"],
        json!(["gpu010", "gpu011", "gpu012"]),
        "{}",
        p.text()
    );
    let d = post_json(
        r.addr,
        "/api/actions/drain?wait=20",
        Some(&op),
        &json!({"rack": "R2", "reason": "gantry-test: PDU swap"}),
    )
    .await;
    assert_eq!(d.status, 200, "{}", d.text());
    for n in ["gpu010", "gpu011", "gpu012"] {
        assert!(scontrol_show(&conf, "node", n).contains("DRAIN"), "{n}");
    }
    let res = post_json(
        r.addr,
        "/api/actions/resume?wait=20",
        Some(&op),
        &json!({"rack": "R2"}),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.text());
    assert!(!scontrol_show(&conf, "node", "gpu011").contains("DRAIN"));

    // Submitted as `nobody`, not root, on gpu007 (the CLI test uses gpu005).
    let out = std::process::Command::new("runuser")
        .args([
            "-u",
            "nobody",
            "--",
            "sbatch",
            "--parsable",
            "-N1",
            "-w",
            "gpu007",
            "--gres=gpu:h100:8",
            "-p",
            "gpu",
            "--chdir=/tmp",
            "-J",
            "gantry-e2e",
            "--wrap",
            "sleep 600",
        ])
        .env("SLURM_CONF", &conf)
        .output()
        .expect("runuser sbatch");
    assert!(
        out.status.success(),
        "sbatch as nobody: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .split(';')
        .next()
        .and_then(|s| s.parse().ok())
        .expect("job id");
    let mut seen = serde_json::Value::Null;
    for _ in 0..100 {
        let jobs = support::get_with(r.addr, "/api/jobs", &[("Cookie", &op)])
            .await
            .json();
        if let Some(j) = jobs["jobs"]
            .as_array()
            .and_then(|a| a.iter().find(|j| j["job"]["id"] == job))
        {
            if j["job"]["state"] == "running" {
                seen = j.clone();
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen["job"]["user"], "nobody", "{seen}");
    assert_eq!(seen["job"]["nodes"], json!(["gpu007"]));
    assert_eq!(seen["job"]["gpus"], 8);

    // A viewer's drain is refused and Slurm is untouched.
    let v = post_json(
        r.addr,
        "/api/actions/drain?wait=20",
        Some(&viewer),
        &json!({"nodes": ["gpu007"], "reason": "no"}),
    )
    .await;
    assert_eq!(v.status, 403);
    assert!(!scontrol_show(&conf, "node", "gpu007").contains("DRAIN"));

    // Preview names the job and its GPUs.
    let p = post_json(
        r.addr,
        "/api/actions/preview",
        Some(&op),
        &json!({"action": "drain", "nodes": ["gpu007"]}),
    )
    .await;
    assert_eq!(p.status, 200, "{}", p.text());
    let p = p.json();
    assert_eq!(p["gpus_affected"], 8);
    assert_eq!(p["jobs"][0]["id"], job);

    // Drain: Slurm shows DRAIN and the reason with the operator's name.
    let d = post_json(
        r.addr,
        "/api/actions/drain?wait=20",
        Some(&op),
        &json!({"nodes": ["gpu007"], "reason": "gantry-test: fan swap"}),
    )
    .await;
    assert_eq!(d.status, 200, "{}", d.text());
    assert_eq!(d.json()["outcomes"][0]["status"], "ok", "{}", d.text());
    let shown = scontrol_show(&conf, "node", "gpu007");
    assert!(shown.contains("DRAIN"), "{shown}");
    assert!(
        shown.contains("Reason=operator1: gantry-test: fan swap"),
        "{shown}"
    );

    // Resume: the DRAIN is gone.
    let res = post_json(
        r.addr,
        "/api/actions/resume?wait=20",
        Some(&op),
        &json!({"nodes": ["gpu007"]}),
    )
    .await;
    assert_eq!(res.json()["outcomes"][0]["status"], "ok", "{}", res.text());
    assert!(!scontrol_show(&conf, "node", "gpu007").contains("DRAIN"));

    // Requeue: Slurm counts a restart; Gantry's job history records the requeue.
    let rq = post_json(
        r.addr,
        "/api/actions/requeue?wait=20",
        Some(&op),
        &json!({"jobs": [job], "reason": "loss spike after a bad node"}),
    )
    .await;
    assert_eq!(rq.json()["outcomes"][0]["status"], "ok", "{}", rq.text());
    let shown = scontrol_show(&conf, "job", &job.to_string());
    assert!(shown.contains("Restarts=1"), "{shown}");
    let mut events = Vec::new();
    for _ in 0..100 {
        events = r.store.job_events(job).await.expect("events");
        if events.iter().any(|e| e.state == JobState::Requeued) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let states: Vec<JobState> = events.iter().map(|e| e.state).collect();
    assert!(
        states.contains(&JobState::Running) && states.contains(&JobState::Requeued),
        "{states:?}"
    );

    // One poll per interval whatever the number of viewers: five live streams open for
    // three seconds add no polls beyond the interval's.
    let polls = |m: String| {
        m.lines()
            .find_map(|l| l.strip_prefix("gantry_slurm_polls_total "))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let before = polls(support::get(r.addr, "/metrics").await.text());
    let mut streams = Vec::new();
    for _ in 0..5 {
        streams
            .push(support::SseStream::open_with(r.addr, "/api/live", &[("Cookie", &viewer)]).await);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = polls(support::get(r.addr, "/metrics").await.text());
    assert!(
        after - before <= 8,
        "{} polls in 3 s at a 500 ms interval",
        after - before
    );
    drop(streams);

    let _ = std::process::Command::new("scancel")
        .arg(job.to_string())
        .env("SLURM_CONF", &conf)
        .status();
    r.stop().await.expect("stop");
    let _ = std::fs::remove_file(layout);
}

/// slurmrestd 22.05 (API v0.0.38) over TCP with a JWT and over its UNIX socket: version
/// detected, reads normalized like the CLI's, writes that v0.0.38 lacks go to the CLI or
/// are refused saying why, and a bad token is a clear error.
#[tokio::test]
async fn slurmrestd_reads_and_falls_back_to_the_cli() {
    use server::scheduler::Scheduler;
    use server::slurm::rest::{Address, Rest, RestError};
    let Some(cli) = cluster() else { return };
    let conf = std::env::var("GANTRY_TEST_SLURM_CONF").unwrap_or_default();
    let (Ok(url), Ok(socket), Ok(jwt)) = (
        std::env::var("GANTRY_TEST_SLURM_REST_URL"),
        std::env::var("GANTRY_TEST_SLURM_REST_SOCKET"),
        std::env::var("GANTRY_TEST_SLURM_JWT"),
    ) else {
        panic!("cargo xtask test passes slurmrestd's address and a token with the cluster");
    };
    let t = Duration::from_secs(10);
    let with_cli = || Cli::new(None, vec![("SLURM_CONF".into(), conf.clone())], t);
    let addr = Address::parse(&url).expect("url");
    let rest = Rest::new(
        addr.clone(),
        Some("root".into()),
        Some(jwt.clone()),
        None,
        t,
        Some(with_cli()),
    );

    assert_eq!(rest.version().await.expect("version"), 38);
    let over_rest = Rest::nodes(&rest).await.expect("nodes over REST");
    let over_cli = cli.nodes().await.expect("nodes over the CLI");
    assert_eq!(over_rest.len(), 16);
    let names = |v: &[server::scheduler::SchedNode]| {
        let mut n: Vec<(String, Option<u32>)> =
            v.iter().map(|n| (n.name.clone(), n.gpus_total)).collect();
        n.sort();
        n
    };
    assert_eq!(names(&over_rest), names(&over_cli));
    Rest::jobs(&rest).await.expect("jobs over REST");

    // v0.0.38 has no node write endpoint: drain and resume go through the CLI fallback.
    Scheduler::drain(&rest, "gpu009", "gantry-test: rest fallback")
        .await
        .expect("drain");
    let n = Rest::nodes(&rest)
        .await
        .expect("nodes")
        .into_iter()
        .find(|n| n.name == "gpu009")
        .expect("gpu009");
    assert_eq!(n.state, NodeState::Drained, "{:?}", n.raw_state);
    assert_eq!(n.reason.as_deref(), Some("gantry-test: rest fallback"));
    Scheduler::resume(&rest, "gpu009").await.expect("resume");

    // Without a CLI, the refusal says why.
    let bare = Rest::new(
        addr.clone(),
        Some("root".into()),
        Some(jwt.clone()),
        None,
        t,
        None,
    );
    let e = Scheduler::requeue(&bare, 1, false, &[])
        .await
        .expect_err("no REST requeue");
    assert!(e.to_string().contains("v0.0.38 cannot requeue"), "{e}");
    let e = Scheduler::drain(&bare, "gpu009", "x")
        .await
        .expect_err("no REST drain");
    assert!(e.to_string().contains("cannot drain a node"), "{e}");

    // A token without the user it acts for: slurmrestd refuses it itself (401).
    let bad = Rest::new(addr.clone(), None, Some(jwt.clone()), Some(38), t, None);
    let e = Rest::nodes(&bad).await.expect_err("bad token");
    assert!(matches!(e, RestError::Auth(401)), "{e}");
    assert!(e.to_string().contains("expired"), "{e}");
    // A JWT with a bad signature: 22.05 passes it on and slurmctld refuses it (500); the
    // message still points at the token.
    let tampered = format!("{jwt}x");
    let bad = Rest::new(addr, Some("root".into()), Some(tampered), Some(38), t, None);
    let e = Rest::nodes(&bad).await.expect_err("tampered token");
    assert!(matches!(e, RestError::Status { status: 500, .. }), "{e}");
    assert!(e.to_string().contains("expired or wrong token"), "{e}");

    // The UNIX socket with local auth: no token at all.
    let local = Rest::new(
        Address::parse(&socket).expect("socket"),
        None,
        None,
        None,
        t,
        None,
    );
    assert_eq!(
        Rest::nodes(&local)
            .await
            .expect("nodes over the socket")
            .len(),
        16
    );

    // Gantry itself on slurmrestd: its nodes view comes from REST.
    let mut cfg = crate::support::test_config(crate::support::sqlite_url(), 16, 1.0, 200);
    cfg.source = server::config::SourceKind::Slurm;
    cfg.slurm.conf = Some(conf.clone().into());
    cfg.slurm.poll_interval_ms = 500;
    cfg.slurm.rest = Some(server::config::SlurmRest {
        url: url.clone(),
        user: Some("root".into()),
        token: Some(server::config::Secret::new(jwt)),
        version: None,
    });
    let r = server::serve::start(cfg).await.expect("start");
    crate::support::wait_ready(&r).await;
    let nodes = crate::support::get(r.addr, "/api/nodes").await.json();
    assert_eq!(nodes["nodes"].as_array().map(Vec::len), Some(16));
    r.stop().await.expect("stop");
}

/// The opt-in policy on a real Slurm: Gantry scrapes every node's exporters (their targets
/// follow Slurm's node list), sees XID 79 on gpu008, fires, and drains gpu008 in Slurm
/// through the audited action path.
#[tokio::test]
async fn the_auto_drain_policy_drains_a_real_slurm_node() {
    use axum::extract::Path;
    use axum::routing::get;
    if cluster().is_none() {
        return;
    }
    let conf = std::env::var("GANTRY_TEST_SLURM_CONF").unwrap_or_default();
    // Exporters for all 16 nodes, written in dcgm-exporter's and ipmi_exporter's formats.
    let app = axum::Router::new()
        .route(
            "/dcgm/{node}",
            get(|Path(node): Path<String>| async move {
                let mut out = String::from("# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n");
                for g in 0..8 {
                    let l = format!("gpu=\"{g}\",UUID=\"GPU-{node}-{g}\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"{node}\"");
                    out.push_str(&format!("DCGM_FI_DEV_GPU_TEMP{{{l}}} 48\n"));
                    let xid = if node == "gpu008" && g == 2 { 79 } else { 0 };
                    out.push_str(&format!("DCGM_FI_DEV_XID_ERRORS{{{l}}} {xid}\n"));
                }
                out
            }),
        )
        .route(
            "/ipmi/{node}",
            get(|| async { "ipmi_dcmi_power_consumption_watts 3100\nipmi_temperature_celsius{id=\"2\",name=\"Inlet Temp\"} 24\n" }),
        );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let exporters = l.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    let mut cfg = crate::support::test_config(crate::support::sqlite_url(), 16, 1.0, 200);
    cfg.source = server::config::SourceKind::Slurm;
    cfg.slurm.conf = Some(conf.clone().into());
    cfg.slurm.poll_interval_ms = 500;
    scrape_from(&mut cfg, exporters);
    cfg.alerts.auto_drain = true;
    let r = server::serve::start(cfg).await.expect("start");
    let mut drained = String::new();
    for _ in 0..150 {
        drained = scontrol_show(&conf, "node", "gpu008");
        if drained.contains("DRAIN") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(drained.contains("DRAIN"), "{drained}");
    assert!(
        drained.contains("Reason=gantry: incident ") && drained.contains(": gpu008 GPU 2: XID 79"),
        "{drained}"
    );
    // Slurm shows the drain before Gantry has verified it and finished the audit row: wait
    // for the row's end state (on a loaded machine it can still say "calling" here).
    let audit = crate::support::policy_audit_until(&r.store, |a| {
        a.iter()
            .any(|a| !matches!(a.status.as_str(), "started" | "pending" | "calling"))
    })
    .await;
    assert!(
        audit
            .iter()
            .any(|a| a.target == "gpu008" && a.action == "drain" && a.status == "ok"),
        "{audit:?}"
    );
    // The other nodes' telemetry arrived too: power is known, nothing else drained. One
    // frame may catch a scrape round of 32 targets mid-flight on a loaded machine (its
    // readings then show stale, as they should), so wait for a frame where all are fresh.
    let all_fresh = |nodes: &[app::live::NodeTile]| {
        nodes
            .iter()
            .filter(|n| n.name != "gpu008")
            .all(|n| n.power_watts == Some(3100.0) || n.state != NodeState::Idle)
    };
    let mut nodes = Vec::new();
    for _ in 0..100 {
        nodes = r.live.current().expect("tick").overview.nodes.clone();
        if all_fresh(&nodes) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(all_fresh(&nodes), "{nodes:?}");
    // Nothing else drained by the policy (its own record: other tests on this shared
    // cluster drain nodes of their own meanwhile, so Slurm's states cannot say whose).
    let audit = crate::support::policy_audit_until(&r.store, |_| true).await;
    assert!(audit.iter().all(|a| a.target == "gpu008"), "{audit:?}");
    r.stop().await.expect("stop");
    // Put it back for the other tests.
    let _ = std::process::Command::new("scontrol")
        .args(["update", "NodeName=gpu008", "State=RESUME"])
        .env("SLURM_CONF", &conf)
        .status();
}

/// The read RPCs slurmctld has answered (`sdiag`'s counts by message type, `REQUEST_*`,
/// without sdiag's own `REQUEST_STATS_INFO`).
fn slurmctld_reads(conf: &str) -> u64 {
    let out = std::process::Command::new("sdiag")
        .env("SLURM_CONF", conf)
        .output()
        .expect("sdiag");
    let text = String::from_utf8_lossy(&out.stdout);
    let by_type = text
        .split("Remote Procedure Call statistics by message type")
        .nth(1)
        .and_then(|t| t.split("Remote Procedure Call statistics by user").next())
        .expect("sdiag's RPC table");
    by_type
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("REQUEST_") && !l.starts_with("REQUEST_STATS_INFO"))
        .filter_map(|l| l.split("count:").nth(1))
        .filter_map(|c| c.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Opens `n` live streams of the overview and reads them until `window` has passed;
/// returns how many snapshots they got in all.
async fn live_clients(addr: std::net::SocketAddr, n: usize, window: Duration) -> usize {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tasks = Vec::new();
    for _ in 0..n {
        tasks.push(tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
            let req = format!(
                "GET /api/live HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
            );
            s.write_all(req.as_bytes()).await.expect("write");
            let mut events = 0;
            let mut buf = vec![0u8; 64 * 1024];
            let end = tokio::time::Instant::now() + window;
            while let Ok(Ok(got)) = tokio::time::timeout_at(end, s.read(&mut buf)).await {
                if got == 0 {
                    break;
                }
                events += buf[..got].windows(7).filter(|w| w == b"event: ").count();
            }
            events
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.expect("client");
    }
    total
}

/// However many browsers watch, Gantry asks slurmctld the same: one poll per interval,
/// shared by every live stream. `sdiag`'s read RPCs over equal windows with 1 and with 100
/// live clients: a ratio of at most 1.05. Run alone by `cargo xtask test` (`--ignored`),
/// since sdiag counts every client of slurmctld, other tests' too.
#[tokio::test]
#[ignore = "run alone by cargo xtask test: sdiag counts every client of slurmctld"]
async fn the_scheduler_load_is_flat_however_many_browsers_watch() {
    use crate::support;
    if cluster().is_none() {
        return;
    }
    let conf = std::env::var("GANTRY_TEST_SLURM_CONF").unwrap_or_default();
    let mut cfg = support::test_config(support::sqlite_url(), 16, 1.0, 200);
    cfg.source = server::config::SourceKind::Slurm;
    cfg.slurm.conf = Some(conf.clone().into());
    cfg.slurm.poll_interval_ms = 250;
    cfg.limits.live_streams_per_user = 200;
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    let window = Duration::from_secs(10);
    let measure = |n: usize| {
        let conf = conf.clone();
        let addr = r.addr;
        async move {
            let before = slurmctld_reads(&conf);
            let events = live_clients(addr, n, window).await;
            (slurmctld_reads(&conf) - before, events)
        }
    };
    let (one, one_events) = measure(1).await;
    let (many, many_events) = measure(100).await;
    eprintln!(
        "slurmctld read RPCs over {} s: {one} with 1 live client ({one_events} snapshots), \
         {many} with 100 ({many_events} snapshots); ratio {:.3}",
        window.as_secs(),
        many as f64 / one.max(1) as f64
    );
    // Both windows were live: the streams got their snapshots.
    assert!(one_events >= 5, "{one_events}");
    assert!(many_events >= 100 * 5, "{many_events}");
    assert!(one >= 20, "Gantry polled Slurm: {one}");
    assert!(
        many as f64 <= one as f64 * 1.05,
        "100 browsers cost slurmctld more: {many} against {one}"
    );
    r.stop().await.expect("stop");
}

/// Free segments on the real source: Gantry on the real Slurm with a topology.yaml (an
/// InfiniBand tree beside two 8-node blocks) counts, per block and segment size, the
/// nodes Slurm itself lists as idle (`scontrol show node`, read before and after, equal).
#[tokio::test]
async fn free_segments_on_a_real_slurm_follow_its_idle_nodes() {
    use crate::support;
    let Some(cli) = cluster() else {
        return;
    };
    let conf_path = std::env::var("GANTRY_TEST_SLURM_CONF").unwrap_or_default();
    let dir = std::env::temp_dir().join(format!("gantry-segments-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (layout, topology) = (dir.join("layout.toml"), dir.join("topology.yaml"));
    write_two_racks(&layout, false);
    std::fs::write(
        &topology,
        "---\n- topology: ib\n  cluster_default: true\n  tree:\n    switches:\n      - switch: spine\n        children: leaf[1-2]\n      - switch: leaf1\n        nodes: gpu[001-008]\n      - switch: leaf2\n        nodes: gpu[009-016]\n\
         - topology: nvl\n  block:\n    block_sizes: [8, 16]\n    blocks:\n      - block: b1\n        nodes: gpu[001-008]\n      - block: b2\n        nodes: gpu[009-016]\n",
    )
    .expect("topology");
    let mut cfg = support::test_config(support::sqlite_url(), 16, 1.0, 200);
    cfg.source = server::config::SourceKind::Slurm;
    cfg.slurm.conf = Some(conf_path.into());
    cfg.slurm.poll_interval_ms = 300;
    cfg.slurm.layout = Some(layout);
    cfg.slurm.topology = Some(topology);
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;

    let idle_in_slurm = |nodes: &[server::scheduler::SchedNode]| -> [u64; 2] {
        let mut idle = [0u64; 2];
        for n in nodes.iter().filter(|n| n.state == NodeState::Idle) {
            let k: usize = n.name[3..].parse().expect("gpuNNN");
            idle[(k - 1) / 8] += 1;
        }
        idle
    };
    // Other tests drain and occupy nodes meanwhile: compare only when Slurm showed the
    // same before and after Gantry's answer, and Gantry's poll came after the first read.
    let mut compared = 0;
    let mut last_disagreement = String::new();
    for _ in 0..100 {
        let before = idle_in_slurm(&cli.nodes().await.expect("nodes"));
        let t0 = server::clock::wall_now_ms();
        tokio::time::sleep(Duration::from_millis(700)).await;
        let seg = support::get(r.addr, "/api/segments").await.json();
        let after = idle_in_slurm(&cli.nodes().await.expect("nodes"));
        if before != after || seg["polled_ms"].as_i64().unwrap_or(0) < t0 {
            continue;
        }
        let set = &seg["sets"][0];
        assert_eq!(set["base"], 8);
        assert_eq!(set["sizes"], serde_json::json!([8, 16]));
        // A short job of another test can start and end inside the window, unseen by
        // both reads: a disagreement is retried, and only one that never clears fails.
        let idle: Vec<u64> = (0..2)
            .map(|b| set["blocks"][b]["idle"].as_u64().unwrap_or(u64::MAX))
            .collect();
        let segments: Vec<(u64, u64)> = [1u64, 2, 4, 8]
            .iter()
            .map(|&size| {
                let got = set["total"]
                    .as_array()
                    .expect("total")
                    .iter()
                    .find(|t| t["size"] == size)
                    .expect("size")["segments"]
                    .as_u64()
                    .unwrap_or(u64::MAX);
                (got, before.iter().map(|i| i / size).sum::<u64>())
            })
            .collect();
        if idle != before || segments.iter().any(|(got, want)| got != want) {
            last_disagreement = format!(
                "slurm idle {before:?}, gantry {idle:?}; segments (gantry, slurm) {segments:?}"
            );
            continue;
        }
        compared += 1;
        if compared == 2 {
            break;
        }
    }
    assert_eq!(
        compared, 2,
        "Slurm's idle nodes never held still for a comparison, or Gantry disagreed: {last_disagreement}"
    );
    r.stop().await.expect("stop");
    let _ = std::fs::remove_dir_all(&dir);
}

/// NMX-T on the real source: Gantry on the real Slurm, whose layout gives rack R1
/// (gpu001-gpu008) nine NVLink switch trays, scrapes an NMX-T endpoint this test serves in
/// NMX-T's text (the simulator's writer, read back to its reading by a unit test). A link
/// down on compute tray 3 names gpu004 (the layout's fourth tray: no DCGM identity fields
/// here) and this test's job there; switch tray sw04 down fires `nvlink_switch_tray_down`
/// within one NMX-T interval and two scrape intervals, naming R1, sw04, the trays it cuts
/// (the layout's eight nodes, then the trays it has no node for) and the jobs on them.
#[tokio::test]
async fn nmxt_on_a_real_slurm_names_its_nodes_and_jobs() {
    use axum::extract::{Path, State};
    use axum::routing::get;
    use server::sim::fabric::{port_partner, render_nmxt, LinkDown, RackLinks, PORTS_PER_GPU};
    use std::sync::{Arc, Mutex};

    use crate::support;
    if cluster().is_none() {
        return;
    }
    let conf = std::env::var("GANTRY_TEST_SLURM_CONF").unwrap_or_default();
    let gpus_per_tray = 4;
    let links = Arc::new(Mutex::new(RackLinks {
        rack: 0,
        gpus_per_tray,
        down: vec![LinkDown {
            tray: 3,
            gpu: 1,
            port: 3,
            remote: false,
        }],
    }));
    let app = axum::Router::new()
        .route(
            "/nmxt/{rack}",
            get(
                |State(l): State<Arc<Mutex<RackLinks>>>, Path(rack): Path<String>| async move {
                    if rack != "R1" {
                        return Err(axum::http::StatusCode::NOT_FOUND);
                    }
                    let text = render_nmxt(&l.lock().expect("links"));
                    Ok(text)
                },
            ),
        )
        .with_state(Arc::clone(&links));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let nmxt = l.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    // The nodes' own exporters too: on Slurm, racks are scraped with them.
    let nodes = cluster().expect("cluster").nodes().await.expect("nodes");
    let inv = server::sources::slurm::inventory_from_nodes("truth", &nodes);
    let exporters = serve_exporters(inv.clone(), known_readings(&inv)).await;
    let dir = std::env::temp_dir().join(format!("gantry-nmxt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let layout = dir.join("layout.toml");
    std::fs::write(
        &layout,
        "[[rack]]\nname = \"R1\"\nrow = \"A\"\npower_limit_kw = 40\nswitch_trays = 9\nnodes = \"gpu[001-008]\"\n\
         [[rack]]\nname = \"R2\"\nrow = \"A\"\npower_limit_kw = 40\nnodes = \"gpu[009-016]\"\n",
    )
    .expect("layout");
    let mut cfg = support::test_config(support::sqlite_url(), 16, 1.0, 200);
    cfg.source = server::config::SourceKind::Slurm;
    cfg.slurm.conf = Some(conf.clone().into());
    cfg.slurm.poll_interval_ms = 500;
    cfg.slurm.layout = Some(layout);
    scrape_from(&mut cfg, exporters);
    cfg.nvlink_telemetry_url = Some(format!("http://{nmxt}/nmxt/{{rack}}"));
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    let job = sbatch(
        &conf,
        &[
            "-N1",
            "-w",
            "gpu004",
            "--exclusive",
            "-p",
            "gpu",
            "--output=/dev/null",
            "-J",
            "gantry-nmxt",
            "--wrap",
            "sleep 120",
        ],
    );
    let scancel = || {
        let _ = std::process::Command::new("scancel")
            .arg(job.to_string())
            .env("SLURM_CONF", &conf)
            .status();
    };

    // The link down: a warning naming gpu004, the port and its switch tray, and the job.
    let mut seen = String::new();
    let mut warned = None;
    for _ in 0..450 {
        if let Some(t) = r.live.current() {
            let ov = &t.overview;
            let f = ov
                .racks
                .iter()
                .find(|k| k.name == "R1")
                .and_then(|k| k.fabric.clone());
            seen = format!("{f:?}");
            let running = ov
                .nodes
                .iter()
                .any(|n| n.name == "gpu004" && n.jobs.contains(&job));
            if let Some(f) = f.filter(|f| f.reporting() && running) {
                assert_eq!(f.expected, 9);
                assert_eq!(f.cut, ["gpu004"]);
                assert_eq!(f.links - f.active, 1, "{f:?}");
                assert_eq!(f.links_down, ["gpu004 GPU 1 GPUP2 to sw02 (Local_phy)"]);
                let open = r.store.open_alerts().await.expect("alerts");
                // Found once the job runs in Gantry's view; if the link was seen down
                // before, the open alert's words name the job within ten seconds.
                warned = open.into_iter().find(|a| {
                    a.rule == "nvlink_links_down"
                        && a.subject == "rack:R1"
                        && a.summary.contains(&job.to_string())
                });
                if warned.is_some() {
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let Some(warned) = warned else {
        scancel();
        let targets: Vec<String> = r
            .live
            .targets()
            .iter()
            .map(|t| format!("{} {:?} {:?}", t.url, t.last_success_ms, t.last_error))
            .collect();
        panic!("no nvlink_links_down alert for R1 naming gpu004 with the job on it: {seen}; targets: {targets:?}");
    };
    assert!(
        warned.summary.starts_with("rack R1: 1 NVLink link(s) not active, on switch tray sw02: gpu004 GPU 1 GPUP2 to sw02 (Local_phy); compute trays cut: gpu004; running jobs: ")
            && warned.summary.contains(&job.to_string()),
        "{}",
        warned.summary
    );
    // R2 has no switch trays and is not scraped.
    assert!(r
        .live
        .targets()
        .iter()
        .all(|t| !t.url.ends_with("/nmxt/R2")));

    // Switch tray sw04 down: every GPU link cabled to it, on all 18 compute trays.
    let t0 = server::clock::wall_now_ms();
    {
        let mut l = links.lock().expect("links");
        for tray in 0..18 {
            for gpu in 0..gpus_per_tray {
                for port in (1..=PORTS_PER_GPU).filter(|&p| port_partner(p).0 == 4) {
                    l.down.push(LinkDown {
                        tray,
                        gpu,
                        port,
                        remote: true,
                    });
                }
            }
        }
        l.down.sort();
    }
    let fabric_ms = server::telemetry::ingest::FABRIC_MIN_INTERVAL.as_millis() as i64;
    let mut on_r1: std::collections::BTreeSet<u64> = std::collections::BTreeSet::new();
    let mut fired = None;
    // The first tick whose reading has sw04 down.
    let mut seen_ms = None;
    for _ in 0..300 {
        if let Some(t) = r.live.current() {
            let down =
                t.overview.racks.iter().any(|k| {
                    k.name == "R1" && k.fabric.as_ref().is_some_and(|f| f.down == ["sw04"])
                });
            if down && seen_ms.is_none() {
                seen_ms = Some(t.overview.published_ms);
            }
            on_r1.extend(
                t.overview
                    .nodes
                    .iter()
                    .filter(|n| n.name.as_str() <= "gpu008")
                    .flat_map(|n| n.jobs.iter().copied()),
            );
        }
        let open = r.store.open_alerts().await.expect("alerts");
        fired = open
            .into_iter()
            .find(|a| a.rule == "nvlink_switch_tray_down" && a.subject == "rack:R1");
        if fired.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    scancel();
    let a = fired.expect("no nvlink_switch_tray_down alert for R1 in 30 s");
    // Read within one NMX-T interval (and a scrape round's slack), fired within two of
    // the source's intervals of the tick that had it.
    let seen_ms = seen_ms.expect("a tick with sw04 down");
    assert!(
        seen_ms - t0 <= fabric_ms + 2_000,
        "sw04 down first shown {} ms after it went down (NMX-T read at most every {fabric_ms} ms)",
        seen_ms - t0
    );
    assert!(
        a.started_ms - seen_ms <= 2 * 500,
        "fired {} ms after the tick that first had sw04 down",
        a.started_ms - seen_ms
    );
    assert_eq!(a.severity, "critical");
    let trays: Vec<String> = (1..=8)
        .map(|i| format!("gpu{i:03}"))
        .chain((8..18).map(|t| format!("tray {t}")))
        .collect();
    assert!(
        a.summary.starts_with(&format!(
            "rack R1: NVLink switch tray down: sw04 (8 of 9 switch trays up; 1151 of 1296 GPU links active); compute trays cut: {}; running jobs: ",
            trays.join(", ")
        )),
        "{}",
        a.summary
    );
    let named = support::jobs_named(&a.summary);
    assert!(named.contains(&job), "{}", a.summary);
    assert!(
        named.is_subset(&on_r1),
        "every job named ran on R1's nodes ({on_r1:?}): {}",
        a.summary
    );
    r.stop().await.expect("stop");
    let _ = std::fs::remove_dir_all(&dir);
}
