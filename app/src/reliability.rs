//! Reliability: job interruptions and their causes, and the rates behind them (server and
//! browser). The server attributes each interruption from the evidence it stored
//! (`server::reliability`); nothing here does I/O.

use serde::{Deserialize, Serialize};

use crate::model::UnixMs;
use crate::reports::ReportQuery;

/// What ended a job's run before its time, as far as the evidence tells.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// A GPU failed (fell off the bus, its system processor stopped, an engine halted).
    Gpu,
    /// GPU memory: uncorrectable ECC errors, row remapping failures.
    GpuMemory,
    NvLink,
    /// An InfiniBand port went down under the job.
    Network,
    /// The node stopped answering or the scheduler ended the job as NODE_FAIL.
    Host,
    /// The job's processes were killed by a signal (an NCCL watchdog aborts with SIGABRT).
    Software,
    /// The job's own error: a non-zero exit code, or an XID the application causes.
    UserApplication,
    /// Ended on purpose: requeued by an operator, preempted.
    Planned,
    /// No evidence: an honest answer.
    #[default]
    Unknown,
}

impl Cause {
    pub const ALL: [Cause; 9] = [
        Cause::Gpu,
        Cause::GpuMemory,
        Cause::NvLink,
        Cause::Network,
        Cause::Host,
        Cause::Software,
        Cause::UserApplication,
        Cause::Planned,
        Cause::Unknown,
    ];

    /// The name in URLs, CSV files and `/sim/truth`.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Gpu => "gpu",
            Cause::GpuMemory => "gpu_memory",
            Cause::NvLink => "nvlink",
            Cause::Network => "network",
            Cause::Host => "host",
            Cause::Software => "software",
            Cause::UserApplication => "user_application",
            Cause::Planned => "planned",
            Cause::Unknown => "unknown",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Cause::Gpu => "GPU",
            Cause::GpuMemory => "GPU memory (HBM)",
            Cause::NvLink => "NVLink",
            Cause::Network => "Network (InfiniBand)",
            Cause::Host => "Host / node",
            Cause::Software => "Software / NCCL",
            Cause::UserApplication => "User application",
            Cause::Planned => "Planned (operator, preemption)",
            Cause::Unknown => "Unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Cause> {
        Cause::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Whether the hardware or the platform failed (not the job itself, not on purpose).
    pub fn is_unexpected(self) -> bool {
        !matches!(self, Cause::UserApplication | Cause::Planned)
    }
}

/// One interruption with its attributed cause.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interruption {
    pub job_id: u64,
    pub job_name: String,
    pub account: String,
    pub user: String,
    /// When the run ended.
    pub at_ms: UnixMs,
    /// When the run that ended had started (`None` when the history lacks its start).
    pub run_start_ms: Option<UnixMs>,
    pub gpus: u32,
    /// How the scheduler ended it: failed, node_fail, requeued, preempted.
    pub state: String,
    pub cause: Cause,
    /// The node the evidence points at, if any.
    pub node: Option<String>,
    pub rack: Option<String>,
    pub gpu_model: Option<String>,
    /// The evidence, in words ("XID 79 on gpu017 GPU 3: GPU has fallen off the bus").
    pub evidence: String,
}

/// Interruptions of one cause in a group.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CauseCount {
    pub cause: Cause,
    pub count: u32,
    /// Of all interruptions in the table's scope, 0.0 to 1.0.
    pub share: f64,
}

/// A row of a "by something" table: the group and its interruptions by cause.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupCauses {
    pub group: String,
    pub total: u32,
    /// Counts in the order of [`Cause::ALL`].
    pub counts: Vec<u32>,
}

/// Mean time between interruptions for jobs of one size.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SizeRate {
    /// Jobs of `gpus_from..=gpus_to` GPUs.
    pub gpus_from: u32,
    pub gpus_to: u32,
    /// Runs of such jobs that ran in the period, and the wall hours they ran in it.
    pub runs: u32,
    pub run_hours: f64,
    pub gpu_hours: f64,
    pub interruptions: u32,
    /// Run hours per interruption; `None` without one.
    pub mtbi_hours: Option<f64>,
}

/// Time out of service of one node in the period.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeRepair {
    pub node: String,
    /// Times it went out of service (down, drained, not responding) and came back.
    pub repairs: u32,
    pub out_of_service_hours: f64,
    /// Mean time to repair; `None` while it never came back in the period.
    pub mttr_hours: Option<f64>,
}

/// `/reliability`: interruptions by cause and the rates, for a period.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reliability {
    pub query: ReportQuery,
    pub from_ms: UnixMs,
    pub to_ms: UnixMs,
    pub now_ms: UnixMs,
    /// Every cause, in the order of [`Cause::ALL`], with its count and share.
    pub by_cause: Vec<CauseCount>,
    /// Of the unexpected ones (hardware and platform), their count.
    pub unexpected: u32,
    /// By the query's grouping (account, partition, user, rack or switch domain).
    pub by_group: Vec<GroupCauses>,
    pub by_gpu_model: Vec<GroupCauses>,
    /// Nodes the evidence pointed at, most interruptions first.
    pub by_node: Vec<GroupCauses>,
    pub by_size: Vec<SizeRate>,
    /// GPU-hours of job runs in the period per interruption, times 1,000: the mean time
    /// between interruptions of a job of 1,000 GPUs, in hours; `None` without one.
    pub mtbi_hours_per_1000_gpus: Option<f64>,
    pub run_gpu_hours: f64,
    pub repairs: Vec<NodeRepair>,
    /// The newest interruptions first, at most [`MAX_LISTED`].
    pub interruptions: Vec<Interruption>,
    /// How many there were in all (the list may be cut).
    pub total: u32,
}

/// The longest list of interruptions a page carries (the CSV has them all).
pub const MAX_LISTED: usize = 500;

/// Job sizes for the rates, in GPUs (each bucket up to the next's start).
pub const SIZE_BUCKETS: [u32; 7] = [1, 9, 65, 257, 1025, 4097, 16385];
