//! Why a pending job waits, on the wire: one category per job, Slurm's own reason code,
//! the evidence in words, and Slurm's start estimate.

use serde::{Deserialize, Serialize};

use crate::model::UnixMs;

/// What a pending job waits for. Every reason code of every Slurm version Gantry reads
/// falls into one of these (the server's `scheduler::pending`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    /// Another job must end first (`Dependency`, `DependencyNeverSatisfied`).
    Dependency,
    /// Held by its owner or an administrator, or asked to start later (`BeginTime`).
    Held,
    /// A QOS, association, partition or account limit.
    Limit,
    /// Not enough free GPUs now; it holds the top of the queue.
    Resources,
    /// Enough GPUs in total, but no block can hold one of its `--segment`s now.
    Segment,
    /// Jobs of higher priority are ahead of it.
    Priority,
    /// Nodes it needs are down, drained or reserved, or its partition is down.
    Nodes,
    /// A run of it ended in a failure and it waits to be started again.
    Failed,
    /// Not yet looked at by the scheduler, or being set up (prolog, cleaning).
    Starting,
}

impl WaitKind {
    pub const ALL: [WaitKind; 9] = [
        WaitKind::Resources,
        WaitKind::Segment,
        WaitKind::Priority,
        WaitKind::Limit,
        WaitKind::Dependency,
        WaitKind::Held,
        WaitKind::Nodes,
        WaitKind::Failed,
        WaitKind::Starting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WaitKind::Dependency => "dependency",
            WaitKind::Held => "held",
            WaitKind::Limit => "limit",
            WaitKind::Resources => "resources",
            WaitKind::Segment => "segment",
            WaitKind::Priority => "priority",
            WaitKind::Nodes => "nodes",
            WaitKind::Failed => "failed",
            WaitKind::Starting => "starting",
        }
    }

    /// For the filter and the column.
    pub fn label(self) -> &'static str {
        match self {
            WaitKind::Dependency => "dependency",
            WaitKind::Held => "held",
            WaitKind::Limit => "limit",
            WaitKind::Resources => "GPUs",
            WaitKind::Segment => "segment",
            WaitKind::Priority => "priority",
            WaitKind::Nodes => "nodes unavailable",
            WaitKind::Failed => "after a failure",
            WaitKind::Starting => "starting",
        }
    }

    pub fn parse(s: &str) -> Option<WaitKind> {
        WaitKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Why one pending job waits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Wait {
    pub kind: WaitKind,
    /// Slurm's reason code as it gave it (`Resources`, `QOSMaxGRESPerUser`, …).
    pub reason: String,
    /// The evidence in words: what it asks against what there is now.
    pub words: String,
    /// Slurm's estimate of its start (backfill's), when it has one.
    pub est_start_ms: Option<UnixMs>,
    /// Pending jobs of its partition with a higher priority.
    pub ahead: u32,
}
