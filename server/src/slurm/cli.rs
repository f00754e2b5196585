//! The Slurm CLI on a submit host: reads through `--json`, actions through `scontrol`.
//!
//! Every call is an argument vector (never a shell), has a deadline, and is killed when
//! it passes it. Node names and reasons are validated before anything runs, so hostile
//! text is refused or passed as one argument and stored verbatim.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use super::json::{parse_jobs, parse_nodes, JsonError};
use crate::scheduler::{
    validate_node_name, validate_reason, Invalid, SchedError, SchedFuture, SchedJob, SchedNode,
    Scheduler,
};

/// Why a CLI call failed. The message names the program and what it said.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("cannot run {program}: {message}")]
    Spawn { program: String, message: String },
    #[error("{program} did not answer within {ms} ms")]
    Timeout { program: String, ms: u64 },
    #[error("{program} failed (exit {code}): {stderr}")]
    Failed {
        program: String,
        code: i32,
        stderr: String,
    },
    #[error("{0}")]
    Json(#[from] JsonError),
    #[error("{0}")]
    Diag(#[from] super::diag::DiagError),
}

const NODES_UNKNOWN: u8 = 0;
const NODES_SCONTROL: u8 = 1;
const NODES_SINFO: u8 = 2;

/// The Slurm CLI.
pub struct Cli {
    /// Where the Slurm programs are; `None` searches PATH.
    bin_dir: Option<PathBuf>,
    /// Extra environment (`SLURM_CONF`).
    env: Vec<(String, String)>,
    timeout: Duration,
    /// Which command lists nodes as JSON here (scontrol from 23.02, sinfo before).
    nodes_via: AtomicU8,
}

impl Cli {
    pub fn new(bin_dir: Option<PathBuf>, env: Vec<(String, String)>, timeout: Duration) -> Cli {
        Cli {
            bin_dir,
            env,
            timeout,
            nodes_via: AtomicU8::new(NODES_UNKNOWN),
        }
    }

    async fn run(&self, program: &str, args: &[&str]) -> Result<Vec<u8>, CliError> {
        let path = self
            .bin_dir
            .as_ref()
            .map(|d| d.join(program))
            .unwrap_or_else(|| PathBuf::from(program));
        let child = tokio::process::Command::new(&path)
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| CliError::Spawn {
                program: program.into(),
                message: e.to_string(),
            })?;
        let out = tokio::time::timeout(self.timeout, child.wait_with_output())
            .await
            .map_err(|_| CliError::Timeout {
                program: program.into(),
                ms: self.timeout.as_millis() as u64,
            })?
            .map_err(|e| CliError::Spawn {
                program: program.into(),
                message: e.to_string(),
            })?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            Err(CliError::Failed {
                program: program.into(),
                code: out.status.code().unwrap_or(-1),
                stderr: stderr.trim().chars().take(500).collect(),
            })
        }
    }

    /// Every node, normalized.
    pub async fn nodes(&self) -> Result<Vec<SchedNode>, CliError> {
        if self.nodes_via.load(Ordering::Relaxed) != NODES_SINFO {
            match self.run("scontrol", &["show", "node", "--json"]).await {
                Ok(body) => {
                    self.nodes_via.store(NODES_SCONTROL, Ordering::Relaxed);
                    return Ok(parse_nodes(&body)?);
                }
                // Slurm 22.05's scontrol has no --json; its sinfo --json lists nodes.
                Err(CliError::Failed { ref stderr, .. })
                    if stderr.contains("unrecognized option") =>
                {
                    self.nodes_via.store(NODES_SINFO, Ordering::Relaxed);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(parse_nodes(&self.run("sinfo", &["--json"]).await?)?)
    }

    /// Every job Slurm still knows, normalized.
    pub async fn jobs(&self) -> Result<Vec<SchedJob>, CliError> {
        Ok(parse_jobs(&self.run("squeue", &["--json"]).await?)?)
    }

    /// slurmctld's diagnostics (`sdiag`'s text: 22.05 has no `--json`), Gantry's RPCs
    /// those of the user it runs as.
    pub async fn diag(&self) -> Result<app::queue::SchedHealth, CliError> {
        let out = self.run("sdiag", &[]).await?;
        let h = super::diag::parse_text(&String::from_utf8_lossy(&out))?;
        Ok(super::diag::with_gantry(h, process_user()))
    }

    /// Sets DRAIN with `reason` (validated; passed as one argument, stored verbatim).
    pub async fn drain(&self, node: &str, reason: &str) -> Result<(), CliError> {
        validate_node_name(node)?;
        validate_reason(reason)?;
        let n = format!("NodeName={node}");
        let r = format!("Reason={reason}");
        self.run("scontrol", &["update", &n, "State=DRAIN", &r])
            .await
            .map(drop)
    }

    /// Clears DRAIN/DOWN (State=RESUME).
    pub async fn resume(&self, node: &str) -> Result<(), CliError> {
        validate_node_name(node)?;
        let n = format!("NodeName={node}");
        self.run("scontrol", &["update", &n, "State=RESUME"])
            .await
            .map(drop)
    }

    /// Requeues a job (`scontrol requeue`), or requeues and holds it. With `exclude`: held
    /// first (`requeuehold`), its `ExcNodeList` set while it cannot start, then released
    /// unless `hold` (so it never starts on an excluded node in between).
    pub async fn requeue(
        &self,
        job_id: u64,
        hold: bool,
        exclude: &[String],
    ) -> Result<(), CliError> {
        for n in exclude {
            validate_node_name(n)?;
        }
        let id = job_id.to_string();
        if exclude.is_empty() {
            return self
                .run(
                    "scontrol",
                    &[if hold { "requeuehold" } else { "requeue" }, &id],
                )
                .await
                .map(drop);
        }
        self.run("scontrol", &["requeuehold", &id]).await?;
        let j = format!("JobId={id}");
        let x = format!("ExcNodeList={}", exclude.join(","));
        let set = self.run("scontrol", &["update", &j, &x]).await.map(drop);
        // Released even when the list could not be set: a requeue was asked for, not a hold.
        let released = if hold {
            Ok(())
        } else {
            self.run("scontrol", &["release", &id]).await.map(drop)
        };
        set.and(released)
    }
}

/// A transport error as the scheduler's callers see it; refused input stays refused input.
impl From<CliError> for SchedError {
    fn from(e: CliError) -> SchedError {
        match e {
            CliError::Invalid(i) => SchedError::Invalid(i),
            other => SchedError::Transport(Box::new(other)),
        }
    }
}

impl Scheduler for Cli {
    fn nodes(&self) -> SchedFuture<'_, Vec<SchedNode>> {
        Box::pin(async move { Ok(Cli::nodes(self).await?) })
    }
    fn jobs(&self) -> SchedFuture<'_, Vec<SchedJob>> {
        Box::pin(async move { Ok(Cli::jobs(self).await?) })
    }
    fn drain<'a>(&'a self, node: &'a str, reason: &'a str) -> SchedFuture<'a, ()> {
        Box::pin(async move { Ok(Cli::drain(self, node, reason).await?) })
    }
    fn resume<'a>(&'a self, node: &'a str) -> SchedFuture<'a, ()> {
        Box::pin(async move { Ok(Cli::resume(self, node).await?) })
    }
    fn requeue<'a>(&'a self, job: u64, hold: bool, exclude: &'a [String]) -> SchedFuture<'a, ()> {
        Box::pin(async move { Ok(Cli::requeue(self, job, hold, exclude).await?) })
    }
    fn diag(&self) -> SchedFuture<'_, Option<app::queue::SchedHealth>> {
        Box::pin(async move { Ok(Some(Cli::diag(self).await?)) })
    }
}

/// The name of the user this process runs as (its uid in `/etc/passwd`), for `sdiag`'s
/// RPCs by user: read once.
pub fn process_user() -> Option<String> {
    static USER: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    USER.get_or_init(|| {
        use std::io::Read;
        use std::os::unix::fs::MetadataExt;
        // `/proc/self` belongs to the process's effective user.
        let uid = std::fs::metadata("/proc/self").ok()?.uid();
        let mut text = String::new();
        std::fs::File::open("/etc/passwd")
            .ok()?
            .take(1 << 20)
            .read_to_string(&mut text)
            .ok()?;
        text.lines().find_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let id: u32 = f.nth(1)?.parse().ok()?;
            (id == uid).then(|| name.to_string())
        })
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_program_and_a_slow_one_fail_clearly() {
        let cli = Cli::new(
            Some(PathBuf::from("/nonexistent/slurm/bin")),
            Vec::new(),
            Duration::from_secs(1),
        );
        let e = cli.jobs().await.expect_err("no squeue");
        assert!(e.to_string().starts_with("cannot run squeue"), "{e}");
        // `sleep` stands in for a hung scontrol: killed at the deadline.
        let slow = Cli::new(None, Vec::new(), Duration::from_millis(200));
        let e = slow.run("sleep", &["5"]).await.expect_err("timeout");
        assert!(matches!(e, CliError::Timeout { ms: 200, .. }), "{e}");
    }
}
