//! The scheduler as Gantry sees it, whoever implements it (the Slurm CLI and slurmrestd in
//! `slurm/`, the simulator in `sources::sim`): the normalized node and job types every
//! transport reads into ([`SchedNode`], [`SchedJob`]), the checks a node name and a reason
//! pass before any scheduler sees them, and the [`Scheduler`] trait (reads, and Slurm's
//! actions: drain, resume, requeue). Knows no transport and no source.

use std::sync::Arc;

use app::model::{Job, NodeState};
use futures_util::future::BoxFuture;

pub mod pending;

/// A node as the scheduler reports it, normalized.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct SchedNode {
    pub name: String,
    pub state: NodeState,
    /// The scheduler's own words: base state first, then flags.
    pub raw_state: Vec<String>,
    pub reason: Option<String>,
    pub partitions: Vec<String>,
    pub gpus_total: Option<u32>,
    pub gpus_used: Option<u32>,
}

/// A job as the scheduler reports it, normalized.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct SchedJob {
    pub job: Job,
    pub raw_state: Vec<String>,
    pub state_reason: Option<String>,
    pub restart_count: u32,
    pub exit_code: Option<i64>,
    /// Nodes asked for (a pending job) or held.
    #[serde(default)]
    pub node_count: u32,
    /// Slurm's `--segment` (topology/block): nodes come in groups of this many, each group
    /// in one base block. None when not asked.
    #[serde(default)]
    pub segment_size: Option<u32>,
    /// Nodes it must not run on (Slurm's `ExcNodeList`, `excluded_nodes`).
    #[serde(default)]
    pub excluded: Vec<String>,
    /// What the queue knows of it: time limit, priority, dependency, start estimate.
    #[serde(default)]
    pub queue: QueueFacts,
}

impl SchedJob {
    /// `job` as a scheduler would list it with nothing else known (no reason, restarts,
    /// exclusions or queue facts; its node count from its nodes, at least one).
    pub fn of(job: Job) -> SchedJob {
        SchedJob {
            node_count: (job.nodes.len() as u32).max(1),
            job,
            raw_state: Vec::new(),
            state_reason: None,
            restart_count: 0,
            exit_code: None,
            segment_size: None,
            excluded: Vec::new(),
            queue: QueueFacts::default(),
        }
    }
}

/// A job's place in the queue, as the scheduler reports it.
#[derive(
    Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
pub struct QueueFacts {
    /// Its time limit (`--time`), when it has one.
    pub time_limit_ms: Option<i64>,
    /// A pending job's start as the scheduler estimates it (backfill's), when it has one.
    pub est_start_ms: Option<app::model::UnixMs>,
    /// Its priority: higher goes first.
    pub priority: Option<u64>,
    /// Its dependency in Slurm's words (`afterok:1234`).
    pub dependency: Option<String>,
    /// Its QOS.
    pub qos: Option<String>,
}

/// Input refused before it reaches any scheduler.
#[derive(Debug, thiserror::Error)]
pub enum Invalid {
    #[error("invalid node name {0:?}: letters, digits, '.', '_' and '-' only, at most 64")]
    BadNodeName(String),
    #[error("invalid reason: {0}")]
    BadReason(&'static str),
}

/// Longest reason Gantry passes to a scheduler.
pub const MAX_REASON_BYTES: usize = 4000;

/// A Slurm node name: `[A-Za-z0-9._-]{1,64}`, not starting with '-'.
pub fn validate_node_name(name: &str) -> Result<(), Invalid> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Invalid::BadNodeName(name.chars().take(80).collect()))
    }
}

/// A drain reason: not empty, at most [`MAX_REASON_BYTES`], no control characters
/// (a newline would split Slurm's one-line reason).
pub fn validate_reason(reason: &str) -> Result<(), Invalid> {
    if reason.trim().is_empty() {
        return Err(Invalid::BadReason("a reason is required"));
    }
    if reason.len() > MAX_REASON_BYTES {
        return Err(Invalid::BadReason("longer than 4000 bytes"));
    }
    if reason.chars().any(char::is_control) {
        return Err(Invalid::BadReason(
            "control characters (newlines, tabs) are not allowed",
        ));
    }
    Ok(())
}

/// Why a scheduler call failed. The message is safe to show an operator: the input that
/// was refused, the scheduler's own refusal, or a plain description of what did not answer.
#[derive(Debug, thiserror::Error)]
pub enum SchedError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// A transport's own error (a program that failed, a document that did not parse).
    #[error("{0}")]
    Transport(Box<dyn std::error::Error + Send + Sync>),
    #[error("the scheduler refused: {0}")]
    Refused(String),
    #[error("the scheduler is not available: {0}")]
    Unavailable(String),
}

pub type SchedFuture<'a, T> = BoxFuture<'a, Result<T, SchedError>>;

/// What Gantry needs of a scheduler.
pub trait Scheduler: Send + Sync + 'static {
    fn nodes(&self) -> SchedFuture<'_, Vec<SchedNode>>;
    fn jobs(&self) -> SchedFuture<'_, Vec<SchedJob>>;
    /// Sets DRAIN with `reason` (stored verbatim).
    fn drain<'a>(&'a self, node: &'a str, reason: &'a str) -> SchedFuture<'a, ()>;
    fn resume<'a>(&'a self, node: &'a str) -> SchedFuture<'a, ()>;
    /// Requeues a running job, held if `hold`; with `exclude`, the job never runs on those
    /// nodes again (Slurm's `ExcNodeList`, set to exactly this list: the caller joins the
    /// job's earlier exclusions).
    fn requeue<'a>(&'a self, job: u64, hold: bool, exclude: &'a [String]) -> SchedFuture<'a, ()>;
    /// Whether this process can call the scheduler now. A standby replica of the simulator
    /// cannot (the simulated cluster lives in the leader): its actions are recorded and
    /// handed to the leader through the store.
    fn runs_here(&self) -> bool {
        true
    }
    /// The scheduler's own health (slurmctld's `sdiag`), where it reports one.
    fn diag(&self) -> SchedFuture<'_, Option<app::queue::SchedHealth>> {
        Box::pin(async { Ok(None) })
    }
}

pub type SharedScheduler = Arc<dyn Scheduler>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_are_validated() {
        for ok in ["gpu001", "dgx-a100.rack1", "n_1"] {
            assert!(validate_node_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-x",
            "gpu001; reboot",
            "a b",
            "gpu$(id)",
            "gpu\n1",
            &"x".repeat(65),
            "gpü1",
        ] {
            assert!(
                matches!(validate_node_name(bad), Err(Invalid::BadNodeName(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn reasons_are_validated() {
        assert!(
            validate_reason("XID 79: GPU fell off the bus; $(rm -rf /) \"quoted\" 'single'")
                .is_ok()
        );
        assert!(validate_reason("   ").is_err());
        assert!(validate_reason("line1\nline2").is_err());
        assert!(validate_reason(&"r".repeat(10_000)).is_err());
    }
}
