//! Wire types of the node and job views. No I/O here.

use serde::{Deserialize, Serialize};

use crate::actions::Me;
use crate::live::NodeTile;
use crate::model::{GpuReading, JobState, NodeState, UnixMs};

/// One node as the scheduler last reported it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeRow {
    pub name: String,
    pub rack: String,
    pub state: NodeState,
    /// Slurm's own words (`MIXED+DRAIN`).
    pub raw_state: String,
    pub reason: Option<String>,
    pub gpus_total: Option<u32>,
    pub gpus_used: Option<u32>,
    pub jobs: Vec<u64>,
}

/// A pending or running job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRow {
    pub id: u64,
    pub name: String,
    pub user: String,
    pub state: JobState,
    pub nodes: Vec<String>,
    pub gpus: u32,
    pub start_ms: Option<UnixMs>,
    pub restart_count: u32,
    pub reason: Option<String>,
}

/// The nodes page's data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodesView {
    pub me: Me,
    /// The source's time of the poll.
    pub at_ms: UnixMs,
    /// Wall-clock time of the poll, and the server's clock when this was sent.
    pub polled_ms: UnixMs,
    pub server_now_ms: UnixMs,
    /// How often the scheduler is polled; older than three of these is stale.
    pub interval_ms: i64,
    pub racks: Vec<String>,
    pub nodes: Vec<NodeRow>,
    pub jobs: Vec<JobRow>,
}

/// An XID seen on a GPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct XidSeen {
    pub gpu: u32,
    pub xid: u32,
    pub at_ms: UnixMs,
}

/// The node page's data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeDetail {
    pub me: Me,
    pub name: String,
    /// The live tile (power, hottest GPU, SM, throttling), when the node is in the layout.
    pub tile: Option<NodeTile>,
    /// The scheduler's view, as of its last poll.
    pub slurm: Option<NodeRow>,
    /// Each GPU's latest readings (empty values when the node is not reporting).
    pub gpus: Vec<GpuReading>,
    pub jobs: Vec<JobRow>,
    /// Newest first.
    pub xids: Vec<XidSeen>,
    /// Source time of the readings, and the wall clock of their publication and now.
    pub at_ms: UnixMs,
    pub published_ms: UnixMs,
    pub server_now_ms: UnixMs,
    pub interval_ms: i64,
}

/// One alert, for the alerts page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertItem {
    pub id: i64,
    pub rule: String,
    pub subject: String,
    pub severity: String,
    pub summary: String,
    pub link: String,
    /// `firing` or `resolved`.
    pub state: String,
    pub started_ms: UnixMs,
    pub resolved_ms: Option<UnixMs>,
    pub acked_by: Option<String>,
    pub ack_note: Option<String>,
    pub silenced_until_ms: Option<UnixMs>,
}

/// The alerts page's data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertsView {
    pub me: Me,
    pub server_now_ms: UnixMs,
    pub alerts: Vec<AlertItem>,
}
