//! The Slurm CLI transport against a real Slurm (16 nodes on this machine, started by
//! `cargo xtask test`, which passes its configuration in GANTRY_TEST_SLURM_CONF).

use std::time::Duration;

use app::model::{JobState, NodeState};
use server::slurm::cli::{Cli, CliError};

fn cluster() -> Option<Cli> {
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

fn sbatch(conf: &str, args: &[&str]) -> u64 {
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

async fn node(cli: &Cli, name: &str) -> server::slurm::json::SlurmNode {
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
        Err(CliError::BadNodeName(_))
    ));
    assert!(matches!(
        cli.drain("gpu005", "two\nlines").await,
        Err(CliError::BadReason(_))
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
    cli.requeue(job, false).await.expect("requeue");
    until("the job is requeued", || async {
        cli.jobs()
            .await
            .expect("jobs")
            .iter()
            .any(|j| j.job.id == job && j.restart_count == 1 && j.job.state != JobState::Running)
    })
    .await;
    // A pending job cannot be requeued: Slurm says why.
    let e = cli.requeue(job, false).await.expect_err("pending");
    assert!(e.to_string().contains("scontrol failed"), "{e}");

    let _ = std::process::Command::new("scancel")
        .arg(job.to_string())
        .env("SLURM_CONF", &conf)
        .status();
}
