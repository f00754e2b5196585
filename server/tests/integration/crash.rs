//! The crash test: `gantry` (the binary) on the real Slurm of the tests, killed with
//! SIGKILL at spread-out points of 50 actions (20 drains and 20 resumes of three nodes, 10
//! requeues of three running jobs; before a call, during one, between a call and its
//! read-back, mid-way through the targets) and started again each time. Counted: lost
//! actions, Slurm calls made twice, and audit rows that disagree with `scontrol show node`
//! or, for a requeue, with the job's restart count in `scontrol show job`. Goal: 0 of each.
//!
//! Every mutating Slurm call goes through a wrapper `scontrol` in the binary directory
//! Gantry is given, which logs it and waits a little before calling the real one (so that
//! kills land inside calls too); the test writes a marker into the log before each action,
//! so each call is attributed to its action. Nodes gpu013, gpu015 and gpu016 are this
//! test's own (the other Slurm tests use the rest).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::{self, add_users, login, post_json};

const NODES: [&str; 3] = ["gpu013", "gpu015", "gpu016"];
const ACTIONS: usize = 50;

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn which(program: &str) -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} not on PATH"))
}

/// A binary directory whose `scontrol` logs each update or requeue to `log` and sleeps
/// 0.3 s before running the real one; `sinfo` and `squeue` are the real ones.
fn wrappers(dir: &Path, log: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).expect("bin dir");
    for program in ["sinfo", "squeue"] {
        let _ = std::fs::remove_file(dir.join(program));
        std::os::unix::fs::symlink(which(program), dir.join(program)).expect("symlink");
    }
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in update|requeue|requeuehold) echo \"$*\" >> '{}'; sleep 0.3;; esac\nexec '{}' \"$@\"\n",
        log.display(),
        which("scontrol").display()
    );
    let path = dir.join("scontrol");
    std::fs::write(&path, script).expect("wrapper");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

fn scontrol_node(conf: &str, node: &str) -> String {
    let out = Command::new("scontrol")
        .args(["show", "node", node])
        .env("SLURM_CONF", conf)
        .output()
        .expect("scontrol");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether `scontrol show node` shows a drain (`State=IDLE+DRAIN`, `MIXED+DRAIN`, ...).
fn drained_in_slurm(conf: &str, node: &str) -> bool {
    let text = scontrol_node(conf, node);
    text.split_whitespace()
        .find_map(|w| w.strip_prefix("State="))
        .is_some_and(|s| {
            s.split('+')
                .any(|p| p == "DRAIN" || p == "DRAINED" || p == "DRAINING")
        })
}

/// A job's state and restart count as `scontrol show job` shows them (`JobState=`,
/// `Restarts=`).
fn job_in_slurm(conf: &str, job: u64) -> (String, Option<u32>) {
    let out = Command::new("scontrol")
        .args(["show", "job", &job.to_string()])
        .env("SLURM_CONF", conf)
        .output()
        .expect("scontrol");
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |key: &str| {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .map(str::to_string)
    };
    (
        field("JobState=").unwrap_or_default(),
        field("Restarts=").and_then(|n| n.parse().ok()),
    )
}

fn resume_in_slurm(conf: &str) {
    for n in NODES {
        let _ = Command::new("scontrol")
            .args(["update", &format!("NodeName={n}"), "State=RESUME"])
            .env("SLURM_CONF", conf)
            .output();
    }
}

/// One requeueable job on each of the test's nodes, running: their ids.
async fn running_jobs(conf: &str) -> Vec<u64> {
    resume_in_slurm(conf);
    let ids: Vec<u64> = NODES
        .iter()
        .map(|n| {
            crate::slurm::sbatch(
                conf,
                &[
                    "--requeue",
                    "-N1",
                    "-w",
                    n,
                    "-p",
                    "gpu",
                    "--output=/dev/null",
                    "--wrap",
                    "sleep 600",
                ],
            )
        })
        .collect();
    // slurmctld schedules on its own timer: on a loaded machine that took over 10 s once.
    for _ in 0..300 {
        if ids.iter().all(|&j| job_in_slurm(conf, j).0 == "RUNNING") {
            return ids;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the crash test's jobs did not start within 30 s: {ids:?}");
}

fn scancel(conf: &str, jobs: &[u64]) {
    let _ = Command::new("scancel")
        .args(jobs.iter().map(u64::to_string))
        .env("SLURM_CONF", conf)
        .output();
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Drain,
    Resume,
    Requeue,
}

pub(crate) struct Gantry {
    pub(crate) child: Child,
    pub(crate) addr: std::net::SocketAddr,
}

impl Drop for Gantry {
    /// A test that fails half-way leaves no server behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn spawn(config: &Path, db: &str, log: &Path) -> Gantry {
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("address");
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("server log");
    let err = out.try_clone().expect("server log");
    let child = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["serve", "--config"])
        .arg(config)
        .env("GANTRY_LISTEN", addr.to_string())
        .env("GANTRY_DATABASE_URL", db)
        .env(
            "RUST_LOG",
            "warn,server::actions=info,server::serve::replica=info",
        )
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn gantry");
    Gantry { child, addr }
}

pub(crate) async fn healthy(g: &mut Gantry, log: &Path) {
    for _ in 0..300 {
        if let Ok(Some(status)) = g.child.try_wait() {
            panic!(
                "gantry exited ({status}): {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        if tokio::net::TcpStream::connect(g.addr).await.is_ok()
            && support::get(g.addr, "/healthz").await.status == 200
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("gantry not healthy within 30 s");
}

/// Where the kill landed, judged from the rows it left.
fn kill_point(a: &server::store::StoredAction) -> &'static str {
    let ended = a
        .targets
        .iter()
        .filter(|t| !matches!(t.status.as_str(), "pending" | "calling"))
        .count();
    let calling = a.targets.iter().any(|t| t.status == "calling");
    match (ended, calling) {
        (0, false) => "after the record, before any call",
        (0, true) => "during the first call or its read-back",
        (n, _) if n == a.targets.len() => "after the last target",
        _ => "mid-way through the nodes",
    }
}

#[tokio::test]
async fn actions_survive_kill_9_at_any_point_on_a_real_slurm() {
    let Ok(conf) = std::env::var("GANTRY_TEST_SLURM_CONF") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "GANTRY_TEST_SLURM_CONF must be set in CI"
        );
        eprintln!("GANTRY_TEST_SLURM_CONF not set: crash test skipped (run `cargo xtask test`)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("gantry-crash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let calls = dir.join("calls.log");
    let server_log = dir.join("gantry.log");
    wrappers(&dir.join("bin"), &calls);
    let config = dir.join("gantry.toml");
    std::fs::write(
        &config,
        format!(
            "source = \"slurm\"\n[slurm]\nconf = \"{conf}\"\nbin_dir = \"{}\"\npoll_interval_ms = 500\ntimeout_ms = 3000\n\
             [auth]\nanonymous_read = false\nactions_per_minute = 1000\n",
            dir.join("bin").display()
        ),
    )
    .expect("config");
    let db = format!("sqlite://{}", dir.join("gantry.db").display());
    let store = server::store::Store::connect(&db).await.expect("store");
    add_users(&store).await;
    // A clean start: none of the test's nodes drained.
    resume_in_slurm(&conf);

    let mut g = spawn(&config, &db, &server_log);
    healthy(&mut g, &server_log).await;
    let cookie = login(g.addr, "operator1").await;
    let mut points: HashMap<&'static str, usize> = HashMap::new();
    let mut lost = 0;
    let mut disagree = Vec::new();
    let mut ids = Vec::new();
    for k in 0..ACTIONS {
        let kind = match k % 5 {
            0 | 2 => Kind::Drain,
            1 | 3 => Kind::Resume,
            _ => Kind::Requeue,
        };
        let drain = kind == Kind::Drain;
        let jobs = if kind == Kind::Requeue {
            running_jobs(&conf).await
        } else {
            Vec::new()
        };
        // Spread over the action's life (three targets take about a second), in an order
        // that does not follow k.
        let delay = Duration::from_millis(((k * 37) % ACTIONS) as u64 * 20);
        let mut marker = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&calls)
            .expect("calls log");
        std::io::Write::write_all(&mut marker, format!("# action {k}\n").as_bytes())
            .expect("marker");
        let (path, body) = match kind {
            Kind::Drain => (
                "/api/actions/drain",
                serde_json::json!({"nodes": NODES, "reason": format!("crash-{k}")}),
            ),
            Kind::Resume => ("/api/actions/resume", serde_json::json!({"nodes": NODES})),
            Kind::Requeue => (
                "/api/actions/requeue",
                serde_json::json!({"jobs": jobs, "reason": "crash test"}),
            ),
        };
        let r = post_json(g.addr, path, Some(&cookie), &body).await;
        assert_eq!(r.status, 202, "action {k}: {}", r.text());
        let id = r.json()["id"].as_i64().expect("id");
        ids.push(id);
        tokio::time::sleep(delay).await;
        g.child.kill().expect("kill -9");
        let _ = g.child.wait();
        let left = store.action(id).await.expect("read").expect("recorded");
        *points.entry(kill_point(&left)).or_default() += 1;

        g = spawn(&config, &db, &server_log);
        healthy(&mut g, &server_log).await;
        // Reconciled by the new process (sessions live in the database).
        let mut end = None;
        for _ in 0..60 {
            let s = store.action(id).await.expect("read").expect("recorded");
            if s.state == "done" || s.state == "stopped" {
                end = Some(s);
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let Some(end) = end else {
            lost += 1;
            continue;
        };
        if end.state != "done"
            || end
                .targets
                .iter()
                .any(|t| matches!(t.status.as_str(), "pending" | "calling"))
        {
            lost += 1;
        }
        for t in &end.targets {
            let (agrees, slurm) = if kind == Kind::Requeue {
                // Requeued once (the count Slurm keeps), or not at all.
                let job: u64 = t.target.parse().expect("job id");
                let (state, restarts) = job_in_slurm(&conf, job);
                let agrees = match t.status.as_str() {
                    "ok" => restarts == Some(1),
                    "interrupted" => restarts == Some(0),
                    _ => false,
                };
                (agrees, format!("{state} restarts {restarts:?}"))
            } else {
                let shows_drain = drained_in_slurm(&conf, &t.target);
                let agrees = match t.status.as_str() {
                    // Done (or found done): Slurm shows the requested state.
                    "ok" | "already" => shows_drain == drain,
                    // Judged not to have taken effect: Slurm shows the other state.
                    "interrupted" => shows_drain != drain,
                    _ => false,
                };
                let state = scontrol_node(&conf, &t.target)
                    .lines()
                    .find(|l| l.contains("State="))
                    .unwrap_or("")
                    .trim()
                    .to_string();
                (agrees, state)
            };
            if !agrees {
                disagree.push(format!(
                    "action {k} ({}) {}: {} {:?}, Slurm: {slurm}",
                    match kind {
                        Kind::Drain => "drain",
                        Kind::Resume => "resume",
                        Kind::Requeue => "requeue",
                    },
                    t.target,
                    t.status,
                    t.result,
                ));
            }
        }
        if kind == Kind::Requeue {
            scancel(&conf, &jobs);
        }
    }
    g.child.kill().expect("kill");
    let _ = g.child.wait();

    // Calls per action and node: at most one each.
    let log = std::fs::read_to_string(&calls).expect("calls log");
    let mut duplicated = Vec::new();
    let mut total = 0;
    for (k, segment) in log.split("# action ").skip(1).enumerate() {
        let mut per_target: HashMap<String, usize> = HashMap::new();
        for line in segment.lines().skip(1) {
            total += 1;
            let target = NODES
                .iter()
                .find(|n| line.contains(&format!("NodeName={n} ")))
                .map(|n| n.to_string())
                .or_else(|| {
                    // `requeue JOBID` or `requeuehold JOBID`.
                    line.split_whitespace()
                        .nth(1)
                        .filter(|_| line.starts_with("requeue"))
                        .map(str::to_string)
                });
            if let Some(t) = target {
                *per_target.entry(t).or_default() += 1;
            }
        }
        for (t, c) in per_target {
            if c > 1 {
                duplicated.push(format!("action {k}: {c} calls on {t}"));
            }
        }
    }
    resume_in_slurm(&conf);
    let mut by_point: Vec<_> = points.into_iter().collect();
    by_point.sort();
    eprintln!(
        "crash test: {ACTIONS} actions, each killed once; kill points {by_point:?}; {total} Slurm calls; \
         lost {lost}, duplicated {}, disagreeing {}",
        duplicated.len(),
        disagree.len()
    );
    assert_eq!(lost, 0, "lost actions");
    assert!(
        duplicated.is_empty(),
        "Slurm calls made twice: {duplicated:?}"
    );
    assert!(
        disagree.is_empty(),
        "audit rows that disagree with Slurm: {disagree:#?}"
    );
    // The kill points the test is for were all hit.
    for must in [
        "after the record, before any call",
        "during the first call or its read-back",
        "mid-way through the nodes",
    ] {
        assert!(
            by_point.iter().any(|(p, n)| *p == must && *n > 0),
            "no kill {must}: {by_point:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
